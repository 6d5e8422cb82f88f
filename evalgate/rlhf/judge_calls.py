"""The judge's calls: rendered with the judge's own chat template (a served judge without a local copy: the judge's
message sent as a chat message, the server's template applied to it), looked up in evalgate's generation cache, the
missing ones generated on an evalgate backend (hf, vllm, openai) and stored as each finishes, as a run's own
generations are (``runner.generate``), so a resumed run does not ask the judge again.

A judge call's cache key is (judge identity, judge prompt): the ``generations`` row's checkpoint column holds the
judge's digest (``served:<model id>`` for a served judge without local weights), its protocol column
``judge:<sha256>`` of the judge's identity (backend, digest, model id, sampling), its item column and prompt hash the
sha256 of the rendered judge prompt, sample index 0, the seed derived from the judge's sampling seed and that prompt
hash (``backends.base.sample_seed``), and the settings hash of the judge's backend (``backends.settings``). Two runs
that show the judge the same prompt share one call. On a sealed tier (private, human-audit) that hash is the keyed
HMAC a sealed run's own prompts get (``sealing.Sealer.digest``), not a bare sha256: the judge's prompt holds the
item's question and the completion, and a bare hash in the store would confirm a guessed one (docs/SECURITY.md).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput, EvalgateError
from evalgate.rlhf.judge_options import JudgeOptions


@dataclass(frozen=True)
class JudgePrompt:
    """One judge call: ``text`` the judge's full prompt (its chat template applied), ``sha256`` its hash (the cache
    key; a keyed HMAC on a sealed tier), ``seed`` the call's sampling seed."""

    sha256: str
    text: str
    seed: int


def cache_identity(options: JudgeOptions) -> tuple[str, str]:
    """The judge's (checkpoint column, protocol column) in the generation cache: its digest (or ``served:<model>``)
    and ``judge:`` + sha256 of its identity (backend, digest, model id, sampling; not the template, which is in
    each prompt, nor the parse rule, which reads the output without changing it)."""
    from evalgate.protocol.spec import canonical_json, sha256_text

    j = options.judge
    ident = j.digest or f"served:{j.model}"
    key = {"backend": j.backend, "digest": j.digest, "model": j.model, "sampling": options.sampling.model_dump()}
    return ident, "judge:" + sha256_text(canonical_json(key))


def judge_path(options: JudgeOptions, protocol_path: Path) -> Path | None:
    """The judge checkpoint's path: ``~`` and ``$VAR`` expanded, a relative one taken from the protocol file's
    folder; None for a served judge without local weights.

    Raises:
        BadInput: the path names an environment variable that is not set.
    """
    given = options.judge.checkpoint
    if given is None:
        return None
    expanded = os.path.expanduser(os.path.expandvars(given))
    if "$" in expanded:
        raise BadInput(f"protocol {protocol_path}: scorer.options.judge.checkpoint {given!r} names an environment "
                       "variable that is not set; set it to the judge checkpoint's path")
    p = Path(expanded)
    return p if p.is_absolute() else (protocol_path.parent / p)


CONTROL_SPELLINGS = re.compile(r"<\|[^|<>\s]{1,64}\|>|</?s>|\[/?INST\]|<(?:start|end)_of_turn>|<bos>|<eos>")
"""How the common chat formats spell their control tokens: ChatML's and Llama 3's ``<|...|>`` (``<|im_end|>``,
``<|eot_id|>``, ``<|start_header_id|>``), Llama 2's and Mistral's ``<s>``, ``</s>``, ``[INST]``, ``[/INST]``,
Gemma's ``<start_of_turn>``, ``<end_of_turn>``, ``<bos>``, ``<eos>``."""


def served_text(user_text: str) -> str:
    """A served judge's message when no local tokenizer says which strings are its special tokens: each spelling of
    ``CONTROL_SPELLINGS`` gets a zero-width space after its first character (``prompts.literal_text``'s break), so a
    completion in the message cannot close the user's turn if the server reads such text as a token (vLLM and
    ``transformers serve`` tokenize the rendered template). A model whose control tokens are spelt otherwise is
    covered only with a local copy (``judge.checkpoint`` and ``judge.digest``), which names them exactly."""
    return CONTROL_SPELLINGS.sub(lambda m: m.group()[0] + "\u200b" + m.group()[1:], user_text)


