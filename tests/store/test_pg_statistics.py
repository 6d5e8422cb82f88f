"""A PostgreSQL store analyses a table its bulk writes grew, as autovacuum would on its next round but at once
(``PgConnection._analyze_grown``): without statistics the planner took a freshly stored run's samples for a few
rows and joined them to the generations by a nested loop over every generation per sample
(docs/BENCHMARKS.md, "The store's lock: how long a legitimate client holds it"). Against a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalgate.store import Store
from evalgate.store.db import insert_values
from evalgate.store.pg import ANALYZE_BASE

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.server_only("PostgreSQL's planner statistics (a DuckDB file keeps its own)")]


def _stats(store: Store, table: str) -> tuple[Any, float]:
    with store.connect() as con:
        row = con.execute("SELECT s.last_analyze, c.reltuples FROM pg_class c JOIN pg_stat_user_tables s "
                          "ON s.relid = c.oid WHERE c.oid = to_regclass(?)", [table]).fetchone()
    assert row is not None
    return row[0], float(row[1])


def _prompts(store: Store, start: int, n: int) -> None:
    with store.connect() as con:
        insert_values(con, "INSERT INTO prompts (sha256, text)", [(f"{i:064x}", f"p{i}") for i in range(start,
                                                                                                      start + n)])


def test_a_bulk_write_past_autovacuums_threshold_analyses_the_table_at_once(home: Path, postgres_url: str) -> None:
    store = Store(postgres_url)
    _prompts(store, 0, 10)  # 10 changed rows: under the threshold of 50 for a table never analysed
    assert _stats(store, "prompts")[0] is None
    _prompts(store, 10, ANALYZE_BASE + 1)  # 10 + 51 changed since no analysis (the first 10 counted once flushed)
    analysed, rows = _stats(store, "prompts")
    assert analysed is not None and rows in (51.0, 61.0)  # the server's count of 10 may not be flushed yet


def test_a_run_stored_in_bulk_leaves_its_tables_analysed(home: Path, postgres_url: str,
                                                         monkeypatch: Any) -> None:
    """The three tables a run's samples are read from, right after ``finish_run`` stored 300 samples."""
    from evalgate.splits import write_split
    from tests.gate.test_suite import _add_run

    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    store = Store(postgres_url)
    write_split("big", "dev", [{"id": f"q{i}", "question": f"{i}?"} for i in range(300)], {"source": "test"})
    store.record_protocol("ta", "1", "ta" * 32, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
    _add_run(store, "ta", "r1", "d1", home / "ck", "big", "dev", 1, 10, [1, 0, 0] * 100)
    analysed, rows = _stats(store, "samples")
    assert analysed is not None and rows == 300.0
