"""``samples_frame`` on a DuckDB file (tests/test_frames.py runs in memory): the logged read is in the file, chained
and signed, before the query that makes the frame runs; a refused read is logged in the file too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalgate.access import log as accesslog
from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import write_split
from evalgate.store import Store
from evalgate.views.frames import samples_frame
from tests import gate_fixtures as fx


def _file_rows(path: Path) -> list[tuple[Any, ...]]:
    """The inspect-samples rows as another connection finds them in the file (the store is closed between calls)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT actor, outcome, run_id, cached FROM access_log WHERE purpose = 'inspect-samples' "
                           "ORDER BY seq").fetchall()
    finally:
        con.close()


def test_samples_frame_logs_a_signed_row_in_the_file_before_it_queries(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write_split("fx-dev", "dev", fx.ITEMS, {"source": "test fixture"})
    write_split("fx-private", "private", fx.ITEMS, {"source": "test fixture"})
    store = Store()
    assert store.path.suffix == ".duckdb"  # a file, not the memory store
    fx.add_run(store, "dev-1", "d1", tmp_path / "ck", "fx-dev", "dev", 1, 10, [1, 0, 1, 1, 0, 0, 0, 1, 0, 0])
    fx.add_run(store, "dec-1", "d1", tmp_path / "ck", "fx-private", "private", 1, 10, [1] * 10)

    seen_at_query: list[list[dict[str, Any]]] = []
    real_frame = store.frame

    def spy(sql: str, params: list[Any] | None, kind: str) -> Any:  # what the log held when the query ran
        seen_at_query.append([r for r in store.access_rows() if r.purpose == "inspect-samples"])
        return real_frame(sql, params, kind)

    monkeypatch.setattr(store, "frame", spy)
    frame = samples_frame("dev-1", "arrow", actor="analyst", store=store)
    assert frame.num_rows == 10 and sum(frame.column("score").to_pylist()) == 4.0
    assert [(r.actor, r.outcome, r.run_id) for r in seen_at_query[0]] == [("analyst", "read", "dev-1")]
    assert _file_rows(store.path) == [("analyst", "read", "dev-1", True)]
    checked = accesslog.verify(store)
    assert checked["ok"] and checked["signature"]["ok"] and checked["signature"]["checked"]

    with pytest.raises(RefusedByPolicy, match="never shown"):
        samples_frame(["dev-1", "dec-1"], "pandas", actor="analyst", store=store)
    assert len(seen_at_query) == 1  # refused before any query
    assert _file_rows(store.path)[-1] == ("analyst", "refused", None, False)
    assert accesslog.verify(store)["ok"]
