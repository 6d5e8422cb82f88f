"""``Database(":memory:")``: the store's schema and SQL without a file; and the ``memory_store`` fixture."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

from evalgate.access import log as accesslog
from evalgate.store import AccessLogRepo, Database, ProtocolRepo, Store
from evalgate.store.migrations import MIGRATIONS
from tests.helpers.memory_stores import MemoryStores

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.file_only("DuckDB's in-memory database and the memory_store fixture")]


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


def _schema(db: Database) -> tuple[list[tuple], list[tuple]]:
    """Every column (table, name, type, default, nullable) and constraint (table, type, columns, text) of ``db``'s
    current database, sorted."""
    with db.transaction() as con:
        cols = con.execute("SELECT table_name, column_name, data_type, column_default, is_nullable FROM "
                           "duckdb_columns() WHERE database_name = current_database() ORDER BY ALL").fetchall()
        cons = con.execute("SELECT table_name, constraint_type, constraint_column_names::VARCHAR, constraint_text "
                           "FROM duckdb_constraints() WHERE database_name = current_database() "
                           "ORDER BY ALL").fetchall()
    return cols, cons


def test_a_copy_has_a_new_databases_schema_its_sources_rows_and_is_its_own() -> None:
    source = Database(":memory:")
    ProtocolRepo(source).record_protocol("p", "1", "h" * 64, {})
    copy = source.copy()
    assert _schema(copy) == _schema(Database(":memory:"))  # columns, types, defaults, keys of all migrations
    with copy.transaction() as con:
        versions = [r[0] for r in con.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()]
    assert versions == sorted(v for v, _, _ in MIGRATIONS)
    assert Store(copy).protocol_hash("p", "1") == "h" * 64  # the rows came along
    ProtocolRepo(copy).record_protocol("q", "1", "c" * 64, {})
    ProtocolRepo(source).record_protocol("r", "1", "s" * 64, {})
    other = source.copy()
    ProtocolRepo(other).record_protocol("q", "1", "o" * 64, {})
    assert Store(source).protocol_hash("q", "1") is None and Store(copy).protocol_hash("r", "1") is None
    assert Store(copy).protocol_hash("q", "1") == "c" * 64 and Store(other).protocol_hash("q", "1") == "o" * 64
    with pytest.raises(duckdb.ConstraintException), copy.transaction() as con:  # the primary key came along
        con.execute("INSERT INTO protocols VALUES ('q', '1', 'h', '{}', now())")


def test_a_closed_copy_is_detached_from_its_source() -> None:
    source = Database(":memory:")
    copies = [source.copy(), source.copy()]

    def attached() -> int:
        with source.transaction() as con:
            return con.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name LIKE "
                               "'evalgate_copy_%'").fetchone()[0]
    assert attached() == 2
    for c in copies:
        c.close()
    assert attached() == 0
    assert Store(source).protocol_hash("p", "1") is None  # the source still works


def test_only_a_memory_database_is_copied_or_given_a_connection(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="copies an open memory database"):
        Database(tmp_path / "s.duckdb").copy()
    closed = Database(":memory:")
    closed.close()
    with pytest.raises(ValueError, match="copies an open memory database"):
        closed.copy()
    with pytest.raises(ValueError, match="only to a memory database"):
        Database(tmp_path / "t.duckdb", connection=duckdb.connect(":memory:"))
    assert not (tmp_path / "t.duckdb").exists()


def test_the_last_access_log_row_is_found_after_a_delete_in_a_busy_memory_database(home: Path) -> None:
    """DuckDB 2.0.1's Top-N scan (``ORDER BY seq DESC LIMIT 1``) missed the row appended after a delete once the
    memory database had seen some 50 transactions: ``access_log_last`` said 1 with row 2 stored, and the next
    append failed on a duplicate ``seq`` (a gate with ``--accept-broken-chain`` after deleted reads)."""
    store = Store(Database(":memory:"))
    for i in range(100):  # one transaction each
        store.record_protocol(f"p{i}", "1", "h" * 64, {})

    def row(split: str) -> dict:
        return accesslog.entry(actor="a", split=split, tier="dev", purpose="tuning", outcome="read")
    accesslog.append_many(store, [row("kept"), row("deleted"), row("deleted")])
    with store.connect() as con:
        con.execute("DELETE FROM access_log WHERE split = 'deleted'")
    accesslog.append(store, row("after"))
    last = store.access_log_last()
    assert last is not None and last.seq == 2
    accesslog.append(store, row("next"))
    assert [(r.seq, r.split) for r in store.access_rows()] == [(1, "kept"), (2, "after"), (3, "next")]


def test_each_memory_store_is_warned_about_its_own_broken_log(capsys: pytest.CaptureFixture[str]) -> None:
    """Every memory database's location is ``:memory:``: the warning given once per store per process was given
    once for all of them, so a second memory store's broken log was extended without a word."""
    def broken() -> Store:
        store = Store(Database(":memory:"))
        row = accesslog.entry(actor="a", split="s", tier="dev", purpose="tuning", outcome="read")
        accesslog.append_many(store, [dict(row), dict(row)])
        with store.connect() as con:
            con.execute("DELETE FROM access_log WHERE seq = 1")
        return store

    first, second = broken(), broken()
    row = accesslog.entry(actor="a", split="s", tier="dev", purpose="tuning", outcome="read")
    capsys.readouterr()
    accesslog.append(first, dict(row))
    assert capsys.readouterr().err.count("is already broken at row 2") == 1
    accesslog.append(first, dict(row))  # once per store
    assert capsys.readouterr().err == ""
    accesslog.append(second, dict(row))
    assert capsys.readouterr().err.count("is already broken at row 2") == 1


