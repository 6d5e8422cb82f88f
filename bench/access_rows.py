"""Benchmark: what typing the access log's rows costs its reader (issue 43, "typed results instead of dicts").

``Store.access_rows`` is read on every append (``access.log._check_since_head``: the rows from the verified head
on, usually one or two) and whole by ``verify``, ``audit`` and the gate's history. A memory store holds ``--rows``
chained rows. Timed, in one process, alternating: the reader as it is (``AccessRow``s built from the cursor's
tuples, ``Row.from_cursor``), and the reader before it was typed (the same SQL through ``db.records``: one dict per
row), for the whole log and for the tail an append reads (``from_seq`` = the last row). Prints each side's median
microseconds, the typed reader's ratio to the dict reader, and the load averages.

Usage: python bench/access_rows.py [--rows 5000] [--reps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _fill(store: Any, n: int) -> None:
    """``n`` chained access-log rows, inserted as ``access.log.append_many`` would store them."""
    from evalgate.access import log as accesslog

    prev, ts, rows = accesslog.GENESIS_HASH, datetime(2026, 12, 1, tzinfo=UTC), []
    for i in range(1, n + 1):
        r = {**accesslog.entry(actor=f"a{i % 7}", split=f"s{i % 5}", tier="dev", purpose="tuning", outcome="read",
                               checkpoint_digest="d" * 64, run_id=f"r{i}", detail=f"read {i} of the split"),
             "seq": i, "ts": ts, "prev_hash": prev}
        r["row_hash"] = prev = accesslog.row_hash(prev, r)
        rows.append(r)
    store.append(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    from evalgate.store import Database, Store
    from evalgate.store.db import records

    store = Store(Database(":memory:"))
    _fill(store, args.rows)

    def before(from_seq: int | None) -> list[dict[str, Any]]:
        sql, params = "SELECT * FROM access_log WHERE TRUE", []
        if from_seq is not None:
            sql += " AND seq>=?"
            params.append(from_seq)
        with store.connect() as con:
            return records(con, sql + " ORDER BY seq", params)

    load = os.getloadavg()
    for name, from_seq, reps in (("whole log", None, args.reps), ("append's tail", args.rows, args.reps * 40)):
        assert [r.as_dict() for r in store.access_rows(from_seq=from_seq)] == before(from_seq)
        sides = {"typed": lambda: store.access_rows(from_seq=from_seq),  # noqa: B023
                 "dicts": lambda: before(from_seq)}  # noqa: B023
        times: dict[str, list[float]] = {k: [] for k in sides}
        for rep in range(reps):
            for side in (sides if rep % 2 else reversed(sides)):
                t = time.perf_counter()
                sides[side]()
                times[side].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(json.dumps({"read": name, "rows": len(before(from_seq)), "reps": reps,
                          **{f"{k}_us": round(v * 1e6, 1) for k, v in med.items()},
                          "typed_over_dicts": round(med["typed"] / med["dicts"], 3)}))
    print(json.dumps({"load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
