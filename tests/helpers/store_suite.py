"""The store test suite (docs/STORE.md, "The store test suite"): the test modules that run once on each store
backend, a DuckDB file and a PostgreSQL server, through the ``store_backend`` fixture (tests/conftest.py), and
those of its modules whose tests also run on an in-memory DuckDB, the fast lane's stand-in for the file
(``MEMORY_TWINS``); and the backend a test runs on (``StoreBackend``). tests/test_store_suite.py checks that every
test of every module listed here is collected with both backend ids (and the memory one where its module is a
twin), or with fewer and a marker giving the reason."""

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
    "tests/store/test_rows.py",
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

MEMORY = "duckdb-memory"
"""The id of a test's run on an in-memory DuckDB (``Database(":memory:")``, an empty migrated one per test): in
``MEMORY_TWINS``' modules every test that runs on both backends runs there too, marked ``store_memory``, and its
``[duckdb-file]`` id is marked ``store_file``; ``make test-fast`` runs the memory id in place of the file one
(about half its CPU: the file's ATTACH, DETACH and checkpoint per transaction), ``make test`` the file and the
server, not the memory id (docs/STORE.md, "The store test suite")."""

MEMORY_TWINS = tuple(m for m in STORE_SUITE if not m.startswith("tests/store/"))
"""The modules whose two-backend tests also run in memory: the suite's modules outside tests/store, which test the
repositories' callers (the access log, budgets, samples, ratings, stored gates) rather than the store's files."""

NOT_IN_MEMORY = "not_in_memory"
"""The marker of a test of ``MEMORY_TWINS`` that a memory store would not test (what a store keeps at rest, a store
opened with older migrations): ``@pytest.mark.not_in_memory("why")``; it runs on the two backends only, its
``[duckdb-file]`` id in both lanes."""

ONLY = {"file_only": "duckdb-file", "server_only": "postgresql"}
"""The markers of a test that is one backend's by nature, and that backend: ``@pytest.mark.file_only("why")``
(DuckDB's file, its lock, ATTACH, the memory database), ``@pytest.mark.server_only("why")`` (roles, triggers,
connections, a server going away). Such a test is collected with that backend's id only; the reason is required."""


def _reason(node: Any, marker: str) -> bool:
    """Whether ``node`` has ``marker``.

    Raises:
        ValueError: it has it without a reason."""
    if (mark := node.get_closest_marker(marker)) is None:
        return False
    if not (mark.args and isinstance(mark.args[0], str) and mark.args[0].strip()):
        raise ValueError(f"{node.nodeid}: @pytest.mark.{marker} needs a reason: {marker}(\"why\")")
    return True


def backends_of(node: Any) -> tuple[str, ...]:
    """The backend ids a test (a pytest item or function definition) runs on: ``BACKENDS``, or the one its
    ``file_only`` / ``server_only`` marker names; with ``MEMORY`` after them where the test runs on both and its
    module is one of ``MEMORY_TWINS``, unless it is marked ``not_in_memory``.

    Raises:
        ValueError: such a marker without a reason, ``not_in_memory`` outside ``MEMORY_TWINS`` or with another
            marker, or both ``file_only`` and ``server_only``."""
    only = [backend for marker, backend in ONLY.items() if _reason(node, marker)]
    if len(only) > 1:
        raise ValueError(f"{node.nodeid}: both file_only and server_only")
    twin = node.nodeid.split("::", 1)[0] in MEMORY_TWINS
    if _reason(node, NOT_IN_MEMORY) and (only or not twin):
        raise ValueError(f"{node.nodeid}: {NOT_IN_MEMORY} is for a two-backend test of a module of MEMORY_TWINS")
    if only:
        return tuple(only)
    return (*BACKENDS, MEMORY) if twin and node.get_closest_marker(NOT_IN_MEMORY) is None else BACKENDS


@dataclass
class StoreBackend:
    """The backend a test of the store suite runs on: ``name`` (one of ``BACKENDS``, or ``MEMORY``), ``target``
    (the test's store: the home's DuckDB file, the URL of an empty schema on the worker's server, or the name of a
    memory database, ``evalgate.store.db.memory_url``; the last two named in ``EVALGATE_STORE`` for the test's
    duration so every ``Store()`` made without a path uses it), and ``fresh()`` for another empty store on the same
    backend."""

    name: str
    target: str
    _new: Callable[[], str] = field(repr=False)
    server: PostgresServer | None = field(default=None, repr=False)

    def fresh(self) -> str:
        """The target of another empty store on this backend (a new file path, a new schema's URL, or a new memory
        database's name)."""
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
        may be stored compressed: look for short strings.

        Raises:
            ValueError: a memory store, which keeps nothing at rest (the test is ``not_in_memory``)."""
        from pathlib import Path

        if self.name == MEMORY:
            raise ValueError("a memory store keeps nothing at rest: mark the test not_in_memory(\"why\")")
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
