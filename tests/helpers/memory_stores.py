"""Empty, migrated memory databases for tests (``memory_store``, ``store_backend``'s ``duckdb-memory``), reused.

``MemoryStores.acquire`` gives a test a new ``Database`` object on a memory database of the pool (a ``copy()`` of
the migrated template, made once and reused); ``release`` closes it (rolling back what it left open) and makes the
database the template again: each table a test wrote is created anew (``CREATE OR REPLACE``) from the template's
statement (its estimated size is then 0, and a table whose estimated size is 0 holds no row: DuckDB counts the
deleted rows in it, never fewer than the live ones). A database whose tables, indexes, views, sequences or recorded
migrations differ from the template's, or that cannot be emptied, is closed and never given again. Each test gets
its own ``Database`` object (the access log's once-per-store warnings are keyed by it), its own connection and lock.
"""

from __future__ import annotations

import duckdb

from evalgate.store import Database
from evalgate.store.db import MEMORY

_SHAPE = """SELECT 'table ' || table_name, estimated_size, index_count, sql FROM duckdb_tables()
    WHERE database_name = $db
UNION ALL SELECT 'view ' || view_name, 0, 0, sql FROM duckdb_views() WHERE database_name = $db AND NOT internal
UNION ALL SELECT 'sequence ' || sequence_name, 0, 0, '' FROM duckdb_sequences() WHERE database_name = $db
UNION ALL SELECT 'migrations', count(*), 0, string_agg(version::VARCHAR, ',' ORDER BY version) FROM schema_migrations"""
"""What a database of the pool looks like, in one query (about 1.4 ms): each table with its estimated number of rows,
its number of indexes and its CREATE statement, each view and sequence, and the migrations it records (run with
the database current)."""

Shape = dict[str, tuple[int, int, str]]
"""``_SHAPE``'s rows: name -> (estimated rows, or the number of migrations; indexes; statement)."""


class MemoryStores:
    """The pool of one test process, on ``template`` (an open, migrated, empty memory ``Database`` it never
    writes to).
    """

    def __init__(self, template: Database) -> None:
        self.template = template
        self._shape = self._look(template)
        self._statements = {name[len("table "):]: sql.replace("CREATE TABLE ", "CREATE OR REPLACE TABLE ", 1)
                            for name, (_, _, sql) in self._shape.items() if name.startswith("table ")}
        assert all(sql.startswith("CREATE OR REPLACE TABLE ") for sql in self._statements.values())
        self._free: list[Database] = []  # pool databases (each a copy of the template), empty
        self._lent: dict[int, tuple[Database, Database]] = {}  # id of a lent Database -> (it, its pool database)
        self.made = 0
        """How many copies of the template the pool has made (a discarded database is replaced by a new copy)."""

    @staticmethod
    def _look(db: Database) -> Shape:
        """``_SHAPE`` of ``db``, on its own connection (one statement, committed by itself)."""
        assert db._session is not None
        with db.session():
            con = db._session
            name = db._attached[1] if db._attached is not None else \
                con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
            return {what: (size, indexes, sql) for what, size, indexes, sql
                    in con.execute(_SHAPE, {"db": name}).fetchall()}

    def acquire(self) -> Database:
        """A new ``Database`` object, as a fresh copy of the template (empty, migrated), on a database of the
        pool; give it back with ``release``."""
        if self._free:
            base = self._free.pop()
        else:
            base = self.template.copy()
            self.made += 1
        assert base._session is not None and base._attached is not None
        con = base._session.cursor()
        con.execute(f"USE {base._attached[1]}")
        db = Database(MEMORY, connection=con, env=self.template.env)
        self._lent[id(db)] = (db, base)
        return db

    def release(self, db: Database) -> None:
        """Close ``db`` (what it left uncommitted is rolled back) and empty its pool database for the next
        ``acquire``, or discard that database where it is no longer the template's shape."""
        lent, base = self._lent.pop(id(db))
        assert lent is db
        db.close()
        if self._emptied(base):
            self._free.append(base)
        else:
            base.close()

    def _emptied(self, base: Database) -> bool:
        """Whether ``base`` is the template again (then True): the same tables, indexes, views, sequences and
        migrations as the template, and each table a test wrote (its estimated size not 0) dropped and created
        anew from the template's statement."""
        try:
            shape = self._look(base)
            if shape.keys() != self._shape.keys() or shape["migrations"] != self._shape["migrations"] or any(
                    shape[k][1:] != v[1:] for k, v in self._shape.items()):
                return False
            if shape["table schema_migrations"] != self._shape["table schema_migrations"]:
                return False  # rows inserted into it (and deleted)
            written = [name[len("table "):] for name, (size, _, _) in shape.items()
                       if name.startswith("table ") and name != "table schema_migrations" and size]
            if written:
                assert base._session is not None
                with base.transaction() as con:
                    con.execute("; ".join(self._statements[table] for table in written))
            return True
        except duckdb.Error:
            return False
    def close(self) -> None:
        """Close every database of the pool (and any still lent)."""
        for db, base in self._lent.values():
            db.close()
            base.close()
        for base in self._free:
            base.close()
        self._lent.clear()
        self._free.clear()
