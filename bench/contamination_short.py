"""What the whole-line check of very short fields costs the contamination scan.

Items: MATH-500's 500 problems, each its own field; 13 of them have fewer than 8 words and are looked for as whole
corpus lines (``NgramTable.segment``), the rest by 13-grams or as whole fields. Corpus: MATH-500's problems and
solutions repeated to the given size (text, one problem or solution line after another). The scan runs with all
500 items and, as the baseline in the same process, with the 487 that have 8 words or more (no whole-line check),
alternated, one worker each, ``rounds`` times; it prints each one's median MB/s and their ratio.
Usage: python bench/contamination_short.py [MB] [rounds] (default 20 3).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evalgate.splits.contamination import MIN_WHOLE_WORDS, corpus_chunks, overlaps, tokens

REPO = Path(__file__).resolve().parent.parent
DATA = next((p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
            REPO.parent / "shared" / "data")


def main() -> None:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    recs = [json.loads(x) for x in (DATA / "math500" / "test.jsonl").read_text().splitlines() if x.strip()]
    text = "".join(r["problem"] + "\n" + r["solution"] + "\n" for r in recs)
    every = {r["unique_id"]: {"problem": r["problem"]} for r in recs}
    long = {k: v for k, v in every.items() if len(tokens(v["problem"])) >= MIN_WHOLE_WORDS}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "corpus.txt"
        with path.open("w", encoding="utf-8") as f:
            while f.tell() < mb * 1_000_000:
                f.write(text)
        size = path.stat().st_size / 1e6
        speed: dict[str, list[float]] = {f"all {len(every)}": [], f"{len(long)} of 8+ words": []}
        flagged: dict[str, int] = {}
        for _ in range(rounds):
            for name, items in zip(speed, (every, long), strict=True):
                t0 = time.perf_counter()
                res, _ = overlaps(items, corpus_chunks(path), 13, 0.7, workers=1, full_scan=True)
                speed[name].append(size / (time.perf_counter() - t0))
                flagged[name] = sum(it.flagged for it in res)
        for name, v in speed.items():
            print(f"{name:18s} {statistics.median(v):5.2f} MB/s (median of {rounds}; {size:.0f} MB corpus; "
                  f"{flagged[name]} items flagged)")
        a, b = (statistics.median(v) for v in speed.values())
        print(f"ratio with / without the whole-line check: {a / b:.2f}")


if __name__ == "__main__":
    main()
