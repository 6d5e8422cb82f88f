"""Benchmark: what a sweep unit's Ray worker process imports of evalgate before its engine, by the module its actor
class lives in: ``evalgate.sweep.worker`` (now) against ``evalgate.sweep.ray_cluster`` (where it lived before, with
the driver's runner, store and scorers), each in a fresh Python process after ``import ray`` (a Ray worker has
imported Ray already), alternated ``--reps`` times so both see the same load.

Prints one JSON document: per module, the median CPU seconds (user + system of the process, ``time.process_time``)
and wall seconds of the import, the modules it added, whether DuckDB was loaded; and the CPU ratio.

Usage: python bench/ray_worker_imports.py [--reps 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = """
import json, sys, time
import ray
n, c, w = len(sys.modules), time.process_time(), time.perf_counter()
import {module}
print(json.dumps({{"cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - w,
                  "modules": len(sys.modules) - n, "duckdb": "duckdb" in sys.modules}}))
"""
MODULES = {"before": "evalgate.sweep.ray_cluster", "now": "evalgate.sweep.worker"}


def probe(module: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in MODULES}
    for _ in range(args.reps):
        for side, module in MODULES.items():
            runs[side].append(probe(module))
    doc: dict[str, object] = {}
    for side, module in MODULES.items():
        r = runs[side]
        doc[side] = {"module": module, "cpu_s": round(statistics.median(x["cpu_s"] for x in r), 3),
                     "wall_s": round(statistics.median(x["wall_s"] for x in r), 3), "modules": r[0]["modules"],
                     "duckdb": r[0]["duckdb"], "cpu_s_all": [round(x["cpu_s"], 3) for x in r]}
    doc["cpu_ratio_before_over_now"] = round(doc["before"]["cpu_s"] / doc["now"]["cpu_s"], 2)  # type: ignore[index]
    doc["load"] = os.getloadavg()
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
