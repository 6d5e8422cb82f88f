"""``Database``: one DuckDB database (a file, or ``":memory:"``), its lock, its connection and its migrations.

DuckDB lets one process hold a database file open for writing, and a read-write connection excludes every other
process. So each transaction on a file opens it under ``filelock`` on ``<db>.lock``, runs and closes it:
concurrent ``evalgate`` processes queue for a few milliseconds instead of failing, and nothing is lost. Inside
``session()`` the transactions share one connection, opened (under the lock) at its start. Constructing a
``Database`` opens a file once (so an unusable store fails at once), unless this process already opened and migrated
that file (``_OPENED``): ``Store()`` is made by many library calls.

"Opening" a file is attaching it to the process's one in-memory DuckDB instance (``evalgate.store.instance``),
and closing it is detaching it: about 5 ms where a DuckDB instance per opening cost 20-25 ms.

``Database(":memory:")`` holds one connection for its whole life, behind a thread lock (no other process can reach
it): the same schema and SQL, without the 4-12 ms that opening and closing a file costs per transaction. The tests
of policy, gates and runs views use it (``tests/conftest.py``); it is lost when the object is. A new one costs a
DuckDB instance and every migration (60-100 ms); ``copy()`` of a migrated one costs about 10 ms, which is how
the tests' ``memory_store`` fixture makes one per test.

Schema changes are numbered migrations in ``evalgate/store/migrations.py``, recorded in ``schema_migrations``; opening a
database applies the ones it has not seen (skipped where the file is as this process left it, fully migrated:
``_MIGRATED``). This module and ``instance`` are the store's only ones that import
DuckDB.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock, Timeout

import evalgate.store.instance as instance
from evalgate.core.environment import Environment, utc_now
from evalgate.core.errors import BadInput, StoreLocked
from evalgate.core.registry import load_reference
from evalgate.store.dialect import POSTGRESQL, Connection, dialect, is_server_url
from evalgate.store.migrations import COMPACT_TABLE, MIGRATIONS, apply
from evalgate.store.waiting import file_lock_holders, lock_timeout, locked

DuckCon = duckdb.DuckDBPyConnection
"""A DuckDB connection (the file and memory databases' own code; the repositories see ``Connection``)."""

MEMORY = ":memory:"
_HELD_OPEN = "Could not set lock on file"  # DuckDB's IOException when another process has the file open
"""The path of a database held in memory."""

_COPIES = itertools.count(1)  # numbers the databases ``Database.copy`` and ``_compact`` attach
# The files this process has opened and migrated: (absolute path, device, inode, number of migrations). A second
# ``Database`` of one of them skips the opening at construction (bench/store_open.py); its transactions still check
# the migrations whenever the file is not as this process left it (``_MIGRATED``).
_OPENED: set[tuple[str, int, int, int]] = set()
# The files this process found fully migrated, each with the state it left them in when it last closed them:
# (device, inode, size, mtime, ctime of the file and of its write-ahead log, the migrations checked). An opening
# that finds the same state skips the migration check (bench/store_open.py); a file any other process wrote, replaced
# or rolled back since (a write changes size, mtime or ctime; a replacement the inode) is checked as before.
_MIGRATED: dict[str, tuple[object, ...]] = {}


def insert_values(con: Connection, head: str, rows: Sequence[Sequence[Any]], tail: str = "",
                  chunk: int = 20_000) -> None:
    """Insert ``rows`` (each a sequence of the same length, in the columns ``head`` names) as
    ``{head} <rows> {tail}``, in bulk: on DuckDB one ``{head} SELECT unnest(?), ... {tail}`` per ``chunk`` rows, each
    column bound as one list; on PostgreSQL ``COPY`` (``PgConnection.copy_rows``; through a temporary table when
    ``tail`` is given, e.g. ``ON CONFLICT DO NOTHING``).

    ``head`` is ``INSERT INTO table`` or ``INSERT INTO table (columns)``. The rows go in in order, so ``ON CONFLICT
    DO NOTHING`` keeps the first of two rows with one key. DuckDB runs ``executemany`` as one statement per row, and
    multi-row ``VALUES`` (the path before) binds and parses every value as a parameter (docs/BENCHMARKS.md, "Gate +
    report over a large store").
    """
    if not rows:
        return
    if dialect(con) == POSTGRESQL:
        con.copy_rows(head, rows, tail)  # type: ignore[attr-defined]
        return
    select = ", ".join("unnest(?)" for _ in rows[0])
    for i in range(0, len(rows), chunk):
        columns = [list(c) for c in zip(*rows[i:i + chunk], strict=True)]
        con.execute(f"{head} SELECT {select} {tail}", columns)


def upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    """``INSERT INTO table (columns) VALUES (?, ...)`` that replaces the row with the same ``key`` columns (the
    table's primary key): ``ON CONFLICT (key) DO UPDATE``, which DuckDB and PostgreSQL both run (DuckDB's
    ``INSERT OR REPLACE`` is its own)."""
    rest = [c for c in columns if c not in key]
    action = f"DO UPDATE SET {', '.join(f'{c}=excluded.{c}' for c in rest)}" if rest else "DO NOTHING"
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT ({', '.join(key)}) {action}")


def records(con: Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts keyed by column name (for the generic row readers: ``runs``, ``access_rows``)."""
    cur = con.execute(sql, list(params))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def matching(con: Connection, table: str, where: Mapping[str, Any], order: str,
             json_columns: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The rows of ``table`` whose columns equal ``where``'s values (the keys are column names, from code, never
    from users), ordered by ``order``, with the ``json_columns`` held as text decoded."""
    clause = " AND ".join(f"{k}=?" for k in where) or "TRUE"
    rows = records(con, f"SELECT * FROM {table} WHERE {clause} ORDER BY {order}", list(where.values()))
    for r in rows:
        for k in json_columns:
            if isinstance(r.get(k), str):
                r[k] = json.loads(r[k])
    return rows


class Database:
    """One evalgate database: a DuckDB file (opened per transaction under its file lock), or ``":memory:"``.

    Args:
        path: the database file, or ``":memory:"``; a file's directory is created.
        migrations: the ``(version, name, function)`` migrations to apply (default all of
            ``evalgate.store.migrations.MIGRATIONS``; the migration tests give a prefix to build an old store).
        connection: for ``":memory:"`` only, the connection to hold instead of a new database's (``copy`` gives
            one whose current database is the copy); the migrations it has not seen are applied to it.
        env: the ``Environment`` whose clock stamps the migrations it applies and whose private key migration 9
            needs (default: the system clock; the process's key, ``Environment.from_env``).

    Raises:
        BadInput: the file or its lock cannot be created or opened (the message names ``EVALGATE_HOME``).
        ValueError: a ``connection`` with a file's path.
    """

    def __init__(self, path: str | Path, migrations: Sequence[tuple[int, str, Callable[[Connection], None]]]
                 | None = None, connection: DuckCon | None = None, env: Environment | None = None) -> None:
        self.memory = str(path) == MEMORY
        self.env = env
        self.clock = env.clock if env is not None else utc_now
        self.path = Path(path)
        self.location = MEMORY if self.memory else str(self.path.resolve())
        """Where the database is, for messages: the file (absolute), ``:memory:``, or a server's URL without its
        password (``evalgate.store.pg.server_name``)."""
        self._migrations = list(MIGRATIONS if migrations is None else migrations)
        self._session: DuckCon | None = None
        self._session_thread: int | None = None
        self._depth = 0  # transactions open on the session connection (nested ones join the outer one)
        self._attached: tuple[str, str] | None = None  # a copy's (source database, its own name): detached on close
        if connection is not None and not self.memory:
            raise ValueError(f"Database({str(path)!r}): a connection is given only to a memory database")
        if self.memory:
            self._lock: AbstractContextManager[Any] = threading.RLock()
            self._session, self._session_thread = self._open_migrated(connection), None
            return
        self._lock = FileLock(str(self.path) + ".lock")
        self.lock_timeout = lock_timeout(env if env is not None else Environment.from_env())
        """Seconds a transaction waits for the file's lock (``EVALGATE_LOCK_TIMEOUT``; None: no limit)."""
        if (known := self._identity()) is not None and known in _OPENED:
            return  # opened and migrated by this process: the next transaction opens it (and checks again)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.transaction():
                pass
            if (opened := self._identity()) is not None:
                _OPENED.add(opened)
        except OSError as e:  # the lock file cannot be created: a read-only or unwritable directory
            raise self._unusable(e) from e

    def _unusable(self, e: OSError) -> BadInput:
        """The error for a store whose directory or lock file cannot be written."""
        return BadInput(f"cannot use the store {self.path}: {e}. evalgate writes there on every command (the "
                        "access log and its lock); set EVALGATE_HOME to a writable directory")

    @contextmanager
    def _file_lock(self) -> Iterator[None]:
        """The file's lock held for the block, waited for at most ``lock_timeout`` seconds; a lock file that
        cannot be opened (made unwritable, or replaced by a directory, after this database was constructed) is
        ``BadInput`` (exit 2), as at construction.

        Raises:
            StoreLocked: another process held the lock for longer (the message names it, from /proc/locks).
            BadInput: the lock file cannot be opened or created.
        """
        lock = self._lock
        assert isinstance(lock, FileLock)  # a file's (a memory database's is a thread lock)
        try:
            lock.acquire(timeout=-1 if self.lock_timeout is None else self.lock_timeout)
        except Timeout:
            raise locked(self.location, self.lock_timeout or 0, file_lock_holders(Path(lock.lock_file)),
                         f"its lock file {lock.lock_file}",
                         "If it is another evalgate command, let it finish and run this one again (or give it "
                         "longer: EVALGATE_LOCK_TIMEOUT=seconds, 0 for no limit); otherwise stop that process "
                         "(docs/STORE.md, 'The store's lock')") from None
        except OSError as e:
            raise self._unusable(e) from e
        try:
            yield
        finally:
            lock.release()

    def __repr__(self) -> str:
        return f"Database({str(self.path)!r})"

    def _identity(self) -> tuple[str, int, int, int] | None:
        """The file's absolute path, device and inode, and how many migrations this database applies; None when it
        does not exist."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return os.path.abspath(self.path), st.st_dev, st.st_ino, len(self._migrations)

    def _in_session(self) -> bool:
        """Whether this thread's transactions use the session connection (always, for a memory database)."""
        return self._session is not None and (self.memory or self._session_thread == threading.get_ident())

    @contextmanager
    def session(self) -> Iterator[None]:
        """Within the block, transactions share one connection opened (under the lock) at its start; each is still
        its own transaction, committed when it ends, so an exception loses nothing an earlier one wrote.

        Opening and closing a file costs 4-12 ms per transaction here (the close checkpoints the write-ahead
        log), which is most of a fully cached run's store time. The lock is held for the whole block: use it around
        short, store-only work, never around generation. Nested sessions reuse the outer one. Only the thread that
        opened the session uses its connection (DuckDB connections are not for concurrent use); other threads
        wait for the lock as usual. A memory database is always in session (its lock is taken per block).

        Raises:
            EvalgateError: the database cannot be opened.
        """
        if self.memory:
            with self._lock:
                yield
            return
        if self._in_session():
            yield
            return
        with self._file_lock():
            con = self._open_migrated()
            try:
                self._session, self._session_thread = con, threading.get_ident()
                yield
            finally:
                self._session, self._session_thread = None, None
                self._close(con)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A locked connection inside one transaction: committed on success, rolled back on error. A transaction
        opened inside another one on the session connection joins it (commits with it)."""
        if self._in_session():
            with self._lock if self.memory else nullcontext():
                assert self._session is not None
                if self._depth:
                    yield self._session
                    return
                self._depth += 1
                try:
                    with self._transaction(self._session) as con:
                        yield con
                finally:
                    self._depth -= 1
            return
        with self._file_lock():
            con = self._open_migrated()
            try:
                with self._transaction(con):
                    yield con
            finally:
                self._close(con)

    def close(self) -> None:
        """Close a memory database's connection (its contents are lost; a copy is detached from its source's
        DuckDB instance); nothing for a file."""
        if self.memory and self._session is not None:
            if self._attached is not None:
                source, name = self._attached
                self._session.execute(f'USE "{source}"')
                self._session.execute(f"DETACH {name}")
            self._session.close()
            self._session = None

    def copy(self) -> Database:
        """A new memory database holding this memory database's tables and rows (its record of migrations
        included), in the same DuckDB instance: ``ATTACH ':memory:'`` then ``COPY FROM DATABASE``, about 10 ms where
        a new one costs a DuckDB instance and every migration (60-100 ms). The copy has its own connection (a
        cursor of this one's instance) and lock; nothing written to one reaches the other. ``close()`` detaches it
        (its memory is freed then, or when this database closes).

        Raises:
            ValueError: this database is a file, or closed.
        """
        if not self.memory or self._session is None:
            raise ValueError(f"copy() copies an open memory database, not {self!r}")
        name = f"evalgate_copy_{next(_COPIES)}"
        with self._lock:
            source = self._session.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
            self._session.execute(f"ATTACH ':memory:' AS {name}")
            self._session.execute(f'COPY FROM DATABASE "{source}" TO {name}')
            con = self._session.cursor()
        con.execute(f"USE {name}")
        copy = Database(MEMORY, self._migrations, connection=con, env=self.env)
        copy._attached = (source, name)
        return copy

    def _open(self) -> DuckCon:
        """A connection to the database (the caller holds ``<db>.lock``). A file that another process holds open
        (DuckDB's own lock, taken by any process that opens the file, a read-only notebook or the ``duckdb`` shell
        included) is waited for as the store's lock is, at most ``lock_timeout`` seconds.

        Raises:
            StoreLocked: another process kept the file open for longer (the message names it).
            BadInput: the file cannot be opened (not a DuckDB file, damaged, unreadable).
        """
        if self.memory:
            return duckdb.connect(MEMORY)
        deadline = None if self.lock_timeout is None else time.monotonic() + self.lock_timeout
        pause = 0.02
        while True:
            try:
                return instance.attach(self.path)
            except duckdb.IOException as e:
                if _HELD_OPEN not in str(e):
                    raise self._unopenable(e) from e
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise self._held_open(e) from None
                time.sleep(pause if left is None else min(pause, left))
                pause = min(pause * 2, 0.5)
            except duckdb.Error as e:
                raise self._unopenable(e) from e

    def _unopenable(self, e: duckdb.Error) -> BadInput:
        """The error for a file DuckDB cannot open for another reason than another process holding it."""
        return BadInput(f"cannot open the store {self.path}: {type(e).__name__}: {e}. If the file is damaged, "
                        "restore it from a backup (the access log and the generation cache live in it), or set "
                        "EVALGATE_HOME to another directory to start a new store there")

    def _held_open(self, e: duckdb.Error) -> StoreLocked:
        """The error for a file another process kept open for ``lock_timeout`` seconds: its holders from
        /proc/locks (DuckDB's lock is a POSIX one), else the pid DuckDB's message names."""
        holders = file_lock_holders(self.path, kinds=("POSIX",))
        if not holders and (pid := re.search(r"\(PID (\d+)\)", str(e))):
            holders = [{"pid": int(pid.group(1))}]
        return locked(self.location, self.lock_timeout or 0, holders,
                      "the database file itself, which another process has open (DuckDB lets no process write a "
                      "file that another has open, even read-only)",
                      "Close the file in that process (a notebook's duckdb.connect(...).close(), or quit the duckdb "
                      "shell); to read the store while evalgate works, use evalgate's commands (evalgate audit, "
                      "evalgate runs) or a copy of the file. The file is not damaged: keep this store "
                      "(docs/STORE.md, 'The store's lock')")

    @contextmanager
    def _transaction(self, con: DuckCon) -> Iterator[DuckCon]:
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException as e:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # a damaged file can fail the rollback too; the error below says what happened
            if isinstance(e, duckdb.IOException):  # the file cannot be read: damaged or truncated
                raise BadInput(f"the store {self.path} cannot be read ({e}); it is damaged or truncated. Restore it "
                               "from a backup (the access log and the generation cache live in it), or set "
                               "EVALGATE_HOME to another directory to start a new store there") from e
            raise

    def _open_migrated(self, con: DuckCon | None = None) -> DuckCon:
        """Open the database (the lock held), or take ``con`` (a memory database's given connection), and apply
        the migrations it has not seen; rewrite a file when a migration asked to (``COMPACT_TABLE``; a memory
        database has no free blocks to leave text in).

        Raises:
            EvalgateError: the file cannot be opened, or a migration refused (nothing of it applied).
        """
        if con is None and not self.memory and not self.path.exists():
            self._create()
        if con is None and not self.memory and _MIGRATED.get(self.location) == self._state():
            return self._open()  # as this process left it, fully migrated: nothing to check
        con = con if con is not None else self._open()
        try:
            compact = self._migrate(con)
        except BaseException:
            instance.detach(con)
            raise
        if compact and self.memory:
            con.execute(f"DROP TABLE {COMPACT_TABLE}")
        elif compact:
            self._compact(con)
            con = self._open()
        return con

    def _state(self) -> tuple[object, ...] | None:
        """What ``_MIGRATED`` remembers of the file: device, inode, size, mtime and ctime (in ns) of the file and of
        its write-ahead log (None where there is none), and the migrations this database applies; None when the
        file cannot be read."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        try:
            wal = os.stat(str(self.path) + ".wal")
            log: tuple[int, ...] | None = (wal.st_ino, wal.st_size, wal.st_mtime_ns, wal.st_ctime_ns)
        except OSError:
            log = None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, log,
                tuple(version for version, _, _ in self._migrations))

    def _close(self, con: DuckCon) -> None:
        """Detach the file (its lock still held) and remember the state it is left in: it was opened migrated, so
        the next opening that finds the same state need not check (``_MIGRATED``)."""
        instance.detach(con)
        if (state := self._state()) is not None:
            _MIGRATED[self.location] = state
        else:
            _MIGRATED.pop(self.location, None)

    def _create(self) -> None:
        """Create the missing file (the lock held) as a copy of a memory database this process migrated once
        (``instance.template``, keyed by this database's migrations): ``COPY FROM DATABASE`` of every table, its
        columns, defaults, constraints and its ``schema_migrations`` rows (stamped now): constructing a store on a
        new file took 57 ms applying every migration to it, 22 ms copying (bench/store_open.py). A copy that fails
        leaves no file.

        Raises:
            EvalgateError: a migration refused while building the template; duckdb.Error: the copy failed.
        """
        key = ("evalgate migrations", tuple((version, name) for version, name, _ in self._migrations))

        def build(con: DuckCon) -> None:  # a memory Database on the connection applies the migrations to it
            Database(MEMORY, self._migrations, connection=con)

        template = instance.template(key, build)  # which closes the connection after build
        con = self._open()
        try:
            name = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
            con.execute(f'COPY FROM DATABASE "{template}" TO "{name}"')
            con.execute("UPDATE schema_migrations SET applied_at = ?", [self.clock()])
        except BaseException:
            instance.detach(con)
            for leftover in (self.path, Path(str(self.path) + ".wal")):
                leftover.unlink(missing_ok=True)
            raise
        instance.detach(con)

    def _compact(self, con: DuckCon) -> None:
        """Copy the database into a new file that replaces it, then close ``con``. DuckDB keeps the bytes of values
        it replaced in the file's free blocks; a copy holds only the live values (migration 9 relies on it to
        leave no plain text of what it encrypted)."""
        fresh = self.path.with_name(self.path.name + ".compact")
        fresh.unlink(missing_ok=True)
        name = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        target = f"evalgate_compact_{next(_COPIES)}"
        con.execute(f"ATTACH {instance.sql_text(str(fresh))} AS {target}")
        con.execute(f'COPY FROM DATABASE "{name}" TO {target}')
        con.execute(f"DETACH {target}")
        instance.detach(con)
        os.replace(fresh, self.path)

    def _migrate(self, con: DuckCon) -> bool:
        """Apply the migrations the database has not seen, each in its own transaction.

        Returns:
            Whether a migration asked for the file to be rewritten (it created the temporary ``COMPACT_TABLE``).
        """
        try:  # the usual case, one SELECT: every migration applied (bench/frames.py: ~6 ms a call saved)
            seen = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
            if seen.issuperset(version for version, _, _ in self._migrations):
                return False  # no migration ran on this connection, so none created COMPACT_TABLE
        except duckdb.CatalogException:
            pass  # a new database
        con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMPTZ)")
        done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
        for version, name, fn in self._migrations:
            if version not in done:
                con.execute("BEGIN TRANSACTION")
                apply(fn, con, self.env)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, name, self.clock()])
                con.execute("COMMIT")
        return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name=?",
                                [COMPACT_TABLE]).fetchone()[0])  # type: ignore[index]


