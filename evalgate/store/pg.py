"""``PostgresDatabase``: the store on a PostgreSQL server (``EVALGATE_STORE=postgresql://...``), through psycopg 3.

The repositories run the same SQL on it as on a DuckDB file: ``PgConnection`` translates DuckDB's ``?`` parameters
and column types (``translate``), binds values on the client (``psycopg.ClientCursor``, so ``? IS NULL`` and
``unnest(?::VARCHAR[])`` need no declared types), and reads values back as DuckDB gives them (JSON as text, a
``NUMERIC(20)`` seed as ``int``, timestamps in UTC).

One lock orders every transaction of every client, as ``<db>.lock`` orders a file's: a PostgreSQL advisory lock
(``LOCK_KEY``), taken per transaction (``pg_advisory_xact_lock``) or for a ``session()``
(``pg_advisory_lock``). The server releases it when the transaction ends or the client's connection drops (a
killed client), so a budget counted and spent in one transaction is exact across machines (docs/AUDIT.md). Any
role may take an advisory lock, so every lock wait of a connection is bounded (``lock_timeout``, from
``EVALGATE_LOCK_TIMEOUT``): a client that waits longer stops with ``StoreLocked`` naming the holder (``pg_locks``
joined with ``pg_stat_activity``).
Each process and thread keeps one connection per server URL; the migrations run once per process, under the lock.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalgate.core.environment import Environment, or_from_env, utc_now
from evalgate.core.errors import BadInput, MissingExtra, RefusedByPolicy, StoreLocked
from evalgate.core.version import install_hint
from evalgate.store.db import Database
from evalgate.store.dialect import POSTGRESQL
from evalgate.store.migrations import COMPACT_TABLE, MIGRATIONS, apply
from evalgate.store.waiting import lock_timeout, locked

try:
    import psycopg
    from psycopg.adapt import Loader
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.types.string import TextLoader
except ImportError as e:  # pragma: no cover - the extra is installed wherever the tests run
    raise MissingExtra("a PostgreSQL store (EVALGATE_STORE=postgresql://...) needs psycopg 3: "
                       f"{install_hint('postgres')}") from e

_INSERT_HEAD = re.compile(r"\s*INSERT\s+INTO\s+(\w+)\s*(?:\(([^()]*)\))?\s*", re.IGNORECASE)
"""``INSERT INTO table [(columns)]``: the ``head`` of ``store.db.insert_values``."""

LOCK_KEY = int.from_bytes(b"evalgate", "big")
"""The advisory lock every evalgate transaction on a server takes (one 64-bit key: the bytes of ``evalgate``)."""

_HOLDERS = """
    SELECT l.pid, a.usename, a.application_name, a.client_addr::text, a.backend_start, a.xact_start, a.state,
           a.state_change, l.locktype, COALESCE(c.relname, '') AS relname
    FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    LEFT JOIN pg_class c ON l.locktype = 'relation' AND c.oid = l.relation
    WHERE l.granted AND l.pid <> pg_backend_pid()
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND ((l.locktype = 'advisory' AND l.classid = (? >> 32)::oid AND l.objid = (? & 4294967295)::oid
            AND l.objsubid = 1)
           OR (l.locktype = 'relation' AND c.relnamespace = current_schema()::regnamespace))
    ORDER BY l.locktype = 'advisory' DESC, l.pid"""
"""Who holds the store's advisory lock (``LOCK_KEY``) or a lock on one of its tables (a migration's ``ALTER`` waits for
a reader's open transaction);
``pg_stat_activity`` shows another role's session start and state only to members of ``pg_read_all_stats``."""

ANALYZE_BASE, ANALYZE_SCALE = 50, 0.1
"""A bulk write analyses its table once more than ``ANALYZE_BASE + ANALYZE_SCALE`` x its counted rows changed since
the last analysis (``PgConnection._analyze_grown``): autovacuum's own default threshold, applied at once."""