class JudgeCalls:
    """The judge model behind the cache; its checkpoint is resolved (and its digest checked) on first use, its
    engine loaded only when a call is missing from the cache.

    Args:
        options: the ``judge`` scorer's options.
        protocol_path: the protocol file (a relative judge checkpoint is found beside it).
        store: the store holding the generation cache.
        run_id: the run the calls are made for (stored with them; a sealed tier's run seals them).
        digest: the prompt hash instead of sha256: a sealed tier's keyed HMAC (``sealing.Sealer.digest``).

    Attributes:
        outputs: judge output text by prompt sha256, for every call looked up or made so far.
        asked: calls generated by this object; ``cached``: calls found in the cache.
    """

    def __init__(self, options: JudgeOptions, protocol_path: Path, store: Any, run_id: str,
                 digest: Callable[[str], str] | None = None) -> None:
        from evalgate.backends.base import check_backend, generation_settings
        from evalgate.backends.settings import settings_sha256

        self.options, self.protocol_path, self.store, self.run_id = options, protocol_path, store, run_id
        self.digest = digest or (lambda text: hashlib.sha256(text.encode("utf-8")).hexdigest())
        j = options.judge
        # a served judge without a local copy: the server applies its own chat template (/v1/chat/completions)
        self.served_only = j.backend == "openai" and j.checkpoint is None
        given = {k: v for k, v in {"base_url": j.base_url, "model": j.model}.items() if v is not None}
        if self.served_only:
            given["endpoint"] = "chat"
        self.backend_options = check_backend(j.backend, given if j.backend == "openai" else {})
        self.settings_sha256 = settings_sha256(generation_settings(j.backend, self.backend_options))
        self.ident, self.hash = cache_identity(options)
        self.outputs: dict[str, str] = {}
        self.asked = self.cached = 0
        self.generate_s = 0.0
        self._model_dir: Path | None = None
        self._tokenizer: Any = None
        self._backend: Any = None

    def _resolve(self) -> Any:
        """The judge's tokenizer, after resolving its checkpoint and checking the pinned digest (once); None for a
        served judge without a local copy (``served_only``).

        Raises:
            BadInput: a missing checkpoint, or a digest that is not the pinned one (names both and says to update the
                protocol).
        """
        if self._tokenizer is not None or self.served_only:
            return self._tokenizer
        from evalgate.checkpoints.model import load_tokenizer
        from evalgate.checkpoints.resolve import resolve_checkpoint

        path = judge_path(self.options, self.protocol_path)
        assert path is not None  # an hf or vllm judge names a checkpoint; an openai one without is served_only
        ckpt = resolve_checkpoint(path, env=self.store.env)
        if ckpt.digest != self.options.judge.digest:
            raise BadInput(f"judge checkpoint {path} has digest {ckpt.digest}, the protocol pins "
                           f"{self.options.judge.digest}; a different judge would change every verdict: pin the new "
                           "digest in the protocol's scorer.options.judge.digest (a new protocol version)")
        self._model_dir = ckpt.model_dir
        self._tokenizer = load_tokenizer(ckpt.model_dir)
        return self._tokenizer

    def prompt(self, user_text: str) -> JudgePrompt:
        """The judge call for one user message: the judge's chat template applied (generation prompt added) to the
        message as text only (``prompts.literal_text``: a completion in it cannot close the user's turn and forge
        the judge's own). A served judge without a local copy gets the message itself (``served_text``), which the
        server puts into its own chat template."""
        from evalgate.backends.base import sample_seed
        from evalgate.protocol.prompts import literal_text

        tok = self._resolve()
        if tok is None:
            text = served_text(user_text)
        else:
            text = str(tok.apply_chat_template([{"role": "user", "content": literal_text(tok, user_text)}],
                                               tokenize=False, add_generation_prompt=True))
        sha = self.digest(text)
        return JudgePrompt(sha, text, sample_seed(self.options.sampling.seed, sha, 0))

    def lookup(self, prompts: Sequence[JudgePrompt]) -> int:
        """Fill ``outputs`` from the generation cache for ``prompts``; returns how many are still missing."""
        want = {p.sha256: p for p in prompts if p.sha256 not in self.outputs}
        if want:
            found = self.store.cached_generations(self.ident, self.hash, [(h, 0, p.seed) for h, p in want.items()],
                                                  {h: h for h in want}, self.settings_sha256)
            self.outputs.update({k[0]: row["text"] for k, row in found.items()})
            self.cached += len(found)
        return sum(1 for p in want.values() if p.sha256 not in self.outputs)

    def ask(self, prompts: Sequence[JudgePrompt]) -> None:
        """Generate the calls of ``prompts`` that ``outputs`` lacks, in one backend call, storing each as it
        finishes.

        Raises:
            EngineError, MissingExtra: the judge's backend failed or is not installed (stored calls are kept).
            EvalgateError: the backend returned no output for some calls.
        """
        missing = list({p.sha256: p for p in prompts if p.sha256 not in self.outputs}.values())
        if not missing:
            return
        from evalgate.backends.base import EffectiveParams, GenerationRequest, get_backend

        self._resolve()
        if self._backend is None:
            self._backend = get_backend(self.options.judge.backend, str(self._model_dir or ""), self.backend_options,
                                        tokenizer=self._tokenizer)
        s = self.options.sampling
        params = EffectiveParams(s.temperature, 1.0, 0, s.max_tokens, (), 1.0)
        reqs = [GenerationRequest(p.sha256, p.text, (0,), (p.seed,), params) for p in missing]
        by_sha = {p.sha256: p for p in missing}
        t0 = time.perf_counter()
        self._backend.generate(reqs, on_result=lambda res: self._store(res, by_sha[res.request.key]))
        self.generate_s += time.perf_counter() - t0
        still = [p.sha256 for p in missing if p.sha256 not in self.outputs]
        if still:
            raise EvalgateError(f"judge backend {self.options.judge.backend} returned no output for {len(still)} "
                                "judge calls")

    def _store(self, res: Any, prompt: JudgePrompt) -> None:
        c = res.completions[0]
        row = {"item_id": prompt.sha256, "sample_index": 0, "seed": prompt.seed, "prompt_sha256": prompt.sha256,
               "text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
               "finish_reason": c.finish_reason}
        self.store.put_generations(self.ident, self.hash, [row], {prompt.sha256: prompt.text}, self.settings_sha256,
                                   self.run_id)
        self.outputs[prompt.sha256] = c.text
        self.asked += 1

    def info(self) -> dict[str, Any]:
        """What the run records about the judge's calls: identity, backend, calls asked and cached, seconds, and
        the backend's own report when it was loaded."""
        out: dict[str, Any] = {"identity": self.ident, "cache_key": self.hash, "backend": self.options.judge.backend,
                               "model": self.options.judge.model, "asked": self.asked, "cached": self.cached,
                               "generate_s": round(self.generate_s, 3)}
        if self.served_only:
            out["chat_template"] = "the server's"
        if self._backend is not None:
            out["engine"] = {k: v for k, v in self._backend.info().items() if isinstance(v, str | int | float | bool)}
        return out
