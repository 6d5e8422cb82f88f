"""The two SQL dialects behind the repositories: DuckDB (a store file, the default) and PostgreSQL (a server store,
``EVALGATE_STORE=postgresql://...``, ``evalgate.store.pg``).

The repositories write DuckDB's SQL (``?`` parameters, DuckDB's types); the PostgreSQL connection translates it
(``evalgate.store.pg.translate``). The few statements that have no common form ask ``dialect(con)``. This module
imports nothing, so the migrations, the repositories and both databases can use it.
"""

from __future__ import annotations

from typing import Any, Protocol

DUCKDB = "duckdb"
POSTGRESQL = "postgresql"
SERVER_SCHEMES = ("postgresql://", "postgres://")
"""How a store URL naming a PostgreSQL server begins (libpq's two URI schemes)."""


class Connection(Protocol):
    """What the repositories run SQL on: a DuckDB connection, or ``evalgate.store.pg.PgConnection``.
    ``execute`` returns a cursor with ``fetchone``, ``fetchall`` and ``description``."""

    def execute(self, query: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, query: str, parameters: Any = ..., /) -> Any: ...


def dialect(con: Any) -> str:
    """``"postgresql"`` for a PostgreSQL connection, else ``"duckdb"``."""
    return str(getattr(con, "dialect", DUCKDB))


def is_server_url(target: object) -> bool:
    """Whether ``target`` (a store argument: path, URL or database) is a PostgreSQL URL."""
    return isinstance(target, str) and target.startswith(SERVER_SCHEMES)
