"""Every row of one store copied into another, empty one (``evalgate store migrate``): a DuckDB file to a
PostgreSQL server, or a server's store to a local file. Rows are copied as stored: sealed values stay sealed, the
access log keeps its hashes and its signed head (``evalgate.access.transfer`` checks the chain before and after)."""

from __future__ import annotations

from typing import Any

from evalgate.core.errors import BadInput
from evalgate.store.db import Database, insert_values
from evalgate.store.dialect import POSTGRESQL, dialect

TABLES_SQL = ("SELECT table_name FROM information_schema.tables WHERE table_catalog=current_database() AND "
              "table_schema=current_schema() AND table_type='BASE TABLE' ORDER BY table_name")
"""The store's tables (both dialects: DuckDB lists every attached database's, hence the catalog)."""


def copy_tables(source: Database, target: Database, chunk: int = 5000) -> dict[str, int]:
    """Copy every row of every table of ``source`` into ``target``, in one transaction on each (the source's lock
    held throughout, so no append slips between the check and the copy). Both have applied the same migrations
    (opening them did); every table of ``target`` but ``schema_migrations`` must be empty.

    Returns:
        Rows copied per table.

    Raises:
        BadInput: the two stores' migrations differ, ``target`` holds rows, or a table of ``target`` does not hold
            the rows copied into it (nothing is written: the target's transaction is rolled back).
    """
    copied: dict[str, int] = {}
    with source.transaction() as scon, target.transaction() as tcon:
        mine, theirs = (sorted(r[0] for r in c.execute("SELECT version FROM schema_migrations").fetchall())
                        for c in (scon, tcon))
        if mine != theirs:
            raise BadInput(f"{source.location} and {target.location} have applied different migrations "
                           f"({sorted(set(mine) ^ set(theirs))}); upgrade evalgate where it is older, then copy")
        tables = [r[0] for r in scon.execute(TABLES_SQL).fetchall() if r[0] != "schema_migrations"]
        full = [t for t in tables if tcon.execute(f"SELECT count(*) FROM {t}").fetchone() != (0,)]
        if full:
            raise BadInput(f"{target.location} is not empty ({', '.join(full)} hold rows): the copy goes into a new "
                           "store only; give an empty database (or schema), or a new file")
        if dialect(tcon) == POSTGRESQL:  # the copy's rows chain as the source's do, checked before and after
            tcon.execute("SET LOCAL evalgate.copying = 'on'")
        for table in tables:
            cur = scon.execute(f"SELECT * FROM {table}" + (" ORDER BY seq" if table == "access_log" else ""))
            head = f"INSERT INTO {table} ({', '.join(d[0] for d in cur.description)})"
            copied[table] = 0
            while rows := _fetch(cur, chunk):
                insert_values(tcon, head, rows)
                copied[table] += len(rows)
            if (got := tcon.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) != copied[table]:
                raise BadInput(f"{target.location}'s table {table} holds {got} rows after the copy of "
                               f"{copied[table]}: a trigger or rule of the target dropped or added rows; nothing "
                               "was copied")
    return copied


def _fetch(cur: Any, n: int) -> list[Any]:
    return list(cur.fetchmany(n))