_CONNECTIONS: dict[tuple[str, int, int], PgConnection] = {}  # (url, pid, thread) -> its open connection
_MIGRATED: set[tuple[str, int, tuple[int, ...]]] = set()  # (url, pid, migration numbers) checked by this process
_GUARD = threading.Lock()


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """DuckDB's SQL as PostgreSQL's: ``?`` outside quotes becomes psycopg's ``%s`` and a literal ``%`` becomes
    ``%%``; in ``CREATE`` and ``ALTER`` statements ``UBIGINT`` becomes ``NUMERIC(20)`` (PostgreSQL has no unsigned
    integers; a sampling seed may be up to 2**64 - 1) and ``DOUBLE`` becomes ``DOUBLE PRECISION``."""
    out, quote = [], ""
    for ch in sql:
        if ch == "%":
            out.append("%%")
        elif quote:
            out.append(ch)
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            out.append(ch)
            quote = ch
        else:
            out.append("%s" if ch == "?" else ch)
    text = "".join(out)
    if re.match(r"\s*(CREATE|ALTER)\b", text, re.IGNORECASE):
        text = re.sub(r"\bUBIGINT\b", "NUMERIC(20)", text)
        text = re.sub(r"\bDOUBLE\b(?!\s+PRECISION)", "DOUBLE PRECISION", text)
    return text


class _IntegralNumericLoader(Loader):
    """``NUMERIC`` as ``int`` where it has no fraction (the ``NUMERIC(20)`` seeds), else ``Decimal``."""

    def load(self, data: Any) -> int | Decimal:
        text = bytes(data).decode()
        return int(text) if text.lstrip("-").isdigit() else Decimal(text)


