"""Benchmark: access-log append latency with 8 concurrent writers, PostgreSQL server vs the DuckDB file (issue 47).

Each writer is its own process (its own connection, as separate CLI commands or a sweep's workers are) appending
``--appends`` rows through ``evalgate.access.log.append`` (the incremental chain check, the insert and the signed
head in one transaction under the store's lock: the file's ``<db>.lock``, the server's advisory lock). All writers
start together (a barrier file), after one untimed append each (imports, the key); each append's wall time is
recorded, waiting for the lock included. The same run measures the DuckDB file (the baseline) and a PostgreSQL
server the script starts as the tests do (``tests/helpers/postgres.py``: initdb in a temporary directory, a Unix
socket, fsync off), then reports p50/p95 (and p99, mean, max: a lock that is not first come, first served shows in
the tail) per backend and their ratio (server / file), checks both chains verify with every row present, and
prints the load average before and after (the machine may be shared).

Usage: python bench/accesslog_concurrent.py [--writers 8] [--appends 25]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's evalgate, not an installed one

WRITER = """
import json, sys, time
from pathlib import Path
from evalgate.access import log as accesslog
from evalgate.store import Store
barrier, me, n, out = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
store = Store()
row = accesslog.entry(actor="w" + me, split="s" + me, tier="dev", purpose="tuning", outcome="read")
accesslog.append(store, row)  # untimed: the first append's imports and key load
(barrier / ("ready-" + me)).touch()
while not (barrier / "go").exists():
    time.sleep(0.002)
lat = []
for _ in range(n):
    t0 = time.perf_counter()
    accesslog.append(store, row)
    lat.append(time.perf_counter() - t0)
out.write_text(json.dumps(lat))
"""


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, linear between order statistics (numpy's default, Hyndman & Fan
    type 7)."""
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def run_backend(store: str, writers: int, appends: int, work: Path, env: dict[str, str]) -> dict[str, object]:
    """``writers`` processes appending ``appends`` rows each to ``store`` at once; their latencies (s)."""
    from evalgate.access import log as accesslog
    from evalgate.store import Store

    barrier = work / f"barrier-{abs(hash(store))}"
    barrier.mkdir()
    child_env = {**env, "EVALGATE_STORE": store} if store.startswith("postgresql://") else \
        {**env, "EVALGATE_HOME": str(Path(store).parent)}
    Store(store)  # created and migrated before the clock starts
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(barrier), str(i), str(appends),
                               str(barrier / f"lat-{i}.json")], cwd=ROOT, env=child_env) for i in range(writers)]
    while len(list(barrier.glob("ready-*"))) < writers:
        time.sleep(0.01)
    t0 = time.perf_counter()
    (barrier / "go").touch()
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a writer failed on {store}")
    wall = time.perf_counter() - t0
    lat = [x for i in range(writers) for x in json.loads((barrier / f"lat-{i}.json").read_text())]
    check = accesslog.verify(Store(store))
    assert check["ok"] and check["rows"] == writers * (appends + 1), check
    return {"appends": len(lat), "wall_s": round(wall, 2), "appends_per_s": round(len(lat) / wall, 1),
            "p50_ms": round(percentile(lat, 0.50) * 1000, 1), "p95_ms": round(percentile(lat, 0.95) * 1000, 1),
            "p99_ms": round(percentile(lat, 0.99) * 1000, 1), "mean_ms": round(statistics.fmean(lat) * 1000, 1),
            "max_ms": round(max(lat) * 1000, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--appends", type=int, default=25, help="appends per writer")
    a = ap.parse_args()
    from tests.helpers.postgres import PostgresServer, find_bin_dir

    bin_dir, why = find_bin_dir()
    if bin_dir is None:
        raise SystemExit(why)
    out: dict[str, object] = {"machine": platform.platform(), "cpus": os.cpu_count(),
                              "load_before": os.getloadavg(), "writers": a.writers, "appends_per_writer": a.appends}
    server = PostgresServer(bin_dir).start()
    try:
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALGATE_LOG_KEY_FILE": str(work / "log-signing.key"),
                   "XDG_CONFIG_HOME": str(work / "config"), "EVALGATE_ACTOR": "bench", "OMP_NUM_THREADS": "1"}
            env.pop("EVALGATE_STORE", None)
            os.environ.update({k: env[k] for k in ("EVALGATE_LOG_KEY_FILE", "XDG_CONFIG_HOME")})
            out["duckdb_file"] = run_backend(str(work / "file" / "evalgate.duckdb"), a.writers, a.appends, work, env)
            out["postgresql"] = run_backend(server.create_schema(), a.writers, a.appends, work, env)
    finally:
        server.stop()
    f, p = out["duckdb_file"], out["postgresql"]
    assert isinstance(f, dict) and isinstance(p, dict)
    out["ratio_p50_server_over_file"] = round(p["p50_ms"] / f["p50_ms"], 2)
    out["ratio_p95_server_over_file"] = round(p["p95_ms"] / f["p95_ms"], 2)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