MEMORY_NAME = "memory:"
"""The prefix of a memory database's name in this process (``memory_url``)."""
_NAMED: weakref.WeakValueDictionary[str, Database] = weakref.WeakValueDictionary()


def memory_url(db: Database) -> str:
    """A name, ``memory:N``, that ``open_database`` (so ``EVALGATE_STORE`` and ``Environment.store``) resolves to
    the memory database ``db`` itself, while ``db`` lives: several stores of one process on one memory database (the
    tests' ``memory_store``, a deprecated ``Workspace.activate``). Another process cannot reach it
    (``Environment.variables`` leaves it out).

    Raises:
        ValueError: ``db`` is not a memory database.
    """
    if not db.memory:
        raise ValueError(f"{db!r} is not a memory database; a file or a server is named by its path or URL")
    name = f"{MEMORY_NAME}{id(db)}"
    _NAMED[name] = db
    return name


def open_database(target: str | Path, migrations: Sequence[tuple[int, str, Callable[[Connection], None]]]
                  | None = None, env: Environment | None = None) -> Database:
    """The database ``target`` names: a PostgreSQL server's URL (``postgresql://...``: ``evalgate.store.pg``,
    which needs the ``postgres`` extra), a memory database's name (``memory_url``), else a DuckDB file's path or
    ``":memory:"``; ``migrations`` and ``env`` as ``Database``'s.

    Raises:
        BadInput: the file or the server cannot be used (``Database``, ``PostgresDatabase``), or no memory database
            of this process has the name; MissingExtra: psycopg is not installed.
        ValueError: ``migrations`` differ from those of the memory database named (it was migrated when made).
    """
    if str(target).startswith(MEMORY_NAME):
        if (named := _NAMED.get(str(target))) is None:
            raise BadInput(f"no memory database named {target} in this process (a memory store lives in the process "
                           "that made it); unset EVALGATE_STORE, or give a PostgreSQL URL to share a store")
        if migrations is not None and [m[:2] for m in migrations] != [m[:2] for m in named._migrations]:
            raise ValueError(f"{target} was migrated when it was made; it cannot be opened with other migrations")
        return named
    if is_server_url(target):
        postgres: Callable[..., Database] = load_reference("evalgate.store.pg:PostgresDatabase")
        return postgres(str(target), migrations, env)
    return Database(target, migrations, env=env)


