"""``splits add`` of a GSM8K-sized split (the 1,319 test problems of ``../shared/data/gsm8k/test.jsonl``): a private
split, then a dev split of other text (the reversed questions), then another, each in a fresh file-backed home.

Prints the median and every repetition's seconds per step. To compare two checkouts (e.g. before and after the
store kept private fingerprints, migration 35), run it with each on ``PYTHONPATH`` in turn on the same machine and
give the load (``uptime``) beside the figures.

Usage: PYTHONPATH=CHECKOUT python bench/splits_add.py [--reps 7] [--data PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "test.jsonl"


def _write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--data", type=Path, default=DATA)
    a = ap.parse_args()
    rows = [json.loads(line) for line in a.data.read_text().splitlines() if line.strip()]
    steps = {"add private": [], "add dev (other text)": [], "add another dev": []}
    for _ in range(a.reps):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            os.environ.update(EVALGATE_HOME=str(d / "home"), EVALGATE_SPLITS=str(d / "splits"),
                              XDG_CONFIG_HOME=str(d / "cfg"), EVALGATE_ACTOR="bench")
            from evalgate.splits.write import add_split
            from evalgate.store import Store

            files = {
                "add private": ("gsm-private", "private", [{"id": f"g{i}", "question": r["question"],
                                                           "answer": r["answer"]} for i, r in enumerate(rows)]),
                "add dev (other text)": ("gsm-dev", "dev", [
                    {"id": f"d{i}", "question": " ".join(reversed(r["question"].split())),
                     "answer": "x" + r["answer"][::-1]} for i, r in enumerate(rows)]),
                "add another dev": ("gsm-dev2", "dev", [{"id": f"e{i}", "question": "other " + r["question"][::-1]}
                                                        for i, r in enumerate(rows)]),
            }
            for step, (name, tier, items) in files.items():
                path = _write(d / f"{name}.jsonl", items)
                t = time.perf_counter()
                add_split(name, tier, path, store=Store())
                steps[step].append(time.perf_counter() - t)
    for step, secs in steps.items():
        print(f"{step:22s} median {statistics.median(secs):.3f} s  ({', '.join(f'{x:.3f}' for x in secs)})")


if __name__ == "__main__":
    main()
