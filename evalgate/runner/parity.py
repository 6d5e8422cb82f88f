"""``parity()``: generate the same protocol x checkpoint x split with two backends and report where they drift.

Parity prepares like a run (``runner.plan.prepare``: protocol verified, checkpoint resolved, read admitted, prompts
rendered with the token ids a run sends) and then bypasses the generation cache: both backends generate every
sample afresh and nothing is written to the cache. The split read is checked against its tier policy and logged
(purpose ``parity``), like any read; a private split refuses it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evalgate.backends.base import GenerationRequest, GenerationResult, check_backend, get_backend, sample_seed
from evalgate.core.errors import BadInput
from evalgate.core.progress import progress_bars
from evalgate.protocol.spec import load_protocol
from evalgate.runner.plan import RunOptions, prepare
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
           *, store: Store, progress: bool = True) -> dict[str, Any]:
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
        BadInput, ProtocolDrift, RefusedByPolicy: as ``evaluate``; BadInput also for a protocol that offers tools
            (before any read).
        EngineError: a backend failed.
    """
    if load_protocol(protocol_path).tools:  # before the read: parity compares single-turn generations only
        raise BadInput(f"{protocol_path}: the protocol offers tools (a multi-turn, agentic evaluation), which parity "
                       "does not compare; run 'evalgate run' with each backend and compare the runs' trajectories "
                       "('evalgate trajectories RUN_ID')")
    opts = RunOptions(backend=backend_a, seed=seed, purpose=PURPOSE, actor=actor, backend_options=options_a or {},
                      progress=progress)
    checked_b = check_backend(backend_b, options_b or {})
    with progress_bars(progress):
        plan = prepare(protocol_path, checkpoint, split, opts, store, limit)
    plan.access.log_read(plan.manifest, plan.actor, PURPOSE, cached=False, checkpoint_digest=plan.checkpoint.digest,
                         protocol_hash=plan.protocol.sha256, detail=f"parity {backend_a} vs {backend_b}")
    n = plan.protocol.spec.sampling.n
    tokenized = plan.prompts.tokenized
    requests = [GenerationRequest(iid, r.text, tuple(range(n)), tuple(sample_seed(plan.seed, iid, j) for j in range(n)),
                                  plan.params, tokenized[iid].ids if iid in tokenized else None)
                for iid, r in plan.prompts.rendered.items()]
    out: dict[str, Any] = {}
    results = []
    for label, name, backend_opts in (("a", backend_a, plan.backend_options), ("b", backend_b, checked_b)):
        with progress_bars(progress):  # the model loads in get_backend or in generate
            backend = get_backend(name, str(plan.checkpoint.model_dir), backend_opts, tokenizer=plan.prompts.tokenizer)
            t0 = time.perf_counter()
            results.append(backend.generate(requests))
        out[f"backend_{label}"] = {"name": name, "wall_s": time.perf_counter() - t0, **backend.info()}
    doc = compare(results[0], results[1])
    return {"protocol": {"ref": plan.protocol.ref, "sha256": plan.protocol.sha256},
            "checkpoint_digest": plan.checkpoint.digest,
            "split": {"name": split, "tier": plan.manifest.tier, "items": len(plan.items)}, "seed": plan.seed,
            **out, **doc}
