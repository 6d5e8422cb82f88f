"""The package versions a run records (``runner.prompts.versions`` and ``renderer_versions``, one call each per run):
read from the distributions' metadata once per process against on every run (the code before), in the same run.

Before: each ``package_version`` is ``importlib.metadata.version`` (a scan of ``sys.path``); now: ``functools.cache``
over it. ``runs`` runs' worth of calls each, alternated ``reps`` times; median CPU seconds (process time).

Usage: ``python bench/run_versions.py [--runs 50] [--reps 5]``. Prints one JSON document. The machine may be shared:
quote the ratio.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evalgate.runner import prompts  # noqa: E402


def per_run() -> None:
    prompts.versions()
    prompts.renderer_versions()


def uncached() -> None:
    prompts.package_version.cache_clear()
    per_run()


def cpu(fn: object, runs: int) -> float:
    t = time.process_time()
    for _ in range(runs):
        fn()  # type: ignore[operator]
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    per_run()  # engine_builds' distribution map (functools.lru_cache before and now) filled once: not counted
    before, now = [], []
    for _ in range(args.reps):
        before.append(cpu(uncached, args.runs))
        prompts.package_version.cache_clear()
        now.append(cpu(per_run, args.runs))
    b, n = statistics.median(before), statistics.median(now)
    print(json.dumps({"python": platform.python_version(), "load_average": os.getloadavg()[0], "runs": args.runs,
                      "before_s": round(b, 4), "now_s": round(n, 4), "ratio": round(b / n, 2),
                      "before_ms_per_run": round(1000 * b / args.runs, 2),
                      "now_ms_per_run": round(1000 * n / args.runs, 2)}, indent=1))


if __name__ == "__main__":
    main()
