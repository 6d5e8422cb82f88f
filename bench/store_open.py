"""Benchmark: opening a store file (issue 31, the fast lane; also every library call and every transaction).

1. Constructing a ``Store`` on a file this process has already opened, against the construction that opens it
   (every library call that makes its own ``Store()``).
2. One transaction (open, one read, one write, close), opening the file by attaching it to the process's one DuckDB
   instance (``evalgate.store.instance``), against a new DuckDB instance per opening (``duckdb.connect(path)``, what
   every transaction did before).
3. Creating a new store file: a copy of the process's migrated template (``Database._create``), against applying
   every migration to the new file (``_create`` skipped: what every new store did before). The template is built
   before the timing (once per process).
4. A read transaction on a file this process left fully migrated, skipping the migration check
   (``evalgate.store.db._MIGRATED``), against the check every opening made before (wall and CPU).

``Database(path)`` on a file opens it once at construction (mkdir, the file lock, a DuckDB instance, the migration
check) so an unusable store fails at once; a process that has already opened and migrated that file skips it
(``evalgate.store.db._OPENED``), and its first transaction opens the file as every transaction does. Both sides are
timed alternately in one process on one store file: ``fresh`` clears the record first (what every construction did
before), ``known`` does not; then one transaction after each, so the figure includes the open the construction no
longer does in advance. For 2, both sides alternate on one file; ``instance`` swaps ``instance.attach`` for
``duckdb.connect``. Prints the medians and their ratio, with the load averages.

Usage: python bench/store_open.py [--reps 30]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    from evalgate.store import db
    from evalgate.store.access import AccessLogRepo

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "evalgate.duckdb"
        db.Database(path)  # created and migrated once, outside the timing
        load = os.getloadavg()
        out: dict[str, dict[str, list[float]]] = {"construct": {"fresh": [], "known": []},
                                                  "construct+read": {"fresh": [], "known": []}}
        for rep in range(args.reps):
            for side in (("fresh", "known") if rep % 2 else ("known", "fresh")):
                if side == "fresh":
                    db._OPENED.clear()
                t = time.perf_counter()
                d = db.Database(path)
                mid = time.perf_counter()
                AccessLogRepo(d).access_log_last()
                end = time.perf_counter()
                out["construct"][side].append(mid - t)
                out["construct+read"][side].append(end - t)
        for name, sides in out.items():
            fresh, known = statistics.median(sides["fresh"]), statistics.median(sides["known"])
            print(json.dumps({"what": name, "fresh_ms": round(fresh * 1e3, 2), "known_ms": round(known * 1e3, 2),
                              "ratio_known_to_fresh": round(known / fresh, 3)}))
        made = _creations(Path(tmp), args.reps)
        tpl, mig = statistics.median(made["template"]), statistics.median(made["migrations"])
        print(json.dumps({"what": "new store", "migrations_ms": round(mig * 1e3, 2), "template_ms": round(tpl * 1e3, 2),
                          "ratio_template_to_migrations": round(tpl / mig, 3)}))
        tx = _transactions(db.Database(path), args.reps)
        attach, inst = statistics.median(tx["attach"]), statistics.median(tx["instance"])
        print(json.dumps({"what": "transaction", "instance_per_opening_ms": round(inst * 1e3, 2),
                          "attach_ms": round(attach * 1e3, 2), "ratio_attach_to_instance": round(attach / inst, 3)}))
        checked = _checked_reads(db.Database(path), args.reps)
        for unit in ("wall", "cpu"):
            old, new = statistics.median(checked[f"checked_{unit}"]), statistics.median(checked[f"known_{unit}"])
            print(json.dumps({"what": f"read transaction ({unit})", "migrations_checked_ms": round(old * 1e3, 3),
                              "file_as_left_ms": round(new * 1e3, 3), "ratio_known_to_checked": round(new / old, 3)}))
        print(json.dumps({"reps": args.reps, "load_before": load, "load_after": os.getloadavg()}))


def _creations(root: Path, reps: int) -> dict[str, list[float]]:
    """Seconds to construct a ``Database`` on a new file, each way."""
    from evalgate.store import db

    create = db.Database._create
    out: dict[str, list[float]] = {"template": [], "migrations": []}
    db.Database(root / "warm.duckdb")  # the template, built once
    for rep in range(reps):
        for side in (("template", "migrations") if rep % 2 else ("migrations", "template")):
            db.Database._create = create if side == "template" else (lambda self: None)  # type: ignore[method-assign]
            try:
                t = time.perf_counter()
                db.Database(root / f"{side}{rep}.duckdb")
                out[side].append(time.perf_counter() - t)
            finally:
                db.Database._create = create  # type: ignore[method-assign]
    return out


def _transactions(database: object, reps: int) -> dict[str, list[float]]:
    """Seconds per transaction (open, a SELECT, an INSERT, commit, close) for each way of opening the file."""
    import duckdb

    from evalgate.store import instance

    attach = instance.attach
    out: dict[str, list[float]] = {"attach": [], "instance": []}
    for rep in range(reps):
        for side in (("attach", "instance") if rep % 2 else ("instance", "attach")):
            instance.attach = attach if side == "attach" else (lambda path: duckdb.connect(str(path)))
            try:
                t = time.perf_counter()
                with database.transaction() as con:  # type: ignore[attr-defined]
                    con.execute("SELECT count(*) FROM protocols").fetchone()
                    con.execute("INSERT INTO protocols VALUES (?, '1', 'h', '{}', now())", [f"{side}{rep}"])
                out[side].append(time.perf_counter() - t)
            finally:
                instance.attach = attach
    return out


def _checked_reads(database: object, reps: int) -> dict[str, list[float]]:
    """Seconds (wall and CPU) per read transaction (``access_log_last``) on a file this process left fully migrated:
    ``checked`` forgets that first (``db._MIGRATED`` cleared: the migration check every opening made before),
    ``known`` does not (the check skipped)."""
    from evalgate.store import db
    from evalgate.store.access import AccessLogRepo

    repo = AccessLogRepo(database)  # type: ignore[arg-type]
    repo.access_log_last()
    out: dict[str, list[float]] = {"checked_wall": [], "checked_cpu": [], "known_wall": [], "known_cpu": []}
    for rep in range(reps):
        for side in (("known", "checked") if rep % 2 else ("checked", "known")):
            if side == "checked":
                db._MIGRATED.clear()
            t, c = time.perf_counter(), time.process_time()
            repo.access_log_last()
            out[f"{side}_wall"].append(time.perf_counter() - t)
            out[f"{side}_cpu"].append(time.process_time() - c)
    return out


if __name__ == "__main__":
    main()
