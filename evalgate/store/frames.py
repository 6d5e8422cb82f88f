"""Query results as Arrow tables, pandas or polars frames, converted by DuckDB itself (``relation.to_arrow_table()``
/ ``.df()`` / ``.pl()``): the SQL of ``evalgate.frames``, which checks the extras and logs the reads."""

from __future__ import annotations

from typing import Any

import duckdb

from evalgate.errors import BadInput
from evalgate.store.db import Repository

FRAME_METHODS = {"arrow": "to_arrow_table", "pandas": "df", "polars": "pl"}
"""Frame kind -> the DuckDB relation method that makes it."""

RUNS_SQL = "SELECT * FROM runs ORDER BY started_at"
SAMPLES_SQL = ("SELECT s.run_id, r.split, r.tier, r.train_run, r.train_seed, r.step, s.item_id, s.sample_index, "
               "s.seed, s.score, s.status, s.extracted, s.detail, s.cached FROM samples s JOIN runs r USING (run_id) "
               "WHERE s.run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY s.run_id, s.item_id, s.sample_index")
GATES_SQL = "SELECT * FROM gates ORDER BY created_at"
ACCESS_SQL = "SELECT * FROM access_log ORDER BY seq"


def check_read_only(sql: str) -> None:
    """Accept one statement that only reads (DuckDB's own parser says ``SELECT``: also ``WITH``, ``FROM t``,
    ``VALUES``, ``DESCRIBE``, ``SUMMARIZE``).

    Raises:
        BadInput: SQL that does not parse, several statements, or one that writes or changes the database
            (``UPDATE access_log ...``, ``DELETE``, ``INSERT``, ``COPY``, ``ATTACH``, ``PRAGMA``, ``SET``): a frame
            is a read, and the store is written only by evalgate's commands, under its lock and the access log's
            chain.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise BadInput(f"query_frame: the SQL does not parse: {e}") from e
    kinds = [st.type.name for st in statements]
    if kinds != ["SELECT"]:
        got = ", ".join(kinds) or "empty"
        raise BadInput(f"query_frame reads the store with one SELECT statement; this SQL is {got}: the store is "
                       "written only through evalgate's commands (under its lock, the access log hash-chained); "
                       "query what you need with SELECT")


class FrameRepo(Repository):
    """Any read-only query's result as a frame."""

    def frame(self, sql: str, params: list[Any] | None, kind: str) -> Any:
        """The result of ``sql`` as ``kind`` (a ``FRAME_METHODS`` key; its package must be importable).

        Raises:
            BadInput: ``sql`` is not one read-only statement (``check_read_only``).
        """
        check_read_only(sql)
        with self.connect() as con:
            return getattr(con.sql(sql, params=params), FRAME_METHODS[kind])()
