"""Benchmark: each ``evalgate.views.frames`` call against the plain DuckDB query it wraps, on 1M sample rows (issue 32).

A store is filled with one dev run of ``--rows`` samples (one bulk ``INSERT ... SELECT range``) on a 10-item split;
then, ``--reps`` times each, alternating (and alternating which side goes first): the frame call (``samples_frame``
with its logged read of the split, ``runs_frame``, ``access_log_frame``) and the same SQL on a plain
``duckdb.connect`` of the store file, converted by the same DuckDB method and closed (what a user would write by hand
for the same frame). The figure is median(frame) / median(plain) per output kind; target <= 1.1. The load averages
before and after are printed last: on a shared machine, quote them beside the ratios.

Usage: python bench/frames.py [--rows 1000000] [--reps 5]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def fill(rows: int) -> tuple[object, str]:
    """A store with one complete dev run holding ``rows`` samples; returns (store, run id)."""
    from evalgate.splits import load_manifest, write_split
    from evalgate.store import Store

    write_split("bench-dev", "dev", [{"id": f"q{i}", "question": "1+1", "answer": "2"} for i in range(10)],
                {"source": "bench"})
    store = Store()
    store.create_run({"run_id": "r1", "protocol_name": "b", "protocol_version": "1", "protocol_hash": "ab" * 32,
                      "checkpoint_digest": "d1", "checkpoint_path": "/ck/checkpoint-10", "train_run": "t",
                      "train_seed": 1, "step": 10, "split": "bench-dev", "tier": "dev",
                      "split_sha256": load_manifest("bench-dev").content_sha256, "sampling_seed": 0,
                      "backend": "hf", "backend_info": {}, "effective_params": {}, "actor": "b", "purpose": "bench"})
    store.finish_run({"run_id": "r1", "metrics": {"pass@1": 0.5}, "counts": {"samples": rows}, "wall_s": 1.0}, [])
    with store.connect() as con:
        con.execute("INSERT INTO samples (run_id, item_id, sample_index, seed, score, status, extracted, detail, "
                    "cached) SELECT 'r1', 'q' || (i // 10), (i % 10)::INT, 1, (i % 2)::DOUBLE, "
                    "CASE WHEN i % 2 = 1 THEN 'correct' ELSE 'wrong' END, (i % 97)::VARCHAR, NULL, FALSE "
                    f"FROM range({rows}) t(i)")
    return store, "r1"


def timed(fn) -> float:  # noqa: ANN001
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import duckdb

    from evalgate.views import frames

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(EVALGATE_HOME=f"{tmp}/home", EVALGATE_SPLITS=f"{tmp}/splits", EVALGATE_ACTOR="bench",
                          XDG_CONFIG_HOME=f"{tmp}/config")
        store, rid = fill(args.rows)
        load = os.getloadavg()  # the 1, 5 and 15 minute load averages: quote them beside the ratios
        method = {"arrow": "to_arrow_table", "pandas": "df", "polars": "pl"}
        calls = {"samples": (lambda k: frames.samples_frame(rid, k, store=store), frames.SAMPLES_SQL, [[rid]]),
                 "runs": (lambda k: frames.runs_frame(k, store), frames.RUNS_SQL, None),
                 "access_log": (lambda k: frames.access_log_frame(k, store), frames.ACCESS_SQL, None)}
        out = []
        for name, (call, sql, params) in calls.items():
            for kind in ("arrow", "pandas", "polars"):
                f_times, p_times = [], []
                def plain() -> None:
                    con = duckdb.connect(str(store.path))  # noqa: B023
                    try:
                        getattr(con.sql(sql, params=params), method[kind])()  # noqa: B023
                    finally:
                        con.close()

                for rep in range(args.reps):  # which side goes first alternates: neither always follows the other
                    if rep % 2:
                        p_times.append(timed(plain))
                    f_times.append(timed(lambda: call(kind)))  # noqa: B023
                    if not rep % 2:
                        p_times.append(timed(plain))
                n = len(call("arrow")) if kind == "arrow" else None
                out.append({"frame": name, "kind": kind, "rows": n, "frame_s": statistics.median(f_times),
                            "plain_s": statistics.median(p_times),
                            "ratio": statistics.median(f_times) / statistics.median(p_times)})
                print(json.dumps(out[-1]), flush=True)
        print(json.dumps({"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                          "rows": args.rows, "reps": args.reps, "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
