"""The store test suite (docs/STORE.md, "The store test suite"): the test modules that run once on each store
backend, a DuckDB file and a PostgreSQL server, through the ``store_backend`` fixture (tests/conftest.py); and
the backend a test runs on (``StoreBackend``). tests/test_store_suite.py checks that every test of every module
listed here is collected with both backend ids, or with one and a marker giving the reason."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.store import Store
    from tests.helpers.postgres import PostgresServer

BACKENDS = ("duckdb-file", "postgresql")
"""The backend ids, as they appear in each test's id (``test_x[duckdb-file]``, ``test_x[postgresql]``)."""

STORE_SUITE = (
    "tests/store/test_attach.py",
    "tests/store/test_backends.py",
    "tests/store/test_budget_rule.py",
    "tests/store/test_bulk_writes.py",
    "tests/store/test_create.py",
    "tests/store/test_handed_down.py",
    "tests/store/test_memory.py",
    "tests/store/test_open.py",
    "tests/store/test_pg_outage.py",
    "tests/store/test_pg_roles.py",
    "tests/store/test_pg_statistics.py",
    "tests/store/test_pg_team.py",
    "tests/store/test_postgres.py",
    "tests/store/test_run_prompts.py",
    "tests/store/test_sealed.py",
    "tests/store/test_session.py",
    "tests/store/test_store_lock.py",
    "tests/store/test_store_migrate.py",
    "tests/store/test_writes.py",
    "tests/accesslog/test_access_log.py",
    "tests/accesslog/test_audit_log.py",
    "tests/accesslog/test_signed_log.py",
    "tests/splits/test_budget_content.py",
    "tests/test_samples.py",
    "tests/test_rating.py",
    "tests/gate/test_history.py",
)
"""Every module of tests/store and tests/accesslog (the guard test checks none is missing), then the repositories'
tests elsewhere; paths from the repository root, as docs/STORE.md lists them."""

ONLY = {"file_only": "duckdb-file", "server_only": "postgresql"}
"""The markers of a test that is one backend's by nature, and that backend: ``@pytest.mark.file_only("why")``
(DuckDB's file, its lock, ATTACH, the memory database), ``@pytest.mark.server_only("why")`` (roles, triggers,
connections, a server going away). Such a test is collected with that backend's id only; the reason is required."""


def backends_of(node: Any) -> tuple[str, ...]:
    """The backend ids a test (a pytest item or function definition) runs on: ``BACKENDS``, or the one its
    ``file_only`` / ``server_only`` marker names.

    Raises:
        ValueError: such a marker without a reason, or both markers."""
    only = []
    for marker, backend in ONLY.items():
        if (mark := node.get_closest_marker(marker)) is not None:
            if not (mark.args and isinstance(mark.args[0], str) and mark.args[0].strip()):
                raise ValueError(f"{node.nodeid}: @pytest.mark.{marker} needs a reason: {marker}(\"why\")")
            only.append(backend)
    if len(only) > 1:
        raise ValueError(f"{node.nodeid}: both file_only and server_only")
    return tuple(only) or BACKENDS


@dataclass
class StoreBackend:
    """The backend a test of the store suite runs on: ``name`` (one of ``BACKENDS``), ``target`` (the test's
    store: the home's DuckDB file, or the URL of an empty schema on the worker's server, which ``EVALGATE_STORE``
    names for the test's duration so every ``Store()`` made without a path uses it), and ``fresh()`` for another
    empty store on the same backend."""

    name: str
    target: str
    _new: Callable[[], str] = field(repr=False)
    server: PostgresServer | None = field(default=None, repr=False)

    def fresh(self) -> str:
        """The target of another empty store on this backend (a new file path, or a new schema's URL)."""
        return self._new()

    def store(self, target: str | None = None) -> Store:
        """A ``Store`` on ``target`` (default the test's own), migrated."""
        from evalgate.store import Store
        from evalgate.store.db import open_database

        return Store(open_database(target or self.target))


    def at_rest(self, server_wal: bool = True) -> bytes:
        """Every byte the store keeps at rest: the DuckDB file and its ``.wal``; on the server, after a
        ``CHECKPOINT``, every file of its data directory (its tables, other tests' schemas too, and its write-ahead
        log ``pg_wal`` unless ``server_wal`` is False). A value above PostgreSQL's TOAST threshold (about 2 kB)
        may be stored compressed: look for short strings."""
        from pathlib import Path

        if self.server is None:
            files = [Path(self.target), Path(self.target + ".wal")]
        else:
            self.server.admin("CHECKPOINT")
            wal = self.server.data / "pg_wal"
            files = [p for p in self.server.data.rglob("*") if p.is_file() and (server_wal or wal not in p.parents)]
        return b"".join(p.read_bytes() for p in files if p.is_file())


def file_targets(folder: str) -> Callable[[], str]:
    """New DuckDB file paths in ``folder`` (``store-1.duckdb``, ``store-2.duckdb``, ...)."""
    counter = itertools.count(1)
    return lambda: f"{folder}/store-{next(counter)}.duckdb"
