"""Benchmark: access-log appends per second at 1,000 and at 100,000 existing rows (issue 12).

An append checks only what is new since the last verified head (``evalgate.access.log``), so its cost should not
grow with the log: the target is a ratio (appends/s at 100k) / (appends/s at 1k) close to 1. The baseline, measured
in the same run on the same stores, is the behaviour before issue 12: re-verify the whole chain, then append.

Each store is filled with correctly chained rows (one bulk insert), its head verified once, then ``--appends``
appends are timed, each its own store call (its own connection, as separate CLI commands make them). The baseline
runs fewer appends at 100k rows (``--baseline-appends``) because each one re-reads the whole log.

Usage: python bench/accesslog_append.py [--appends 200] [--baseline-appends 20] [--sizes 1000 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

# Import the checkout's evalgate, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from evalgate.access import log as accesslog  # noqa: E402
from evalgate.core.environment import Environment  # noqa: E402
from evalgate.store import Store  # noqa: E402


def filled_store(path: Path, n: int, env: Environment) -> Store:
    """A store (``env``'s keys) whose access log holds ``n`` chained rows (verified once, as the appends that wrote
    them would)."""
    store = Store(path, env=env)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows, prev = [], accesslog.GENESIS_HASH
    for i in range(1, n + 1):
        r = {**accesslog.entry(actor=f"a{i % 7}", split=f"s{i % 5}", tier="dev", purpose="tuning", outcome="read"),
             "seq": i, "ts": t0 + timedelta(seconds=i), "prev_hash": prev}
        r["row_hash"] = prev = accesslog.row_hash(prev, r)
        rows.append(r)
    store.append(rows)
    assert accesslog.sign_head(store)["ok"]  # a signed head, as a store's first append makes (verify requires it)
    return store


def old_append(store: Store, row: dict) -> None:
    """Before issue 12: the whole chain re-checked on every append."""
    with store.session():
        assert accesslog._first_bad(store.access_rows(), accesslog.GENESIS_HASH, 1) is None
        accesslog.append(store, row)


def rate(store: Store, n: int, fn) -> float:
    row = accesslog.entry(actor="bench", split="s0", tier="dev", purpose="tuning", outcome="read")
    t0 = time.perf_counter()
    for _ in range(n):
        fn(store, row)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--baseline-appends", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs=2, default=[1000, 100000])
    a = ap.parse_args()
    out: dict = {"machine": platform.platform(), "cpus": os.cpu_count(), "load_before": os.getloadavg(),
                 "appends": a.appends, "baseline_appends": a.baseline_appends, "per_size": {}}
    with tempfile.TemporaryDirectory() as d:
        env = Environment.from_env().replace(home=Path(d), key_file=Path(d) / "private.key",
                                             log_key_file=Path(d) / "log-signing.key")
        for n in a.sizes:
            t0 = time.perf_counter()
            store = filled_store(Path(d) / f"s{n}.duckdb", n, env)
            fill_s = time.perf_counter() - t0
            new = rate(store, a.appends, accesslog.append)
            old = rate(store, a.baseline_appends, old_append)
            assert accesslog.verify(store)["ok"]
            out["per_size"][n] = {"fill_s": round(fill_s, 1), "appends_per_s": round(new, 1),
                                  "baseline_appends_per_s": round(old, 2)}
    small, large = (out["per_size"][n] for n in a.sizes)
    out["ratio_large_over_small"] = round(large["appends_per_s"] / small["appends_per_s"], 3)
    out["baseline_ratio_large_over_small"] = round(large["baseline_appends_per_s"] / small["baseline_appends_per_s"],
                                                   4)
    out["speedup_at_large"] = round(large["appends_per_s"] / large["baseline_appends_per_s"], 1)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
