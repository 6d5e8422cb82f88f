"""Benchmark: the CPU the store test suite's fast lane costs, before and after it ran on both backends (issue 47).

Runs ``pytest -p no:xdist -m "not slow and not vllm_engine and not integration" PATHS`` (default tests/store
tests/accesslog) in two checkouts (``--before``: a checkout of the commit before, e.g. a ``git worktree``;
``--after``: this one), alternated ``--reps`` times so both see the same load, and counts the CPU seconds (user +
system) of the pytest process and everything it waited for (``RUSAGE_CHILDREN``), plus the test PostgreSQL
servers' own processes, which are daemons no one waits for (bench/pg_cpu_plugin.py reads them from /proc just
before each server stops). Prints one JSON document: per side, the medians and every repetition.

Usage: python bench/store_suite_cpu.py --before /tmp/base-checkout [--after .] [--reps 2] [PATHS...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
LANE = ["-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:logging", "-q", "-m",
        "not slow and not vllm_engine and not integration"]


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_lane(checkout: Path, paths: list[str]) -> dict[str, float | str]:
    """One run of the lane over ``paths`` in ``checkout``: wall seconds, pytest's CPU seconds, the servers' CPU
    seconds, and pytest's summary line."""
    with tempfile.NamedTemporaryFile("r", suffix=".pg-cpu") as pg:
        env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{BENCH}", "EVALGATE_BENCH_PG_CPU": pg.name,
               "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        cpu0, t0 = children_cpu_s(), time.monotonic()
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "pg_cpu_plugin", *LANE, *paths], cwd=checkout,
                             env=env, capture_output=True, text=True)
        wall, cpu = time.monotonic() - t0, children_cpu_s() - cpu0
        server = sum(float(x) for x in Path(pg.name).read_text().split())
    summary = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:]
    return {"wall_s": round(wall, 1), "pytest_cpu_s": round(cpu, 1), "server_cpu_s": round(server, 1),
            "total_cpu_s": round(cpu + server, 1), "summary": summary}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=BENCH.parent)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("paths", nargs="*", default=["tests/store", "tests/accesslog"])
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(args.reps):
        for side in ("before", "after"):
            runs[side].append(run_lane(getattr(args, side).resolve(), args.paths))
    doc: dict[str, Any] = {
        side: {"median_" + k: statistics.median(float(r[k]) for r in rs)
               for k in ("wall_s", "pytest_cpu_s", "server_cpu_s", "total_cpu_s")} | {"runs": rs}
        for side, rs in runs.items()}
    doc["load_average"] = os.getloadavg()
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
