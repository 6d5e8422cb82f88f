"""Benchmark: the store's logic calls on a DuckDB file vs ``Database(":memory:")`` (issue 31, step 2).

A file store opens, migrates-checks and closes DuckDB under its file lock on every call outside a session (the
close checkpoints the write-ahead log); a memory database holds one connection. The tests of policy, gates, runs
views and ratings make hundreds of such calls, so this is what moving them onto the ``memory_store`` fixture saves.
Both sides run the same workload in the same process, alternating, so the ratio is measured under one load:

  - ``SplitManager.open`` of a budgeted public split (purpose check, budget count, hash-chained append, head
    update: about five store calls per read), ``--reads`` times;
  - ``record_protocol`` + ``protocol_hash`` + ``runs`` + ``access_rows`` (plain reads and writes), ``--reads`` times.

Usage: python bench/memory_store.py [--reads 40] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Import the checkout's evalgate, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from evalgate.core.environment import Environment  # noqa: E402
from evalgate.splits import SplitManager, write_split  # noqa: E402
from evalgate.store import Database, Store  # noqa: E402

ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]


def workload(root: Path, memory: bool, reads: int) -> float:
    """Seconds for the workload on a fresh store (a file under ``root``, or memory)."""
    home = root / ("mem" if memory else "file")
    db = Database(":memory:") if memory else Database(home / "evalgate.duckdb")
    env = Environment(home=home, splits=home / "splits", key_file=root / "key", actor="bench", database=db)
    write_split("pub", "public", ITEMS, {"source": "bench"}, env=env)
    store = Store(db, env=env)
    t = time.perf_counter()
    mgr = SplitManager(store)
    for i in range(reads):
        mgr.open("pub", "trend", "bench", override_reason="bench" if i >= 20 else None)
        store.record_protocol("p", str(i), "h" * 64, {})
        assert store.protocol_hash("p", str(i)) == "h" * 64
        store.runs(split="pub")
        store.access_rows("pub")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    file_s, mem_s = [], []
    for _ in range(a.reps):
        with tempfile.TemporaryDirectory() as d:
            file_s.append(workload(Path(d), False, a.reads))
            mem_s.append(workload(Path(d), True, a.reads))
    f, m = statistics.median(file_s), statistics.median(mem_s)
    print(json.dumps({"reads": a.reads, "reps": a.reps, "file_s": round(f, 3), "memory_s": round(m, 3),
                      "per_read_ms": {"file": round(1000 * f / a.reads, 1), "memory": round(1000 * m / a.reads, 1)},
                      "ratio_file_over_memory": round(f / m, 1), "cpus": os.cpu_count(),
                      "python": platform.python_version()}, indent=1))


if __name__ == "__main__":
    main()