class PgConnection:
    """One psycopg connection (autocommit: transactions are the ``BEGIN``/``COMMIT`` the database sends) running
    DuckDB's SQL (``translate``)."""

    dialect = POSTGRESQL

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw
        self.lock_timeout = ""  # the server's lock_timeout set on this connection ("": its default, not set)
        raw.adapters.register_loader("json", TextLoader)
        raw.adapters.register_loader("jsonb", TextLoader)
        raw.adapters.register_loader("numeric", _IntegralNumericLoader)

    def execute(self, query: str, parameters: Sequence[Any] = (), /) -> psycopg.ClientCursor[Any]:
        """Run ``query`` (DuckDB's SQL) with ``parameters``; the cursor holds its rows."""
        cur = psycopg.ClientCursor(self.raw)
        cur.execute(translate(query), list(parameters))
        return cur

    def executemany(self, query: str, parameters: Sequence[Sequence[Any]] = (), /) -> psycopg.ClientCursor[Any]:
        """Run ``query`` once per row of ``parameters``."""
        cur = psycopg.ClientCursor(self.raw)
        cur.executemany(translate(query), [list(p) for p in parameters])
        return cur

    def copy_rows(self, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
        """``{head} VALUES <rows> {tail}`` through ``COPY ... FROM STDIN`` (``store.db.insert_values`` on a server):
        straight into the table, or, when ``tail`` is given (``ON CONFLICT DO NOTHING``), into a temporary table
        of the same columns, then ``INSERT ... SELECT ... {tail}`` in the rows' order.

        Raises:
            ValueError: ``head`` is not ``INSERT INTO table`` or ``INSERT INTO table (columns)``.
        """
        m = _INSERT_HEAD.fullmatch(head)
        if m is None:
            raise ValueError(f"copy_rows takes 'INSERT INTO table [(columns)]', not {head!r}")
        table, columns = m.group(1), m.group(2)
        target = f"{table} ({columns})" if columns else table
        if not tail.strip():
            self._copy(f"COPY {target} FROM STDIN", rows)
        else:
            names = columns or ", ".join(self._columns(table))
            self.raw.execute("DROP TABLE IF EXISTS evalgate_copy_rows")
            self.raw.execute(f"CREATE TEMP TABLE evalgate_copy_rows AS SELECT {names} FROM {table} LIMIT 0")
            self.raw.execute("ALTER TABLE evalgate_copy_rows ADD COLUMN evalgate_row BIGSERIAL")
            self._copy(f"COPY evalgate_copy_rows ({names}) FROM STDIN", rows)
            self.raw.execute(f"INSERT INTO {target} SELECT {names} FROM evalgate_copy_rows ORDER BY evalgate_row "
                             f"{tail}")
            self.raw.execute("DROP TABLE evalgate_copy_rows")
        self._analyze_grown(table, len(rows))

    def _analyze_grown(self, table: str, added: int) -> None:
        """``ANALYZE table`` now where autovacuum would on its next round (more rows changed since the last
        analysis, these ``added`` included, than ``ANALYZE_BASE + ANALYZE_SCALE`` x the rows it counted, or never
        analysed), if this role owns the table (another role's ANALYZE is skipped by the server with a warning).

        Autovacuum looks once a minute; until then the planner has no statistics of a freshly filled table, and
        the join of a run's samples with its generations became a nested loop over every generation per sample
        (``bench/store_gate_1m.py --analyze on off``: a gate's three reads of 5,428-item runs stored just before
        took 56.8 s, 1.67 s with the tables analysed)."""
        row = self.raw.execute(
            "SELECT c.reltuples, COALESCE(s.n_mod_since_analyze, 0), pg_has_role(c.relowner, 'USAGE') "
            "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = to_regclass(%s)",
            [table]).fetchone()
        if row is None or not row[2]:
            return
        counted, changed = max(float(row[0]), 0.0), int(row[1]) + added
        if changed > ANALYZE_BASE + ANALYZE_SCALE * counted:
            self.raw.execute(f"ANALYZE {table}")

    def _copy(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.raw.cursor().copy(sql) as copy:  # type: ignore[arg-type]
            for r in rows:
                copy.write_row(r)

    def _columns(self, table: str) -> list[str]:
        """``table``'s columns in order (the one on the search path)."""
        cur = self.raw.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                               "AND NOT attisdropped ORDER BY attnum", [table])
        return [r[0] for r in cur.fetchall()]

    @property
    def broken(self) -> bool:
        """Whether the connection is closed or was lost."""
        return self.raw.closed or self.raw.broken


def server_name(url: str) -> str:
    """``url`` without its password: ``postgresql://user@host:port/dbname``, with ``?options=...`` where it gives
    some (a schema on the search path: another store on the same database), for messages; libpq's defaults where
    the URL leaves a part out."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(a URL that does not parse)"
    host = str(parts.get("host") or os.environ.get("PGHOST") or "localhost")
    port = str(parts.get("port") or os.environ.get("PGPORT") or "5432")
    user = parts.get("user") or os.environ.get("PGUSER")
    dbname = parts.get("dbname") or os.environ.get("PGDATABASE") or user or ""
    options = f"?options={parts['options']}" if parts.get("options") else ""
    return f"postgresql://{f'{user}@' if user else ''}{host}:{port}/{dbname}{options}"


class PostgresDatabase(Database):
    """One evalgate database on a PostgreSQL server: every repository's tables there, the same migrations.

    Args:
        url: a libpq URL (``postgresql://user@host:port/dbname``; ``?host=/socket/dir`` for a Unix socket). A
            password is better left to libpq's ``PGPASSWORD`` or ``~/.pgpass`` than put in the URL; either way it
            is never printed.
        migrations, env: as ``Database``'s.

    Raises:
        BadInput: the server cannot be reached, or refuses the login, or a migration cannot be applied (the
            message names the server, never the password).
    """

    def __init__(self, url: str, migrations: Sequence[tuple[int, str, Callable[[Any], None]]] | None = None,
                 env: Environment | None = None) -> None:
        self.memory = False
        self.env = env
        self.clock = env.clock if env is not None else utc_now
        self.url = url
        self.location = server_name(url)
        self.path = Path(self.location)
        self._migrations = list(MIGRATIONS if migrations is None else migrations)
        self.lock_timeout = lock_timeout(or_from_env(env))
        """Seconds any statement waits for a lock, the store's above all (``lock_timeout`` of each connection,
        ``EVALGATE_LOCK_TIMEOUT``; None: no limit)."""
        self._session: PgConnection | None = None  # type: ignore[assignment]
        self._session_thread: int | None = None
        self._depth = 0
        self._attached = None
        key = (url, os.getpid(), tuple(v for v, _, _ in self._migrations))
        if key not in _MIGRATED:
            con = self._connection()
            with self._errors(con):
                self._migrate(con)
            _MIGRATED.add(key)

    def __repr__(self) -> str:
        return f"PostgresDatabase({self.location!r})"

    def _unreachable(self, e: Exception) -> BadInput:
        message = str(e).strip().replace(str(conninfo_to_dict(self.url).get("password") or "\0"), "***")
        return BadInput(f"cannot use the store on the PostgreSQL server {self.location}: {message}. Check that the "
                        "server runs and accepts this user (libpq reads the password from PGPASSWORD or ~/.pgpass), "
                        "or set EVALGATE_STORE to another server, or unset it to use the store file in EVALGATE_HOME")

    def _connection(self) -> PgConnection:
        """This process's and thread's open connection to the server, made (UTC, autocommit) where there is none or
        the last one was lost.

        Raises:
            BadInput: the server cannot be reached or refuses the login.
        """
        key = (self.url, os.getpid(), threading.get_ident())
        with _GUARD:
            con = _CONNECTIONS.get(key)
        if con is not None and not con.broken:
            return self._bounded(con)
        try:
            raw = psycopg.connect(self.url, autocommit=True, application_name="evalgate")
            raw.execute("SET TimeZone='UTC'")
        except psycopg.Error as e:
            raise self._unreachable(e) from None
        con = PgConnection(raw)
        with _GUARD:
            _CONNECTIONS[key] = con
        return self._bounded(con)

    def _bounded(self, con: PgConnection) -> PgConnection:
        """``con`` with this store's ``lock_timeout`` as its own (a connection is shared by the stores of one URL
        in a thread; each sets its limit before use where it differs)."""
        # whole milliseconds, at least 1: PostgreSQL reads 0 as no limit, which a wait of 0.0004 s rounded to
        ms = f"{max(1, math.ceil(self.lock_timeout * 1000)) if self.lock_timeout else 0}ms"
        if con.lock_timeout != ms:
            try:
                con.raw.execute("SELECT set_config('lock_timeout', %s, false)", [ms])
            except psycopg.OperationalError:
                if not con.broken:
                    raise
                return con  # lost: the caller's first statement finds it and connects again
            con.lock_timeout = ms
        return con

    @contextmanager
    def _errors(self, con: PgConnection) -> Iterator[None]:
        """A lost connection or an unreachable server as ``BadInput`` naming the server (exit 2); a statement the
        server refused this role (its privileges, or a trigger of migration 47) as ``RefusedByPolicy`` (exit 2)."""
        try:
            yield
        except psycopg.errors.LockNotAvailable as e:
            raise self._locked(con, e) from None
        except psycopg.errors.InsufficientPrivilege as e:
            user = conninfo_to_dict(self.url).get("user") or os.environ.get("PGUSER") or "this login"
            raise RefusedByPolicy(f"the PostgreSQL server {self.location} refused role {user}: {str(e).strip()}. "
                                  "Nothing of that transaction was written; docs/SECURITY.md says what each "
                                  "evalgate role may do ('evalgate store grant-roles' grants them)") from None
        except psycopg.OperationalError as e:
            if con.broken:
                raise self._unreachable(e) from None
            raise

    def _locked(self, con: PgConnection, e: Exception) -> StoreLocked:
        """The error for a statement that waited ``lock_timeout`` for a lock: who holds the store's lock or one of
        its tables, read on ``con`` (after the failed transaction was rolled back)."""
        holders: list[dict[str, Any]] = []
        if not con.broken:
            try:
                if con.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    con.execute("ROLLBACK")
                rows = con.execute(_HOLDERS, [LOCK_KEY, LOCK_KEY]).fetchall()
            except psycopg.Error:
                rows = []
            for pid, role, app, client, started, xact, state, changed, kind, table in rows:
                h: dict[str, Any] = {"pid": pid, "role": role, "program": app or None,
                                     "client": client or ("local socket" if role else None),
                                     "lock": "evalgate's advisory lock" if kind == "advisory" else f"table {table}"}
                if started is None:
                    h["since_hidden"] = True
                elif xact is not None:
                    h.update(since=xact, since_what="in a transaction since")
                else:
                    h.update(since=changed, since_what=f"{state or 'idle'} since", connected=started)
                if not any(o["pid"] == pid for o in holders):
                    holders.append(h)
        what = "evalgate's lock on the server" if not holders or holders[0]["lock"].startswith("evalgate") \
            else f"a lock on {holders[0]['lock']}"
        pids = ", ".join(str(h["pid"]) for h in holders) or "PID"
        return locked(self.location, self.lock_timeout or 0, holders, what,
                      "If it is an evalgate command (program 'evalgate'), let it finish and run this one again (or "
                      "give it longer: EVALGATE_LOCK_TIMEOUT=seconds, 0 for no limit); otherwise its owner or the "
                      f"server's administrator ends it (SELECT pg_terminate_backend({pids})); docs/STORE.md, "
                      "'The store's lock'")

    def _migrate(self, con: PgConnection) -> bool:  # type: ignore[override]
        """Apply the migrations the server's database has not seen, each in its own transaction, under the lock;
        a migration that replaced values (``COMPACT_TABLE``) is followed by ``VACUUM FULL``, so the old row
        versions holding them are gone.

        Returns:
            False (the compaction is done here).
        """
        con.execute("SELECT pg_advisory_lock(?)", [LOCK_KEY])
        try:
            compact = False
            for version, name, fn in self._pending(con):
                try:
                    with self._transaction(con):
                        apply(fn, con, self.env)
                        con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, name, self.clock()])
                        asked = con.execute("SELECT to_regclass(?)", [f"pg_temp.{COMPACT_TABLE}"]
                                            ).fetchone() != (None,)
                        if asked:  # this migration's request: later ones see no table
                            con.execute(f"DROP TABLE pg_temp.{COMPACT_TABLE}")
                        compact = compact or asked
                except psycopg.errors.InsufficientPrivilege as e:
                    raise self._not_owner(version, name, e) from None
            if compact:
                con.execute("VACUUM FULL")
        finally:
            if not con.broken:
                con.execute("SELECT pg_advisory_unlock(?)", [LOCK_KEY])
        return False

    def _pending(self, con: PgConnection) -> list[tuple[int, str, Callable[[Any], None]]]:
        """The migrations the server's database has not seen (``schema_migrations`` made where missing). Reading
        it needs only SELECT, so an evaluator's or auditor's role opens an up-to-date store."""
        if con.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
            try:
                con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR, "
                            "applied_at TIMESTAMPTZ)")
            except psycopg.errors.InsufficientPrivilege as e:
                raise self._not_owner(0, "schema_migrations", e) from None
        done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
        return [m for m in self._migrations if m[0] not in done]

    def _not_owner(self, version: int, name: str, e: Exception) -> BadInput:
        return BadInput(f"the store on {self.location} needs migration {version} ({name}), which this role may not "
                        f"apply ({str(e).strip()}). Its administrator applies migrations by opening the store once "
                        "as the tables' owner (e.g. 'evalgate audit' with that role's EVALGATE_STORE), then runs "
                        "'evalgate store grant-roles' again (docs/STORE.md)")

    @contextmanager
    def _transaction(self, con: Any) -> Iterator[Any]:
        con.execute("BEGIN")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            if not con.broken:
                con.execute("ROLLBACK")
            raise

    @contextmanager
    def session(self) -> Iterator[None]:
        """Within the block, transactions share this thread's connection and the lock is held throughout
        (``pg_advisory_lock``), as a file's session holds its file lock; nested sessions reuse the outer one.

        Raises:
            BadInput: the server cannot be reached, or the connection was lost.
        """
        if self._in_session():
            yield
            return
        con = self._start("SELECT pg_advisory_lock(?)", [LOCK_KEY])
        with self._errors(con):
            try:
                self._session, self._session_thread = con, threading.get_ident()  # type: ignore[assignment]
                yield
            finally:
                self._session, self._session_thread = None, None
                if not con.broken:
                    con.execute("SELECT pg_advisory_unlock(?)", [LOCK_KEY])

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One transaction under the lock (``pg_advisory_xact_lock``, released at its end): committed on success,
        rolled back on error. One opened inside another on the session connection joins it.

        Raises:
            BadInput: the server cannot be reached, or the connection was lost (the transaction is rolled back
                by the server).
        """
        if self._in_session():
            con = self._session
            assert con is not None
            if self._depth:
                yield con
                return
            self._depth += 1
            try:
                with self._errors(con), self._transaction(con):  # type: ignore[arg-type]
                    yield con
            finally:
                self._depth -= 1
            return
        con = self._start("BEGIN")
        with self._errors(con):
            try:
                con.execute("SELECT pg_advisory_xact_lock(?)", [LOCK_KEY])
                yield con
                con.execute("COMMIT")
            except BaseException:
                if not con.broken:
                    con.execute("ROLLBACK")
                raise

    def _start(self, sql: str, params: Sequence[Any] = ()) -> PgConnection:
        """This thread's connection with ``sql`` (the first statement of a transaction or session) run on it. A
        connection the server dropped since its last use (a restart, an idle timeout, an administrator's
        ``pg_terminate_backend``) is replaced once, so a store that comes back is used again without the caller
        seeing it.

        Raises:
            BadInput: the server cannot be reached (now, or again on the new connection).
        """
        con = self._connection()
        try:
            con.execute(sql, params)
            return con
        except psycopg.errors.LockNotAvailable as e:
            raise self._locked(con, e) from None
        except psycopg.OperationalError as e:
            if not con.broken:
                raise
            first = e
        con = self._connection()
        with self._errors(con):
            try:
                con.execute(sql, params)
            except psycopg.OperationalError:
                if con.broken:
                    raise self._unreachable(first) from None
                raise
        return con

    def close(self) -> None:
        """Close this process's connections to the server (the next transaction opens one again)."""
        with _GUARD:
            mine = [k for k in _CONNECTIONS if k[0] == self.url and k[1] == os.getpid()]
            cons = [_CONNECTIONS.pop(k) for k in mine]
        for con in cons:
            con.raw.close()


