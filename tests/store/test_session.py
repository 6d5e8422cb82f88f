"""``Store.session``: calls share one connection, but each is still its own transaction."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from evalgate.store import Store, instance
from tests.helpers.store_suite import StoreBackend

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server


def _opens(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files opened (attached to this process's DuckDB instance) while the test runs."""
    opened: list[Path] = []
    real = instance.attach

    def spy(path: Path) -> duckdb.DuckDBPyConnection:
        opened.append(path)
        return real(path)

    monkeypatch.setattr(instance, "attach", spy)
    return opened


@pytest.mark.file_only("counts the opening of a DuckDB file (instance.attach)")
def test_calls_in_a_session_open_the_database_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "s.duckdb")
    opened = _opens(monkeypatch)
    with store.session():
        store.record_protocol("p", "1", "a" * 64, {"x": 1})
        with store.session():  # nested: the outer connection is reused
            store.upsert_checkpoint("d" * 64, "/ckpt", "hf", None, None, None)
        assert store.runs() == []
    assert len(opened) == 1
    store.runs()  # outside a session: one open per call again
    assert len(opened) == 2


def _sql_errors(store_backend: StoreBackend) -> tuple[type[Exception], ...]:
    """The error an SQL statement that fails raises on the backend."""
    if store_backend.name == "postgresql":
        import psycopg

        return (psycopg.Error,)
    return (duckdb.Error,)


def test_a_failing_call_in_a_session_keeps_what_earlier_calls_wrote(store_backend: StoreBackend) -> None:
    store = store_backend.store()
    with pytest.raises(_sql_errors(store_backend)):
        with store.session():
            store.record_protocol("p", "1", "a" * 64, {"x": 1})
            with store.connect() as con:
                con.execute("INSERT INTO protocols VALUES ('q', '1', 'b', '{}', now())")
                con.execute("SELECT * FROM no_such_table")  # fails: this call's insert is rolled back
    with store_backend.store().connect() as c:  # another Store of the same database
        assert c.execute("SELECT name FROM protocols ORDER BY name").fetchall() == [("p",)]
    with store.connect() as c:  # the session ended and released its connection and lock
        assert c.execute("SELECT count(*) FROM protocols").fetchone() == (1,)


def test_another_thread_waits_for_the_session_instead_of_sharing_its_connection(store_backend: StoreBackend) -> None:
    import threading
    import time

    store = store_backend.store()
    order: list[str] = []

    def other() -> None:
        store.record_protocol("q", "1", "b" * 64, {})  # must not run inside the open session
        order.append("other thread wrote")

    with store.session():
        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.5)
        order.append("session ends")
    t.join(timeout=30)
    assert order == ["session ends", "other thread wrote"]
    with store.connect() as con:
        assert con.execute("SELECT name FROM protocols").fetchall() == [("q",)]
