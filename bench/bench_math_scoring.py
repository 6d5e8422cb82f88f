"""Math scoring throughput (samples/s): evalgate's ``math`` scorer against baselines in the same process.

Completions are real reference solutions: GSM8K's (ending ``#### N``, scored with the ``gsm8k`` rule) and
MATH-500's (ending in ``\\boxed{...}``, scored with the ``boxed`` rule), each scored against its own gold
answer (correct) and against the next record's gold answer (mostly wrong), so both outcomes are timed. Every
repetition starts with math_equal's parse cache cleared (each completion is new, as in a fresh run, n=1).

Measured in the same run:
- ``evalgate``: ``MathScorer.score`` (extraction + ``math_equal``: unwrap + math-verify parse and verify).
- ``math-verify direct``: ``math_verify.parse`` of the extracted answer and the gold inside ``$...$`` plus
  ``math_verify.verify``, with no evalgate code around it (the library's own cost).
- ``exact match``: ``exact_match`` on the same extracted answers (the string-comparison floor).

Usage: ``python bench/bench_math_scoring.py [--data ../shared/data] [--per-dataset 300] [--reps 3]``.
Prints one JSON document with medians and ratios. The machine may be shared: quote medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evalgate.datasets.gsm8k import gsm8k_items  # noqa: E402
from evalgate.datasets.math500 import math500_items  # noqa: E402
from evalgate.scoring import SampleToScore, exact_match, extract_answer  # noqa: E402
from evalgate.scoring.math import MathScorer, _parse  # noqa: E402


def _protocol(rule: str) -> SimpleNamespace:
    spec = SimpleNamespace(scorer=SimpleNamespace(options={}), extraction=SimpleNamespace(rule=rule,
                           score_truncated=False), sampling=SimpleNamespace(stop=[]))
    return SimpleNamespace(spec=spec, path=f"<bench {rule}>")


def _samples(items: list[dict], n: int) -> list[SampleToScore]:
    items = items[:n]
    out = []
    for i, it in enumerate(items):
        out.append(SampleToScore(it, it["solution"], "", "stop"))
        other = {**it, "answer": items[(i + 1) % len(items)]["answer"]}
        out.append(SampleToScore(other, it["solution"], "", "stop"))
    return out


def _direct(pairs: list[tuple[str | None, str]]) -> int:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    cfg = [LatexExtractionConfig(), ExprExtractionConfig()]
    ok = 0
    for pred, gold in pairs:
        if pred is not None:
            ok += bool(verify(parse(f"${gold}$", cfg), parse(f"${pred}$", cfg)))
    return ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--per-dataset", type=int, default=300, help="records per dataset (x2 samples each)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    gsm8k = gsm8k_items(args.data / "gsm8k" / "test.jsonl")[0]
    math500 = math500_items(args.data / "math500" / "test.jsonl")[0]
    sets = {"gsm8k": (_samples(gsm8k, args.per_dataset), "gsm8k"),
            "math500": (_samples(math500, args.per_dataset), "boxed")}
    result: dict = {"python": platform.python_version(), "machine": platform.machine(), "reps": args.reps,
                    "note": "shared, noisy machine: medians of reps; ratios are within the same run"}
    for name, (samples, rule) in sets.items():
        scorer = MathScorer(_protocol(rule))
        pairs = [(extract_answer(s.text, rule), str(s.item["answer"])) for s in samples]
        times: dict[str, list[float]] = {"evalgate": [], "math_verify_direct": [], "exact_match": []}
        correct = None
        scorer.score(samples[:8])  # warm-up: imports and math-verify's parser set-up are not timed
        _direct(pairs[:8])
        for _ in range(args.reps):
            _parse.cache_clear()
            t = time.perf_counter()
            res = scorer.score(samples)
            times["evalgate"].append(time.perf_counter() - t)
            correct = sum(r.status == "correct" for r in res)
            t = time.perf_counter()
            _direct(pairs)
            times["math_verify_direct"].append(time.perf_counter() - t)
            t = time.perf_counter()
            sum(exact_match(p, g) for p, g in pairs if p is not None)
            times["exact_match"].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        result[name] = {"samples": len(samples), "correct": correct,
                        "samples_per_s": {k: round(len(samples) / v, 1) for k, v in med.items()},
                        "evalgate_time_over_math_verify_direct":
                            round(med["evalgate"] / med["math_verify_direct"], 3)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
