"""Bulk writes to the store: DuckDB ``executemany`` (one statement per row) vs ``store.db.insert_values`` (multi-row
``VALUES`` in chunks of 500), on the ``generations`` table of a real store file, same rows, alternated.

Each repetition opens a fresh store (all migrations), then times writing N generation rows (13 columns, like
``Store.put_generations``) in one transaction, first with one method then the other (order swapped every
repetition). Reports medians and the ratio executemany / chunked (docs/BENCHMARKS.md, "Store writes").

Usage: python bench/store_writes.py [--rows 64 1024] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from evalgate.store import Store
    from evalgate.store.db import insert_values

    sql = "INSERT INTO generations VALUES (" + ", ".join("?" * 13) + ") ON CONFLICT DO NOTHING"
    out: dict[str, object] = {"load_start": os.getloadavg()[0]}
    for n in a.rows:
        times: dict[str, list[float]] = {"executemany": [], "chunked": []}
        for rep in range(a.reps):
            order = ["executemany", "chunked"] if rep % 2 == 0 else ["chunked", "executemany"]
            for method in order:
                with tempfile.TemporaryDirectory() as d:
                    store = Store(Path(d) / "evalgate.duckdb")
                    rows = [["ck", "ph", f"q{i}", i % 4, 1000 + i, f"p{i}", "x" * 400, 120, 100, "stop",
                             "2026-12-01T00:00:00", "st", "run"] for i in range(n)]
                    with store.connect() as con:
                        t0 = time.perf_counter()
                        if method == "executemany":
                            con.executemany(sql, rows)
                        else:
                            insert_values(con, "INSERT INTO generations", rows, "ON CONFLICT DO NOTHING")
                        times[method].append(time.perf_counter() - t0)
                        assert con.execute("SELECT count(*) FROM generations").fetchone() == (n,)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[str(n)] = {"executemany_s": times["executemany"], "chunked_s": times["chunked"],
                       "median_executemany_s": med["executemany"], "median_chunked_s": med["chunked"],
                       "ratio": med["executemany"] / med["chunked"]}
        print(f"{n} rows: executemany {med['executemany']:.3f} s, chunked {med['chunked']:.3f} s, "
              f"ratio {med['executemany'] / med['chunked']:.1f}x", file=sys.stderr)
    out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
