"""Benchmark: one access-log append (a read's row: checked since the verified head, chained, signed, the head moved;
``evalgate.access.log.append``) with the statements it runs now against those it ran before, on an in-memory store
and on a DuckDB file (each append its own store call, the file attached and detached around it).

Now: the verified and the signed head read in one statement (``AccessLogRepo.access_log_heads``), each head moved
by one ``UPDATE`` (``store.access._replace_row``). Before (the baseline, patched in): two reads, and ``DELETE`` then
``INSERT`` for each head. Both sides alternate ``--reps`` times in one process on the same stores; each repetition
times ``--n`` appends per side in CPU seconds (``time.process_time``). Prints one JSON document: per store the median
milliseconds per append of each side and the ratio before / now, with the load.

Usage: python bench/accesslog_statements.py [--n 200] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@contextmanager
def before() -> Iterator[None]:
    """The statements an append ran before: two head reads, DELETE + INSERT per head."""
    import evalgate.store.access as access

    def heads(self: access.AccessLogRepo) -> tuple[Any, Any]:
        return self.access_log_head(), self.access_log_signature()

    def replace(con: Any, table: str, columns: Sequence[str], values: Sequence[Any]) -> None:
        con.execute(f"DELETE FROM {table}")
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    list(values))

    saved = access.AccessLogRepo.access_log_heads, access._replace_row
    access.AccessLogRepo.access_log_heads, access._replace_row = heads, replace  # type: ignore[method-assign]
    try:
        yield
    finally:
        access.AccessLogRepo.access_log_heads, access._replace_row = saved  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp())
    os.environ["EVALGATE_HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / "config")  # the signing key, made at the first append
    from evalgate.access import log as accesslog
    from evalgate.store import Database, Store

    stores = {"memory": Store(Database(":memory:")), "file": Store(Database(home / "bench.duckdb"))}
    row = accesslog.entry(actor="a", split="s", tier="dev", purpose="tuning", outcome="read")
    out: dict[str, Any] = {}
    for name, store in stores.items():
        accesslog.append(store, dict(row))  # the key, the first head
        times: dict[str, list[float]] = {"now": [], "before": []}
        for rep in range(args.reps):
            for side in (("now", "before") if rep % 2 == 0 else ("before", "now")):
                with before() if side == "before" else nullcontext():
                    accesslog.append(store, dict(row))
                    start = time.process_time()
                    for _ in range(args.n):
                        accesslog.append(store, dict(row))
                    times[side].append((time.process_time() - start) / args.n * 1000)
        med = {side: statistics.median(t) for side, t in times.items()}
        assert accesslog.verify(store)["ok"], "the log both sides wrote does not verify"
        out[name] = {"now_ms": round(med["now"], 3), "before_ms": round(med["before"], 3),
                     "ratio_before_over_now": round(med["before"] / med["now"], 2), "runs": times}
    print(json.dumps({"n": args.n, "reps": args.reps, "load": os.getloadavg(), "stores": out}, indent=1))


if __name__ == "__main__":
    main()
