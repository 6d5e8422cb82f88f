"""IFEval scoring throughput: ``evalgate.scoring.ifeval.follows`` against the reference's loop in the same run.

Responses: SmolLM2-135M-Instruct's 541 greedy responses to IFEval's prompts (tests/scoring/ifeval_data, 834
instructions), with the prompts from ``input_data.jsonl`` (../shared/data/ifeval).

Measured in the same process:
- ``evalgate``: ``follows`` (each distinct text checked once: the strict verdict reused as the first loose
  variant's, duplicate loose variants and empty ones skipped).
- ``reference loop``: the same checkers called as the reference's ``evaluation_lib`` calls them (strict on the
  response, then loose on all eight variants in order until one follows).
Both must give the same verdicts (checked, every response); the script fails otherwise.

Usage: ``python bench/ifeval_follows.py [--data ../shared/data] [--reps 3]``. Prints one JSON document with the
median CPU seconds (process time) of each and their ratio. The machine may be shared: quote the ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evalgate.scoring.ifeval import _checkers, follows, loose_variants  # noqa: E402


def reference_follows(item: dict[str, Any], response: str) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """The reference's loop (``test_instruction_following_strict`` / ``_loose``), checkers built as ``follows``
    builds them."""
    checkers = _checkers()
    strict, loose = [], []
    for iid, kw in zip(item["instruction_id_list"], item["kwargs"], strict=True):
        checker = checkers[iid](iid)
        checker.build_description(**{k: v for k, v in kw.items() if v})
        args = checker.get_instruction_args()
        if args and "prompt" in args:
            checker.build_description(prompt=item["prompt"])
        strict.append(bool(response.strip() and checker.check_following(response)))
        loose.append(any(v.strip() and checker.check_following(v) for v in loose_variants(response)))
    return tuple(strict), tuple(loose)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    prompts = {r["key"]: r for r in map(json.loads, (a.data / "ifeval" / "input_data.jsonl").read_text().splitlines())}
    data = REPO / "tests" / "scoring" / "ifeval_data" / "smollm2_completions.jsonl"
    records = [(prompts[r["key"]], r["response"]) for r in map(json.loads, data.read_text().splitlines())]
    _checkers()  # langdetect's profiles and nltk's data loaded before timing
    for item, text in records:
        f = follows(item, text)
        if (f.strict, f.loose) != reference_follows(item, text):
            sys.exit(f"verdicts differ on IFEval key {item['key']}")
    times: dict[str, list[float]] = {"evalgate": [], "reference loop": []}
    for _ in range(a.reps):
        for name, fn in (("evalgate", follows), ("reference loop", reference_follows)):
            t0 = time.process_time()
            for item, text in records:
                fn(item, text)
            times[name].append(time.process_time() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"responses": len(records), "instructions": sum(len(i["instruction_id_list"]) for i, _ in records),
                      "reps": a.reps, "median_cpu_s": {k: round(v, 3) for k, v in med.items()},
                      "ratio_reference_over_evalgate": round(med["reference loop"] / med["evalgate"], 2),
                      "python": platform.python_version()}, indent=2))


if __name__ == "__main__":
    main()
