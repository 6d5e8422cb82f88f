"""Streaming contamination check: throughput and peak memory against corpus size.

Writes synthetic text corpora (random words, wrapped at 80 columns) of the given sizes, then runs the n-gram scan
over each in a fresh process and prints MB/s, peak RSS, and, as the baseline in the same run, the time to merely
read the file in the same chunks. Usage: python bench/contamination_stream.py [MB ...] (default 50 200).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, resource, sys, time
from pathlib import Path
from evalgate.contamination import CHUNK_CHARS, corpus_token_chunks, overlaps
path = Path(sys.argv[1])
items = {f"item{i}": " ".join(f"w{i}_{j}" for j in range(60)) for i in range(200)}
t0 = time.perf_counter()
with path.open(encoding="utf-8") as f:
    while f.read(CHUNK_CHARS):
        pass
read_s = time.perf_counter() - t0
t0 = time.perf_counter()
res, total = overlaps(items, corpus_token_chunks(path), 13, 0.7)
scan_s = time.perf_counter() - t0
print(json.dumps({"read_s": read_s, "scan_s": scan_s, "tokens": total,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_corpus(path: Path, mb: int) -> None:
    rng = random.Random(0)
    vocab = [f"tok{i}" for i in range(50_000)]
    line_words = 12
    with path.open("w", encoding="utf-8") as f:
        written = 0
        while written < mb * 1_000_000:
            block = "\n".join(" ".join(rng.choices(vocab, k=line_words)) for _ in range(10_000)) + "\n"
            f.write(block)
            written += len(block)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [50, 200]
    with tempfile.TemporaryDirectory() as d:
        for mb in sizes:
            path = Path(d) / f"corpus{mb}.txt"
            make_corpus(path, mb)
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout)
            size = path.stat().st_size / 1e6
            print(f"{size:7.0f} MB  {r['tokens']:>11,d} tokens  scan {r['scan_s']:6.1f} s "
                  f"({size / r['scan_s']:5.1f} MB/s)"
                  f"  plain read {r['read_s']:5.1f} s  scan/read {r['scan_s'] / r['read_s']:5.1f}x"
                  f"  peak RSS {r['max_rss_mb']:6.0f} MB")
            path.unlink()


if __name__ == "__main__":
    main()
