"""``Database(":memory:")``: the store's schema and SQL without a file; and the ``memory_store`` fixture."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from evalgate.migrations import MIGRATIONS
from evalgate.store import AccessLogRepo, Database, ProtocolRepo, Store


def test_a_memory_database_is_migrated_keeps_what_it_was_given_and_writes_no_file(tmp_path: Path,
                                                                                 home: Path) -> None:
    db = Database(":memory:")
    with db.transaction() as con:
        versions = [r[0] for r in con.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()]
    assert versions == sorted(v for v, _, _ in MIGRATIONS)
    ProtocolRepo(db).record_protocol("p", "1", "h" * 64, {})
    assert Store(db).protocol_hash("p", "1") == "h" * 64  # another repository over the same database
    assert Store(Database(":memory:")).protocol_hash("p", "1") is None  # each memory database is its own
    assert not any(home.rglob("*.duckdb")) and not any(tmp_path.glob("*memory*"))


def test_an_error_rolls_back_its_transaction_and_a_nested_one_joins_the_outer() -> None:
    db = Database(":memory:")
    with pytest.raises(ZeroDivisionError), db.transaction() as con:
        con.execute("INSERT INTO protocols VALUES ('p', '1', 'h', '{}', now())")
        1 / 0  # noqa: B018
    with db.transaction() as con:
        assert con.execute("SELECT count(*) FROM protocols").fetchone() == (0,)
    with pytest.raises(ZeroDivisionError), db.transaction() as outer:
        outer.execute("INSERT INTO protocols VALUES ('p', '1', 'h', '{}', now())")
        with db.transaction() as inner:
            inner.execute("INSERT INTO protocols VALUES ('p', '2', 'h', '{}', now())")
        1 / 0  # noqa: B018
    with db.transaction() as con:  # the inner block committed nothing of its own
        assert con.execute("SELECT count(*) FROM protocols").fetchone() == (0,)


def test_threads_take_turns_on_the_one_connection() -> None:
    repo = AccessLogRepo(Database(":memory:"))

    def count() -> None:
        for _ in range(50):
            repo.access_log_count(10)
    threads = [threading.Thread(target=count) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert repo.access_log_count(10) == 0


def test_the_fixture_is_the_store_every_default_store_uses(memory_store: Store, home: Path) -> None:
    memory_store.record_protocol("p", "1", "h" * 64, {})
    assert Store().protocol_hash("p", "1") == "h" * 64  # Store() without a path: the active workspace's database
    assert not (home / "home" / "evalgate.duckdb").exists()
