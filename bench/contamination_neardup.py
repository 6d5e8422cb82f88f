"""What the near-duplicate check costs per corpus line: ``NearDupIndex.best_many`` (one numpy pass over a chunk's
lines) against ``NearDupIndex.best`` called line by line (the code before), in the same process.

Index: GSM8K's 1,319 test questions (the fields a ``--near-dup`` check of a GSM8K split indexes). Corpus lines:
MATH-500's problems and solutions, line by line (unrelated mathematical text, most lines passing the size bounds),
repeated to ``lines``, with every 500th line a GSM8K question (a candidate the LSH returns). Both sides must find
the same similarities (checked); each side runs ``rounds`` times, alternated; the script prints the median CPU
seconds (process time) of each and their ratio.
Usage: python bench/contamination_neardup.py [lines] [rounds] (default 20000 5).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from evalgate.splits.contamination import DEFAULT_JACCARD, NearDupIndex, tokens

REPO = Path(__file__).resolve().parent.parent
DATA = next((p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
            REPO.parent / "shared" / "data")


def main() -> None:
    n_lines = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    questions = [json.loads(x)["question"] for x in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines()
                 if x.strip()]
    recs = [json.loads(x) for x in (DATA / "math500" / "test.jsonl").read_text().splitlines() if x.strip()]
    filler = [ln for r in recs for ln in (r["problem"] + "\n" + r["solution"]).splitlines() if ln.strip()]
    lines = [questions[i // 500] if i % 500 == 0 else filler[i % len(filler)] for i in range(n_lines)]
    index = NearDupIndex({(i, "question"): tokens(q) for i, q in enumerate(questions)}, DEFAULT_JACCARD)
    segments = [tokens(ln) for ln in lines]

    def one_by_one() -> dict:
        into: dict = {}
        for seg in segments:
            index.best(seg, into)
        return into

    def at_once() -> dict:
        into: dict = {}
        index.best_many(segments, into)
        return into

    if one_by_one() != at_once():
        sys.exit("best_many found other similarities than best line by line")
    times: dict[str, list[float]] = {"best, line by line": [], "best_many": []}
    for _ in range(rounds):
        for name, fn in (("best, line by line", one_by_one), ("best_many", at_once)):
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"lines": n_lines, "fields": len(questions), "found": len(at_once()), "rounds": rounds,
                      "median_cpu_s": {k: round(v, 4) for k, v in med.items()},
                      "ratio_line_by_line_over_best_many": round(med["best, line by line"] / med["best_many"], 2)},
                     indent=2))


if __name__ == "__main__":
    main()
