"""``parity()``: generate the same protocol x checkpoint x split with two backends and report where they drift.

The generation cache is keyed without the backend (the same protocol on the same checkpoint should give the same
samples whatever the engine), so parity bypasses it: both backends generate every sample afresh and nothing is
written to the cache. The split read is checked against its tier policy and logged (purpose ``parity``), like any
read; a private split refuses it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evalgate.backends.base import (
    GenerationRequest,
    GenerationResult,
    check_backend,
    get_backend,
    sample_seed,
)
from evalgate.checkpoints import load_tokenizer, resolve_checkpoint
from evalgate.errors import BadInput
from evalgate.progress import progress_bars
from evalgate.prompts import render_prompt
from evalgate.protocol import load_protocol, verify
from evalgate.run import effective_params
from evalgate.splits import SplitManager, actor_name
from evalgate.store import Store

PURPOSE = "parity"


def first_difference(a: str, b: str) -> int | None:
    """Index of the first character where ``a`` and ``b`` differ (the shorter length if one is a prefix of the
    other), or None when they are equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def compare(results_a: list[GenerationResult], results_b: list[GenerationResult]) -> dict[str, Any]:
    """Per-sample comparison of two backends' results for the same requests.

    Returns:
        ``samples``, ``identical`` (text and finish_reason equal), ``identical_rate``, ``text_mismatches``,
        ``finish_reason_mismatches``, ``token_count_mismatches`` and ``drift``: one row per differing sample
        (item_id, sample_index, diverge_at character, both texts, finish_reasons and token counts).
    """
    by_key = {r.request.key: r for r in results_b}
    rows, n, same, text_diff, fr_diff, tok_diff = [], 0, 0, 0, 0, 0
    for ra in results_a:
        rb = by_key[ra.request.key]
        for j, ca, cb in zip(ra.request.sample_indices, ra.completions, rb.completions, strict=True):
            n += 1
            at = first_difference(ca.text, cb.text)
            text_diff += at is not None
            fr_diff += ca.finish_reason != cb.finish_reason
            tok_diff += ca.completion_tokens != cb.completion_tokens
            if at is None and ca.finish_reason == cb.finish_reason:
                same += 1
                continue
            rows.append({"item_id": ra.request.key, "sample_index": j, "diverge_at": at, "a_text": ca.text,
                         "b_text": cb.text, "a_finish_reason": ca.finish_reason, "b_finish_reason": cb.finish_reason,
                         "a_tokens": ca.completion_tokens, "b_tokens": cb.completion_tokens})
    return {"samples": n, "identical": same, "identical_rate": same / n if n else 1.0, "text_mismatches": text_diff,
            "finish_reason_mismatches": fr_diff, "token_count_mismatches": tok_diff, "drift": rows}


def parity(protocol_path: str | Path, checkpoint: str | Path, split: str, backend_a: str, backend_b: str,
           options_a: dict[str, Any] | None = None, options_b: dict[str, Any] | None = None,
           seed: int | None = None, limit: int | None = None, actor: str | None = None,
           store: Store | None = None, progress: bool = True) -> dict[str, Any]:
    """Generate a split's samples with two backends and compare them sample by sample.

    Args:
        protocol_path: frozen protocol YAML.
        checkpoint: HF directory or GGUF file (both backends must serve these weights).
        split: split name (not private: its policy refuses purpose ``parity``).
        backend_a, backend_b: backend names; options_a, options_b their options.
        seed: sampling seed (default: the protocol's).
        limit: compare only the first ``limit`` items.
        actor: who reads (logged).
        store: the Store.
        progress: False turns off transformers' and huggingface_hub's progress bars (GGUF conversion, model
            loading) for the call.

    Returns:
        ``compare()``'s document plus protocol, checkpoint digest, split, both backends' info and wall times.

    Raises:
        BadInput, ProtocolDrift, RefusedByPolicy: as ``evaluate``.
        EngineError: a backend failed.
    """
    protocol = load_protocol(protocol_path)
    verify(protocol)
    with progress_bars(progress):
        ckpt = resolve_checkpoint(checkpoint)
    store = store or Store()
    who = actor_name(actor)
    checked_a = check_backend(backend_a, options_a or {})
    checked_b = check_backend(backend_b, options_b or {})
    manager = SplitManager(store)
    manifest, _ = manager.check(split, PURPOSE, who, None, ckpt.digest, protocol.sha256)
    items = manager.read(manifest)[:limit] if limit else manager.read(manifest)
    if not items:
        raise BadInput(f"split {split} has no items")
    manager.log_read(manifest, who, PURPOSE, cached=False, checkpoint_digest=ckpt.digest,
                     protocol_hash=protocol.sha256, detail=f"parity {backend_a} vs {backend_b}")
    tokenizer = load_tokenizer(ckpt.model_dir) if protocol.chat_template != "none" else None
    params = effective_params(protocol)
    run_seed = protocol.spec.sampling.seed if seed is None else seed
    n = protocol.spec.sampling.n
    requests = []
    for it in items:
        iid = str(it["id"])
        requests.append(GenerationRequest(iid, render_prompt(protocol, it, tokenizer).text, tuple(range(n)),
                                          tuple(sample_seed(run_seed, iid, j) for j in range(n)), params))
    out: dict[str, Any] = {}
    results = []
    for label, name, opts in (("a", backend_a, checked_a), ("b", backend_b, checked_b)):
        with progress_bars(progress):  # the model loads in get_backend or in generate
            backend = get_backend(name, str(ckpt.model_dir), opts, tokenizer=tokenizer)
            t0 = time.perf_counter()
            results.append(backend.generate(requests))
        out[f"backend_{label}"] = {"name": name, "wall_s": time.perf_counter() - t0, **backend.info()}
    doc = compare(results[0], results[1])
    return {"protocol": {"ref": protocol.ref, "sha256": protocol.sha256}, "checkpoint_digest": ckpt.digest,
            "split": {"name": split, "tier": manifest.tier, "items": len(items)}, "seed": run_seed, **out, **doc}