ROLES = {"auditor": "evalgate_auditor", "evaluator": "evalgate_evaluator", "gate": "evalgate_gate"}
"""The group roles ``grant_roles`` gives a server store's rights to (docs/SECURITY.md says what each may do); a login
role is made a member of one (``GRANT evalgate_evaluator TO alice``)."""

_SIGN_HEAD = "evalgate_sign_head(BIGINT, VARCHAR, VARCHAR, VARCHAR, TIMESTAMPTZ)"


def grant_roles(url: str, members: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Create the group roles ``ROLES`` where missing and grant them their rights on the store at ``url`` (its
    schema's tables, as they are now: run it again after a migration adds a table), and make the login roles in
    ``members`` members of them. Run as the tables' owner with the right to create roles (the administrator who
    applied the migrations); ``evalgate store grant-roles`` calls it. Running it again changes nothing that is
    already so.

    auditor: reads every table, changes nothing. evaluator: reads every table; writes runs, samples, caches,
    ratings, gates and the verified head; appends to the access log (no UPDATE, DELETE or TRUNCATE of it) and moves
    the signed head forward to the log's last row only through ``evalgate_sign_head``. gate: an evaluator that may
    also log release-gate reads: a trigger refuses a ``release-gate`` row (other than a refusal) from any other role
    but the tables' owner (the trigger's function reads the catalog only, ``pg_temp`` last: a session's temporary
    ``access_log`` or ``pg_class`` changes nothing it decides).

    Args:
        url: the store's libpq URL, logging in as the tables' owner (the password from libpq: ``PGPASSWORD``,
            ``~/.pgpass``).
        members: ``{"auditor" | "evaluator" | "gate": [login role, ...]}``: existing login roles to make members.

    Returns:
        ``{"server": the server's name (no password), "schema", "created": group roles made now, "roles": every
        group role's name by kind, "members": {group role: [login roles granted it now or before]}}``.

    Raises:
        BadInput: the server cannot be reached; an unknown kind in ``members``, or a login role the server does not
            have; this role may not create roles or grant on the tables (nothing is changed: one transaction).
    """
    unknown = sorted(set(members or {}) - set(ROLES))
    if unknown:
        raise BadInput(f"no evalgate role kind {', '.join(unknown)}; the kinds are {', '.join(ROLES)}")
    db = PostgresDatabase(url)
    con = db._connection()
    with db._errors(con):
        try:
            with db._transaction(con):
                return _grant(db, con, members or {})
        except psycopg.errors.InsufficientPrivilege as e:
            raise BadInput(f"the role {conninfo_to_dict(url).get('user') or 'of this login'} may not grant "
                           f"evalgate's "
                           f"roles on {db.location} ({str(e).strip()}). Run 'evalgate store grant-roles' with "
                           "EVALGATE_STORE logging in as the owner of the store's tables (who applied its "
                           "migrations), a role that may also create roles (CREATEROLE); nothing was changed") \
                from None


def _grant(db: PostgresDatabase, con: PgConnection, members: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """``grant_roles``'s statements, inside its transaction."""
    auditor, evaluator, gate = ROLES["auditor"], ROLES["evaluator"], ROLES["gate"]
    con.execute("SELECT pg_advisory_xact_lock(?)", [LOCK_KEY])
    created: list[str] = []
    for role in ROLES.values():
        if con.execute("SELECT 1 FROM pg_roles WHERE rolname=?", [role]).fetchone() is None:
            con.execute(f"CREATE ROLE {role} NOLOGIN")
            created.append(role)
    con.execute(f"GRANT {evaluator} TO {gate}")
    schema = str(con.execute("SELECT quote_ident(current_schema())").fetchall()[0][0])
    con.execute(f"GRANT USAGE ON SCHEMA {schema} TO {auditor}, {evaluator}")
    con.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {auditor}, {evaluator}")
    con.execute(f"GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {evaluator}")
    con.execute(f"REVOKE UPDATE, DELETE ON access_log, sealed_key, private_contents, private_fingerprints "
                f"FROM {evaluator}")
    con.execute(f"REVOKE INSERT, UPDATE, DELETE ON access_log_signature, schema_migrations FROM {evaluator}")
    con.execute(f"GRANT EXECUTE ON FUNCTION {_SIGN_HEAD} TO {evaluator}")
    con.execute(f"""
        CREATE OR REPLACE FUNCTION evalgate_gate_rows() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, pg_temp AS $$
        BEGIN
            IF NEW.purpose = 'release-gate' AND NEW.outcome <> 'refused'
               AND NOT pg_has_role(current_user, '{gate}', 'MEMBER')
               AND NOT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID),
                                   'MEMBER') THEN
                RAISE EXCEPTION 'evalgate: role % may not log a release-gate read (only members of {gate})',
                    current_user USING ERRCODE = 'insufficient_privilege';
            END IF;
            RETURN NEW;
        END $$""")
    con.execute("DROP TRIGGER IF EXISTS access_log_gate_rows ON access_log")
    con.execute("CREATE TRIGGER access_log_gate_rows BEFORE INSERT ON access_log FOR EACH ROW "
                "EXECUTE FUNCTION evalgate_gate_rows()")
    granted: dict[str, list[str]] = {}
    for kind, logins in members.items():
        for login in logins:
            if con.execute("SELECT 1 FROM pg_roles WHERE rolname=?", [login]).fetchone() is None:
                raise BadInput(f"{db.location} has no role {login!r} to make a member of {ROLES[kind]}: create it "
                               f"first (CREATE ROLE {login} LOGIN; its password for libpq's PGPASSWORD or "
                               "~/.pgpass), then grant again; nothing was changed")
            quoted = str(con.execute("SELECT quote_ident(?)", [login]).fetchall()[0][0])
            con.execute(f"GRANT {ROLES[kind]} TO {quoted}")
    for role in ROLES.values():
        granted[role] = [str(r[0]) for r in con.execute(
            "SELECT m.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid "
            "JOIN pg_roles m ON m.oid = a.member WHERE g.rolname = ? AND m.rolcanlogin ORDER BY m.rolname",
            [role]).fetchall()]
    return {"server": db.location, "schema": schema, "created": created, "roles": dict(ROLES), "members": granted}