def location_of(target: str | Path) -> str:
    """The ``Database.location`` that ``open_database(target)`` would have, without opening anything: a server's
    URL without its password (``evalgate.store.pg.server_name``), else the file's absolute path or ``":memory:"``."""
    if is_server_url(target):
        server_name: Callable[[str], str] = load_reference("evalgate.store.pg:server_name")
        return server_name(str(target))
    return MEMORY if str(target) == MEMORY or str(target).startswith(MEMORY_NAME) else str(Path(target).resolve())


def default_database(env: Environment) -> Database:
    """The database of ``env``: its ``database`` (e.g. a ``Database(":memory:")``), else its store URL
    (``Environment.store``, ``EVALGATE_STORE``: a PostgreSQL server), else the file ``env.home/evalgate.duckdb``.

    Raises:
        BadInput: the store URL is not a PostgreSQL URL (``postgressql://...``, a file path), before anything is
            opened or written (such a value was taken as a DuckDB path: folders named after the URL appeared).
    """
    if isinstance(env.database, Database):
        return env.database
    if env.store and not is_server_url(env.store) and not env.store.startswith(MEMORY_NAME):
        shown = env.store.split("://", 1)[0] + "://..." if "://" in env.store else env.store  # never a password
        raise BadInput(f"EVALGATE_STORE={shown!r} is not a PostgreSQL URL: it must start with postgresql:// or "
                       "postgres:// (postgresql://user@host:port/dbname, docs/STORE.md); fix it, or unset "
                       f"EVALGATE_STORE to use the store file {env.home / 'evalgate.duckdb'}")
    return open_database(env.store, env=env) if env.store else Database(env.home / "evalgate.duckdb", env=env)


