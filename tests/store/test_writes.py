"""Bulk writes to a real DuckDB file: multi-row ``VALUES`` in chunks (``store.db.insert_values``) keep every row,
in order, and ``ON CONFLICT DO NOTHING`` keeps the first of two rows with one key, as ``executemany`` did; the
generation cache's bulk writes on each backend (a DuckDB file, a PostgreSQL server)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from evalgate.store import Store
from evalgate.store.db import insert_values

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server


@pytest.mark.file_only("DuckDB's chunked multi-row VALUES; the server's COPY path: tests/store/test_bulk_writes.py")

def test_chunks_keep_every_row_and_the_first_of_a_repeated_key(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO t VALUES (3, 'old')")
    # 7 rows in chunks of 3: rows 0-2, 3-5, 6; key 3 is already stored, key 5 repeats inside one chunk (rows 3-5:
    # keys 3, 4, 5 then 5 again in the next chunk), so 6 distinct keys are new: 0, 1, 2, 4, 5, 6
    rows = [[0, "a"], [1, "b"], [2, "c"], [3, "d"], [4, "e"], [5, "f"], [5, "g"], [6, "h"]]
    insert_values(con, "INSERT INTO t", rows, "ON CONFLICT DO NOTHING", chunk=3)
    got = dict(con.execute("SELECT k, v FROM t").fetchall())
    assert got == {0: "a", 1: "b", 2: "c", 3: "old", 4: "e", 5: "f", 6: "h"}
    insert_values(con, "INSERT INTO t", [])  # nothing to write is not an error
    assert con.execute("SELECT count(*) FROM t").fetchone() == (7,)


def test_generations_above_one_chunk_all_come_back_from_the_cache(backend_store: Store) -> None:
    store = backend_store
    n = 1234  # three statements of 500, 500 and 234 rows
    rows = [{"item_id": f"q{i}", "sample_index": i % 3, "seed": 10_000 + i, "prompt_sha256": f"p{i % 7}",
             "text": f"completion {i}", "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"}
            for i in range(n)]
    prompts = {f"p{j}": f"prompt {j}" for j in range(7)}
    store.put_generations("ck", "ph", rows, prompts, "st", run_id=None)
    store.put_generations("ck", "ph", rows[:10], prompts, "st", run_id=None)  # stored again: kept once
    keys = [(r["item_id"], r["sample_index"], r["seed"]) for r in rows]
    got = store.cached_generations("ck", "ph", keys, {r["item_id"]: r["prompt_sha256"] for r in rows}, "st")
    assert len(got) == n
    assert all(got[(r["item_id"], r["sample_index"], r["seed"])]["text"] == r["text"] for r in rows)
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM generations").fetchone() == (n,)
        assert con.execute("SELECT count(*) FROM prompts").fetchone() == (7,)
