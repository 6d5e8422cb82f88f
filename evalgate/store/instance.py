"""The one in-memory DuckDB instance a process attaches its store files to.

A store file is opened per transaction (``evalgate.store.db``: DuckDB's lock on a file excludes every other process
while it is open). Opening it as ``duckdb.connect(path)`` made a DuckDB instance each time, 20-25 ms here (duckdb
2.0 builds its built-in catalog and a thread pool per instance); ``ATTACH`` into an instance kept for the process's
life costs about 5 ms, and ``DETACH`` checkpoints the file's write-ahead log and releases DuckDB's lock on it, as
closing a connection does (bench/store_open.py; tests/store/test_attach.py).

Each opening gets its own connection (a cursor of the instance) and its own database name, so threads on different
files do not meet; one file is never attached twice at once, because every opening holds the file's lock. A forked
child makes an instance of its own (the parent's threads do not exist there). The instance also holds templates:
memory databases built once (``template``; ``store.db`` copies its migrated schema into each new store file).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path

import duckdb

_INSTANCE: tuple[int, duckdb.DuckDBPyConnection] | None = None  # (the pid that made it, its connection)
_LOCK = threading.Lock()  # guards _INSTANCE, _ATTACHED and statements on the instance's own connection
_ATTACHED: dict[int, str] = {}  # id of an open connection -> the name its file is attached under
_TEMPLATES: dict[Hashable, str] = {}  # key -> the name of a memory database built in the instance (``template``)
_BUILDING = threading.Lock()  # one template built at a time
_NAMES = itertools.count(1)


def sql_text(text: str) -> str:
    """``text`` as an SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def _instance() -> duckdb.DuckDBPyConnection:
    """The instance's own connection, made (with no templates yet) where this process has none. ``_LOCK`` held."""
    global _INSTANCE
    if _INSTANCE is None or _INSTANCE[0] != os.getpid():
        _INSTANCE = (os.getpid(), duckdb.connect(":memory:"))
        _TEMPLATES.clear()
    return _INSTANCE[1]


def template(key: Hashable, build: Callable[[duckdb.DuckDBPyConnection], None]) -> str:
    """The name of a memory database attached to this process's instance, built once per instance by
    ``build(con)`` (``con``'s current database is the new one; ``key`` names what ``build`` makes). A file attached
    by ``attach`` can be filled from it with ``COPY FROM DATABASE``. It lives as long as the instance (a fork
    closes an idle instance, and the next call builds it again).

    Raises:
        Exception: whatever ``build`` raised; nothing of the half-built database stays attached.
    """
    with _BUILDING:
        with _LOCK:
            if key in _TEMPLATES:
                return _TEMPLATES[key]
            con = _instance().cursor()
            name = f"evalgate_template_{next(_NAMES)}"
        try:
            con.execute(f"ATTACH ':memory:' AS {name}")
            con.execute(f"USE {name}")
            build(con)
        except BaseException:
            con.close()
            with _LOCK:
                _instance().execute(f"DETACH DATABASE IF EXISTS {name}")
            raise
        con.close()
        with _LOCK:
            _TEMPLATES[key] = name
        return name


def attach(path: Path) -> duckdb.DuckDBPyConnection:
    """A new connection whose current database is the file ``path`` (created if missing), attached to this
    process's instance under a name of its own; give it back with ``detach``. The caller holds the file's lock.

    Raises:
        duckdb.Error: the file cannot be attached (not a DuckDB file, locked by another process, unreadable);
            nothing stays attached.
    """
    with _LOCK:
        con = _instance().cursor()
        name = _ATTACHED[id(con)] = f"evalgate_file_{next(_NAMES)}"
    try:
        con.execute(f"ATTACH {sql_text(str(path))} AS {name}")
        con.execute(f"USE {name}")
    except BaseException:
        detach(con)
        raise
    return con


def detach(con: duckdb.DuckDBPyConnection) -> None:
    """Close ``con`` (from ``attach``) and detach its file. The connection is closed first, so a transaction left
    open on it (a rollback that failed on a damaged file) cannot keep the file attached; a connection ``attach``
    did not make is only closed."""
    con.close()
    with _LOCK:
        name = _ATTACHED.pop(id(con), None)
        if name is not None and _INSTANCE is not None:
            _INSTANCE[1].execute(f"DETACH DATABASE IF EXISTS {name}")


def attached() -> set[str]:
    """The names under which files are attached now (empty between transactions)."""
    with _LOCK:
        if _INSTANCE is None:
            return set()
        rows = _INSTANCE[1].execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal AND "
                                    "database_name LIKE 'evalgate_file_%'").fetchall()
    return {r[0] for r in rows}


def _before_fork() -> None:
    """Before ``os.fork``: close the instance when no file is attached and no template is being built. Its thread
    pool's threads do not exist in the child, and destroying the child's copy of it waits for them for ever (a hang
    seen in a forked test); the next opening makes a new instance."""
    global _INSTANCE
    _LOCK.acquire()
    if _INSTANCE is not None and not _ATTACHED and not _BUILDING.locked() and _INSTANCE[0] == os.getpid():
        _INSTANCE[1].close()
        _INSTANCE = None
        _TEMPLATES.clear()


def _after_fork_in_child() -> None:
    """In a forked child, where the parent's instance was busy (a file attached or a template being built in another
    thread): its copy is given one reference more than anyone holds, so it is never destroyed, not even at the
    child's exit."""
    global _INSTANCE
    if _INSTANCE is not None:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_INSTANCE[1]))
        _INSTANCE = None
        _ATTACHED.clear()
        _TEMPLATES.clear()
    _LOCK.release()


os.register_at_fork(before=_before_fork, after_in_parent=_LOCK.release, after_in_child=_after_fork_in_child)