class Repository:
    """A group of tables' reads and writes over one ``Database`` (``evalgate.store.runs``, ``cache``, ``access``,
    ``ratings``, ``gates``); ``Store`` is all of them over one database.

    Args:
        db: the database, or its path (``":memory:"`` for one in memory) or a PostgreSQL server's URL
            (``open_database``); default ``env``'s (``default_database``).
        clock: returns the current UTC time; stamps every row's time and anchors budget windows (tests inject one);
            default ``env``'s.
        env: the ``Environment`` the store belongs to (its key, splits directory, actor, access-log key): what
            the layers that hold this store read their settings from (default the process's,
            ``Environment.from_env()``: ``Store()`` is the store of the ``EVALGATE_*`` variables).

    Attributes:
        env: that environment, with ``clock`` as its clock.
        clock: the time source (``env.clock``).
    """

    def __init__(self, db: Database | str | Path | None = None, clock: Callable[[], datetime] | None = None, *,
                 env: Environment | None = None) -> None:
        env = env if env is not None else Environment.from_env()
        self.env = env.replace(clock=clock) if clock is not None else env
        self.clock = self.env.clock
        self.db = db if isinstance(db, Database) else open_database(db) if db is not None else \
            default_database(self.env)

    @property
    def path(self) -> Path:
        """The database file (``:memory:`` for one in memory)."""
        return self.db.path

    @property
    def location(self) -> str:
        """Where the database is, for messages (``Database.location``: never a password)."""
        return self.db.location

    def session(self) -> AbstractContextManager[None]:
        """``Database.session``: the calls in the block share one connection."""
        return self.db.session()

    def connect(self) -> AbstractContextManager[Connection]:
        """``Database.transaction``: a locked connection inside one transaction."""
        return self.db.transaction()


def check_read_only(sql: str) -> None:
    """Accept one statement that only reads (DuckDB's own parser says ``SELECT``: also ``WITH``, ``FROM t``,
    ``VALUES``, ``DESCRIBE``, ``SUMMARIZE``).

    Raises:
        BadInput: SQL that does not parse, several statements, or one that writes or changes the database
            (``UPDATE access_log ...``, ``DELETE``, ``INSERT``, ``COPY``, ``ATTACH``, ``PRAGMA``, ``SET``): a frame
            is a read, and the store is written only by evalgate's commands, under its lock and the access log's
            chain.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise BadInput(f"query_frame: the SQL does not parse: {e}") from e
    kinds = [st.type.name for st in statements]
    if kinds != ["SELECT"]:
        got = ", ".join(kinds) or "empty"
        raise BadInput(f"query_frame reads the store with one SELECT statement; this SQL is {got}: the store is "
                       "written only through evalgate's commands (under its lock, the access log hash-chained); "
                       "query what you need with SELECT")
