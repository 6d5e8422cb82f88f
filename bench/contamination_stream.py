"""Streaming contamination check: throughput and peak memory against corpus size.

Writes synthetic text corpora (random words, wrapped at 80 columns) of the given sizes, then runs the exact n-gram
scan (13-grams, 200 items of 60 words) over each in a fresh process and prints MB/s, peak RSS of the scanning
process and of its largest worker process, and, as the baseline in the same run, the time to merely read the file
in 1 MiB blocks. With ``--real``, the items are the 1,319 GSM8K test problems (question and worked solution) and
the corpus is MATH-500's problems and solutions repeated (mathematical English, most of whose words occur in some
item: the hard case for the scan), both from ../shared/data. Runs against whichever evalgate is on
``PYTHONPATH``: the per-field API with worker processes (``corpus_chunks``), or the older single-process one
(``corpus_token_chunks``), so before and after can be measured with this one script.
Usage: python bench/contamination_stream.py [--real] [MB ...] (default 50 200).
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
import evalgate.splits.contamination as c
path = Path(sys.argv[1])
if len(sys.argv) > 2:
    recs = [json.loads(x) for x in Path(sys.argv[2]).read_text().splitlines() if x.strip()]
    fields = {f"gsm8k/{i}": {"question": r["question"], "solution": r["answer"]} for i, r in enumerate(recs)}
else:
    fields = {f"item{i}": {"text": " ".join(f"w{i}_{j}" for j in range(60))} for i in range(200)}
t0 = time.perf_counter()
with path.open("rb") as f:
    while f.read(1 << 20):
        pass
read_s = time.perf_counter() - t0
t0 = time.perf_counter()
if hasattr(c, "corpus_chunks"):
    workers = c.default_workers()
    res, total = c.overlaps(fields, c.corpus_chunks(path), 13, 0.7, workers=workers)
else:
    workers = 1
    res, total = c.overlaps({k: "\\n".join(v.values()) for k, v in fields.items()}, c.corpus_token_chunks(path),
                            13, 0.7)
scan_s = time.perf_counter() - t0
mb = lambda who: resource.getrusage(who).ru_maxrss / 1024
print(json.dumps({"read_s": read_s, "scan_s": scan_s, "tokens": total, "workers": workers,
                  "max_rss_mb": mb(resource.RUSAGE_SELF), "worker_rss_mb": mb(resource.RUSAGE_CHILDREN)}))
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


DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def make_real_corpus(path: Path, mb: int) -> None:
    recs = [json.loads(x) for x in (DATA / "math500" / "test.jsonl").read_text().splitlines() if x.strip()]
    text = "".join(r["problem"] + "\n" + r["solution"] + "\n" for r in recs)
    with path.open("w", encoding="utf-8") as f:
        for _ in range(mb * 1_000_000 // len(text.encode()) + 1):
            f.write(text)


def main() -> None:
    real = "--real" in sys.argv
    sizes = [int(a) for a in sys.argv[1:] if a != "--real"] or [50, 200]
    with tempfile.TemporaryDirectory() as d:
        for mb in sizes:
            path = Path(d) / f"corpus{mb}.txt"
            (make_real_corpus if real else make_corpus)(path, mb)
            extra = [str(DATA / "gsm8k" / "test.jsonl")] if real else []
            # cwd: the temporary directory, so that PYTHONPATH (not the current directory) decides which evalgate runs
            out = subprocess.run([sys.executable, "-c", CHILD, str(path), *extra], capture_output=True, text=True,
                                 check=True, cwd=d)
            r = json.loads(out.stdout)
            size = path.stat().st_size / 1e6
            print(f"{size:7.0f} MB  {r['tokens']:>11,d} tokens  scan {r['scan_s']:6.1f} s "
                  f"({size / r['scan_s']:5.1f} MB/s, {r['workers']} worker(s))"
                  f"  plain read {r['read_s']:5.2f} s  scan/read {r['scan_s'] / r['read_s']:5.1f}x"
                  f"  peak RSS {r['max_rss_mb']:4.0f} MB (largest worker {r['worker_rss_mb']:4.0f} MB)")
            path.unlink()


if __name__ == "__main__":
    main()
