"""Benchmark: a test's empty memory store, copied from the migrated template vs reused from the pool (issue 43).

``copy``: what ``memory_store`` did per test before, ``Database.copy()`` of the migrated template (ATTACH, then
``COPY FROM DATABASE`` creating its 26 tables and their keys), the test's writes, ``close()`` (DETACH).
``pool``: ``tests/helpers/memory_stores.py``, ``acquire()`` (a new ``Database`` object on a pool database), the
test's writes, ``release()`` (close it, check the database's shape in one query, drop and create anew each table
written). The writes: one row in each of ``k`` tables (by hand from their columns), for each ``k`` given; the two
sides alternate in one process, and the CPU time (``time.process_time``) per store is the median of ``--reps``.

Usage: python bench/memory_stores.py [--reps 200] [--tables 0 1 3 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VALUE = {"BIGINT": "1", "BOOLEAN": "true", "DOUBLE": "0.5", "INTEGER": "1", "JSON": "'{}'",
         "TIMESTAMP WITH TIME ZONE": "now()", "UBIGINT": "1", "VARCHAR": "'x'"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--tables", type=int, nargs="+", default=[0, 1, 3, 8])
    args = ap.parse_args()
    from evalgate.store import Database
    from tests.helpers.memory_stores import MemoryStores

    template = Database(":memory:")
    with template.transaction() as con:
        con.execute("SET threads = 1")  # as the tests' template (tests/conftest.py)
        columns: dict[str, list[str]] = {}
        for table, kind in con.execute("SELECT table_name, data_type FROM duckdb_columns() WHERE database_name = "
                                       "current_database() AND table_name <> 'schema_migrations' "
                                       "ORDER BY table_name, column_index").fetchall():
            columns.setdefault(table, []).append(VALUE[kind])
    inserts = [f'INSERT INTO "{t}" VALUES ({", ".join(v)})' for t, v in columns.items()]
    pool = MemoryStores(template)
    load = os.getloadavg()
    out = {}
    for k in args.tables:
        cpu: dict[str, list[float]] = {"copy": [], "pool": []}
        for rep in range(args.reps):
            for side in (("copy", "pool") if rep % 2 else ("pool", "copy")):
                c = time.process_time()
                db = template.copy() if side == "copy" else pool.acquire()
                with db.transaction() as con:
                    for sql in inserts[:k]:
                        con.execute(sql)
                if side == "copy":
                    db.close()
                else:
                    pool.release(db)
                cpu[side].append(time.process_time() - c)
        copy_ms, pool_ms = (1000 * statistics.median(cpu[s]) for s in ("copy", "pool"))
        out[f"{k} tables written"] = {"copy_ms": round(copy_ms, 2), "pool_ms": round(pool_ms, 2),
                                      "ratio_copy_over_pool": round(copy_ms / pool_ms, 2)}
    pool.close()
    print(json.dumps({"reps": args.reps, "cpu_ms_per_store": out, "copies_made_by_pool": pool.made,
                      "load_before": load, "load_after": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
