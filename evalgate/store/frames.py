"""Query results as Arrow tables, pandas or polars frames, converted by DuckDB itself (``relation.to_arrow_table()``
/ ``.df()`` / ``.pl()``), or on a PostgreSQL store from the rows by pyarrow: the SQL of ``evalgate.views.frames``,
which checks the extras and logs the reads."""

from __future__ import annotations

from typing import Any

from evalgate.store.db import Repository, check_read_only
from evalgate.store.dialect import POSTGRESQL, dialect

FRAME_METHODS = {"arrow": "to_arrow_table", "pandas": "df", "polars": "pl"}
"""Frame kind -> the DuckDB relation method that makes it."""

RUNS_SQL = "SELECT * FROM runs ORDER BY started_at"
SAMPLES_SQL = ("SELECT s.run_id, r.split, r.tier, r.train_run, r.train_seed, r.step, s.item_id, s.sample_index, "
               "s.seed, s.score, s.status, s.extracted, s.detail, s.cached FROM samples s JOIN runs r USING (run_id) "
               "WHERE s.run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY s.run_id, s.item_id, s.sample_index")
GATES_SQL = "SELECT * FROM gates ORDER BY created_at"
ACCESS_SQL = "SELECT * FROM access_log ORDER BY seq"


class FrameRepo(Repository):
    """Any read-only query's result as a frame."""

    def frame(self, sql: str, params: list[Any] | None, kind: str) -> Any:
        """The result of ``sql`` as ``kind`` (a ``FRAME_METHODS`` key; its package must be importable).

        Raises:
            BadInput: ``sql`` is not one read-only statement (``check_read_only``).
        """
        check_read_only(sql)
        with self.connect() as con:
            if dialect(con) != POSTGRESQL:
                return getattr(con.sql(sql, params=params), FRAME_METHODS[kind])()  # type: ignore[attr-defined]
            cur = con.execute(sql, params or [])
            names, rows = [d[0] for d in cur.description], cur.fetchall()
        import pyarrow as pa

        table = pa.table({n: _column(pa, [r[i] for r in rows]) for i, n in enumerate(names)})
        if kind == "arrow":
            return table
        if kind == "pandas":
            return table.to_pandas()
        import polars as pl

        return pl.from_arrow(table)


def _column(pa: Any, values: list[Any]) -> Any:
    """``values`` as a pyarrow array: typed by pyarrow, except integers above int64 (a ``NUMERIC(20)`` seed up to
    2**64 - 1), which are uint64 as DuckDB's ``UBIGINT`` column gives them."""
    try:
        return pa.array(values)
    except OverflowError:
        return pa.array(values, type=pa.uint64())
