"""The one in-memory DuckDB instance a process attaches its store files to.

A store file is opened per transaction (``evalgate.store.db``: DuckDB's lock on a file excludes every other process
while it is open). Opening it as ``duckdb.connect(path)`` made a DuckDB instance each time, 20-25 ms here (duckdb
2.0 builds its built-in catalog and a thread pool per instance); ``ATTACH`` into an instance kept for the process's
life costs about 5 ms, and ``DETACH`` checkpoints the file's write-ahead log and releases DuckDB's lock on it, as
closing a connection does (bench/store_open.py; tests/store/test_attach.py).

Each opening gets its own connection (a cursor of the instance) and its own database name, so threads on different
files do not meet; one file is never attached twice at once, because every opening holds the file's lock. A forked
child makes an instance of its own (the parent's threads do not exist there).
"""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import duckdb

_INSTANCE: tuple[int, duckdb.DuckDBPyConnection] | None = None  # (the pid that made it, its connection)
_LOCK = threading.Lock()  # guards _INSTANCE, _ATTACHED and statements on the instance's own connection
_ATTACHED: dict[int, str] = {}  # id of an open connection -> the name its file is attached under
_NAMES = itertools.count(1)


def sql_text(text: str) -> str:
    """``text`` as an SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def attach(path: Path) -> duckdb.DuckDBPyConnection:
    """A new connection whose current database is the file ``path`` (created if missing), attached to this
    process's instance under a name of its own; give it back with ``detach``. The caller holds the file's lock.

    Raises:
        duckdb.Error: the file cannot be attached (not a DuckDB file, locked by another process, unreadable);
            nothing stays attached.
    """
    global _INSTANCE
    with _LOCK:
        if _INSTANCE is None or _INSTANCE[0] != os.getpid():
            _INSTANCE = (os.getpid(), duckdb.connect(":memory:"))
        con = _INSTANCE[1].cursor()
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
    """The names of the files attached now (empty between transactions)."""
    with _LOCK:
        if _INSTANCE is None:
            return set()
        rows = _INSTANCE[1].execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal "
                                    "AND database_name <> 'memory'").fetchall()
    return {r[0] for r in rows}


def _before_fork() -> None:
    """Before ``os.fork``: close the instance when no file is attached. Its thread pool's threads do not exist in
    the child, and destroying the child's copy of it waits for them for ever (a hang seen in a forked test); the
    next opening makes a new instance."""
    global _INSTANCE
    _LOCK.acquire()
    if _INSTANCE is not None and not _ATTACHED and _INSTANCE[0] == os.getpid():
        _INSTANCE[1].close()
        _INSTANCE = None


def _after_fork_in_child() -> None:
    """In a forked child, where the parent's instance was busy (a file attached in another thread): its copy is
    given one reference more than anyone holds, so it is never destroyed, not even at the child's exit."""
    global _INSTANCE
    if _INSTANCE is not None:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_INSTANCE[1]))
        _INSTANCE = None
        _ATTACHED.clear()
    _LOCK.release()


os.register_at_fork(before=_before_fork, after_in_parent=_LOCK.release, after_in_child=_after_fork_in_child)