def test_a_named_memory_database_is_not_opened_with_other_migrations() -> None:
    """``open_database`` gives the named memory database itself, migrated when it was made: asked for a store with
    fewer migrations (a test of an older schema), it refuses rather than hand over a fully migrated one."""
    from evalgate.store.db import memory_url, open_database

    db = Database(":memory:")
    name = memory_url(db)
    assert open_database(name) is db and open_database(name, MIGRATIONS) is db
    with pytest.raises(ValueError, match="cannot be opened with other migrations"):
        open_database(name, MIGRATIONS[:5])


_VALUE = {"BIGINT": "1", "BOOLEAN": "true", "DOUBLE": "0.5", "INTEGER": "1", "JSON": "'{}'",
          "TIMESTAMP WITH TIME ZONE": "now()", "UBIGINT": "1", "VARCHAR": "'x'"}
"""A literal of each column type the store's tables use (a type not listed fails the test that needs it)."""


def _fill_every_table(db: Database) -> list[str]:
    """Insert one row into every table of ``db`` but ``schema_migrations``, by hand from its columns; the tables."""
    with db.transaction() as con:
        columns: dict[str, list[str]] = {}
        for table, col_type in con.execute("SELECT table_name, data_type FROM duckdb_columns() WHERE database_name "
                                           "= current_database() ORDER BY table_name, column_index").fetchall():
            columns.setdefault(table, []).append(_VALUE[col_type])
        del columns["schema_migrations"]
        for table, values in columns.items():
            con.execute(f'INSERT INTO "{table}" VALUES ({", ".join(values)})')
    return sorted(columns)


def _rows(db: Database) -> dict[str, int]:
    """The number of rows of every table of ``db``, counted."""
    with db.transaction() as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                            "current_database()").fetchall()]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}  # type: ignore[index]


def test_a_released_memory_store_comes_back_empty_as_the_template(memory_stores: MemoryStores) -> None:
    """``memory_stores`` reuses a test's database for the next: every row the test wrote (its access log, signed
    head, sealed key, ratings ... one in each of the 25 tables), committed or left in an open transaction, is gone;
    the next test gets a new ``Database`` object on the same database (no copy made), its schema the template's."""
    template = memory_stores.template
    empty = {t: 0 for t in _rows(template)} | {"schema_migrations": len(MIGRATIONS)}
    assert len(empty) == 26 and _rows(template) == empty
    first = memory_stores.acquire()
    assert _fill_every_table(first) == sorted(set(empty) - {"schema_migrations"})
    assert set(_rows(first).values()) == {1, len(MIGRATIONS)}
    first.close()  # a test may close its store itself; release closes it again
    memory_stores.release(first)
    made = memory_stores.made
    second = memory_stores.acquire()
    assert second is not first and memory_stores.made == made  # the same database, a new object on it
    assert _rows(second) == empty and _schema(second) == _schema(template)
    ProtocolRepo(second).record_protocol("p", "1", "h" * 64, {})
    con = second.transaction().__enter__()  # a test that fails inside a transaction and never leaves it
    con.execute("INSERT INTO protocols VALUES ('q', '1', 'h', '{}', now())")
    memory_stores.release(second)
    third = memory_stores.acquire()
    assert memory_stores.made == made and _rows(third) == empty
    assert ProtocolRepo(third).protocol_hash("p", "1") is None
    memory_stores.release(third)


@pytest.mark.parametrize("change", ["CREATE TABLE extra (k INTEGER)", "ALTER TABLE runs ADD COLUMN extra INTEGER",
                                    "DROP TABLE gates", "CREATE INDEX i ON runs (split)",
                                    "CREATE VIEW v AS SELECT 1", "CREATE SEQUENCE s",
                                    "DELETE FROM schema_migrations WHERE version = 1"])
def test_a_memory_store_whose_schema_a_test_changed_is_not_given_again(memory_stores: MemoryStores,
                                                                       change: str) -> None:
    db = memory_stores.acquire()
    with db.transaction() as con:
        con.execute(change)
    made = memory_stores.made
    memory_stores.release(db)
    again = memory_stores.acquire()
    assert memory_stores.made == made + 1  # a new copy of the template
    assert _rows(again) == _rows(memory_stores.template) and _schema(again) == _schema(memory_stores.template)
    memory_stores.release(again)


def test_each_test_store_is_warned_about_its_own_broken_log(memory_stores: MemoryStores,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The once-per-store warnings are keyed by the ``Database`` object: a reused database under a new object
    warns the next test again."""
    row = accesslog.entry(actor="a", split="s", tier="dev", purpose="tuning", outcome="read")

    def broken(db: Database) -> Store:
        store = Store(db)
        accesslog.append_many(store, [dict(row), dict(row)])
        with store.connect() as con:
            con.execute("DELETE FROM access_log WHERE seq = 1")
        return store

    first = memory_stores.acquire()
    capsys.readouterr()
    accesslog.append(broken(first), dict(row))
    assert capsys.readouterr().err.count("is already broken at row 2") == 1
    memory_stores.release(first)
    second = memory_stores.acquire()
    accesslog.append(broken(second), dict(row))
    assert capsys.readouterr().err.count("is already broken at row 2") == 1
    memory_stores.release(second)
