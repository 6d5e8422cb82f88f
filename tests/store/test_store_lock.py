"""The store's lock cannot be held hostage: whoever holds it (the read-only auditor's role on a server, any process
on a file's ``<db>.lock``), a client waits at most ``EVALGATE_LOCK_TIMEOUT`` seconds and exits 2 naming the holder;
when the holder is killed the lock is released and the same command goes through. Real servers, real files, real
holder processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput, StoreLocked
from evalgate.gate.suite import load_suite
from evalgate.gate.suite_run import run_suite
from evalgate.store import Store
from evalgate.store.waiting import DEFAULT_LOCK_TIMEOUT, file_lock_holders, lock_timeout
from tests.gate.test_suite import GUARD_OK, build, suite_dict, write
from tests.helpers.cli import cli_parts

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server
WAIT = 0.5
"""The lock timeout the tests give (seconds): each test waits it out at least once while the holder holds on, so
any bound shows "it waited, then gave up"; the holder holds for ten minutes, the waiting is not a race."""

PG_HOLDER = """
import sys, time, psycopg
con = psycopg.connect(sys.argv[1], autocommit=True, application_name="psql")
con.execute("SELECT pg_advisory_lock(%s)", [int(sys.argv[2])])
print("held", con.info.backend_pid, flush=True)
time.sleep(600)
"""

FILE_HOLDER = """
import os, sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", os.getpid(), flush=True)
time.sleep(600)
"""


@pytest.fixture
def holder() -> Iterator[Any]:
    """Start a process that takes a lock and keeps it (``start(code, *args)``: the process and the pid that holds
    the lock, its own or its server session's, once it holds it); every one still running is killed at the end."""
    procs: list[subprocess.Popen[str]] = []

    def start(code: str, *args: str) -> tuple[subprocess.Popen[str], int]:
        p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        procs.append(p)
        assert p.stdout is not None
        said, pid = p.stdout.readline().split()
        assert said == "held"
        return p, int(pid)

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def _reads(store: Store) -> tuple[int, int]:
    """The counted reads of the suite's two private splits."""
    return tuple(sum(1 for r in store.access_rows(split) if r.outcome in ("read", "override"))  # type: ignore
                 for split in ("ta-private", "gu-private"))


def _kill(p: subprocess.Popen[str]) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait()


@pytest.mark.integration  # a real server, a holder process, a suite gate waiting out its timeout twice
@pytest.mark.timeout(180)
@pytest.mark.server_only("a server role holding the server's advisory lock")
def test_an_auditor_holding_the_servers_lock_makes_a_gate_exit_2_naming_it_and_killing_it_frees_it(
        tmp_path: Path, home: Path, postgres_server: Any, postgres_url: str, holder: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.store.pg import LOCK_KEY
    from tests.helpers.postgres import SUPERUSER

    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    build(tmp_path / "runs", GUARD_OK)
    path = write(tmp_path / "suite.yaml", suite_dict(tmp_path / "runs"))
    for login in ("gail", "audrey"):
        postgres_server.admin(f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{login}') THEN "
                              f"CREATE ROLE {login} LOGIN; END IF; END $$")
    code, out, err = cli_parts("store", "grant-roles", "--gate", "gail", "--auditor", "audrey")
    assert code == 0, out + err
    auditor, pid = holder(PG_HOLDER, postgres_url.replace(f"{SUPERUSER}@", "audrey@"), str(LOCK_KEY))
    monkeypatch.setenv("EVALGATE_STORE", postgres_url.replace(f"{SUPERUSER}@", "gail@"))  # the release gate's role
    monkeypatch.setenv("EVALGATE_LOCK_TIMEOUT", str(WAIT))
    t0 = time.monotonic()
    with pytest.raises(StoreLocked) as e:
        run_suite(load_suite(path), Store(), evaluate_decision=False)
    assert time.monotonic() - t0 >= WAIT and e.value.exit_code == 2
    message = e.value.message
    assert f"waited {WAIT:g} s for evalgate's lock on the server" in message
    assert f"held by pid {pid} (role audrey, program 'psql'" in message
    assert f"pg_terminate_backend({pid})" in message and "EVALGATE_LOCK_TIMEOUT" in message
    assert [h["pid"] for h in e.value.holders] == [pid]
    code, out, err = cli_parts("audit", "--json")  # a command: exit 2, the same error in its one JSON document
    assert code == 2 and f"held by pid {pid} (role audrey" in json.loads(out)["error"] and "Traceback" not in err
    _kill(auditor)  # the server ends its session: the lock is released
    assert _reads(Store(postgres_url)) == (0, 0)  # nothing was read while it waited
    verdict = run_suite(load_suite(path), Store(), evaluate_decision=False)
    assert verdict.passed
    assert _reads(Store(postgres_url)) == (3, 3)  # the baseline and both seeds' picks on each private split


@pytest.mark.integration  # a second process holding the lock while this one waits
@pytest.mark.timeout(120)
@pytest.mark.file_only("a process holding the file's <db>.lock")
def test_a_process_holding_the_files_lock_makes_a_gate_exit_2_naming_it_and_killing_it_frees_it(
        tmp_path: Path, home: Path, holder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = build(tmp_path / "runs", GUARD_OK)
    path = write(tmp_path / "suite.yaml", suite_dict(tmp_path / "runs"))
    lock = home / "home" / "evalgate.duckdb.lock"
    other, pid = holder(FILE_HOLDER, str(lock))
    assert pid == other.pid
    monkeypatch.setenv("EVALGATE_LOCK_TIMEOUT", str(WAIT))
    with pytest.raises(StoreLocked) as e:
        run_suite(load_suite(path), Store(), evaluate_decision=False)
    assert f"waited {WAIT:g} s for its lock file {lock}" in e.value.message
    assert f"held by pid {pid} (user " in e.value.message and "program '" in e.value.message
    assert str(e.value.holders[0]["program"]).startswith(f"{sys.executable} -c import os, sys, time")
    code, out, err = cli_parts("audit")
    assert code == 2 and f"held by pid {pid} (user " in err and "Traceback" not in err, (out, err)
    _kill(other)  # the kernel releases a dead process's flock
    assert _reads(store) == (0, 0)  # nothing was read while it waited
    assert run_suite(load_suite(path), Store(), evaluate_decision=False).passed
    assert _reads(store) == (3, 3)  # the baseline and both seeds' picks on each private split


@pytest.mark.timeout(60)
@pytest.mark.server_only("PostgreSQL's lock_timeout, a whole number of milliseconds where 0 is no limit")
def test_a_sub_millisecond_lock_timeout_still_bounds_the_wait_on_a_server(
        postgres_url: str, home: Path, holder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 18's adversary: EVALGATE_LOCK_TIMEOUT=0.0004 was rounded to PostgreSQL's '0ms', which is no limit:
    the command waited for ever behind the holder (the pytest timeout fails this test then). It waits 1 ms."""
    from evalgate.store.pg import LOCK_KEY

    Store(postgres_url)  # migrated before the lock is taken
    _, pid = holder(PG_HOLDER, postgres_url, str(LOCK_KEY))
    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    monkeypatch.setenv("EVALGATE_LOCK_TIMEOUT", "0.0004")
    code, out, err = cli_parts("audit", "--json")
    assert code == 2 and f"held by pid {pid} (role " in json.loads(out)["error"], (out, err)


DUCKDB_READER = """
import os, sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("held", os.getpid(), flush=True)
time.sleep(600)
"""


@pytest.mark.integration  # a second process holding the lock while this one waits
@pytest.mark.timeout(120)
@pytest.mark.file_only("DuckDB's own lock on the database file")
def test_a_notebook_holding_the_file_open_is_waited_for_and_named_not_called_damaged(
        home: Path, holder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An auditor's notebook that opened the store's file read-only holds DuckDB's own (POSIX) lock on it, not
    ``<db>.lock``: a command waits for it as for the store's lock and exits 2 naming the process (it said 'cannot
    open the store ... If the file is damaged, restore it from a backup, or set EVALGATE_HOME to another
    directory to start a new store there' at once: a new store is new budgets); once the notebook closes the file
    the same store works, its log as it was."""
    Store()  # the store's file exists
    db = home / "home" / "evalgate.duckdb"
    reader, pid = holder(DUCKDB_READER, str(db))
    monkeypatch.setenv("EVALGATE_LOCK_TIMEOUT", str(WAIT))
    t0 = time.monotonic()
    code, out, err = cli_parts("audit", "--json")
    assert time.monotonic() - t0 >= WAIT, (out, err)
    error = json.loads(out)["error"]
    assert code == 2 and f"waited {WAIT:g} s for the database file itself" in error, (out, err)
    assert f"held by pid {pid} (user " in error and "program '" in error  # /proc/locks named it
    assert "damaged" in error and "not damaged" in error and "start a new store" not in error
    _kill(reader)
    code, out, err = cli_parts("audit", "--json")
    assert code == 0 and json.loads(out)["chain"]["ok"], (out, err)


@pytest.mark.integration  # a real server
@pytest.mark.timeout(120)
@pytest.mark.server_only("a server transaction holding a table lock against a migration")
def test_an_auditors_open_transaction_stalls_a_migration_only_until_the_timeout(
        postgres_server: Any, postgres_url: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration's ALTER TABLE waits for every open transaction that read the table, the auditor's too: the
    waiting client names the reader and the table."""
    import psycopg

    from evalgate.store.migrations import MIGRATIONS
    from evalgate.store.pg import PostgresDatabase
    from tests.helpers.postgres import SUPERUSER

    Store(postgres_url)  # migrated
    postgres_server.admin("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'audrey') THEN "
                          "CREATE ROLE audrey LOGIN; END IF; END $$")
    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    code, out, err = cli_parts("store", "grant-roles", "--auditor", "audrey")
    assert code == 0, out + err
    reader = psycopg.connect(postgres_url.replace(f"{SUPERUSER}@", "audrey@"), application_name="notebook")
    try:
        reader.execute("SELECT count(*) FROM access_log").fetchall()  # its transaction stays open
        pid = reader.info.backend_pid

        def add_column(con: Any) -> None:
            con.execute("ALTER TABLE access_log ADD COLUMN extra VARCHAR")

        monkeypatch.setenv("EVALGATE_LOCK_TIMEOUT", str(WAIT))
        with pytest.raises(StoreLocked) as e:
            PostgresDatabase(postgres_url, [*MIGRATIONS, (10_000, "extra column", add_column)])
        assert "a lock on table access_log" in e.value.message
        assert f"held by pid {pid} (role audrey, program 'notebook'" in e.value.message
        assert [h["pid"] for h in e.value.holders] == [pid] and e.value.exit_code == 2
    finally:
        reader.close()
    with Store(postgres_url).connect() as con:  # nothing of the migration was applied
        assert con.execute("SELECT count(*) FROM schema_migrations WHERE version = 10000").fetchone() == (0,)


@pytest.mark.file_only("EVALGATE_LOCK_TIMEOUT's parsing opens no store: once is enough")
def test_the_lock_timeout_is_the_variables_else_the_default_and_0_waits_without_limit() -> None:
    assert lock_timeout(Environment.from_env({})) == DEFAULT_LOCK_TIMEOUT == 300.0
    assert lock_timeout(Environment.from_env({"EVALGATE_LOCK_TIMEOUT": "2.5"})) == 2.5
    assert lock_timeout(Environment.from_env({"EVALGATE_LOCK_TIMEOUT": "0"})) is None
    assert lock_timeout(Environment(lock_timeout=7)) == 7.0
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(BadInput, match=f"EVALGATE_LOCK_TIMEOUT='{bad}' is not a number of seconds"):
            lock_timeout(Environment.from_env({"EVALGATE_LOCK_TIMEOUT": bad}))
    # PostgreSQL's lock_timeout is a 32-bit count of milliseconds: 2**31 - 1 ms is 2,147,483.647 s; 1e12 s was a
    # 'Value exceeds integer range' from the server, exit 3 (session 18's adversary)
    assert lock_timeout(Environment.from_env({"EVALGATE_LOCK_TIMEOUT": "2147483"})) == 2_147_483.0
    for long in ("2147484", "1e12"):
        with pytest.raises(BadInput, match=f"EVALGATE_LOCK_TIMEOUT='{long}' is longer than a client can wait"):
            lock_timeout(Environment.from_env({"EVALGATE_LOCK_TIMEOUT": long}))
    assert Environment(lock_timeout=7).variables()["EVALGATE_LOCK_TIMEOUT"] == "7"  # a child process waits as long


def test_a_bad_lock_timeout_is_exit_2_before_the_store_is_opened(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALGATE_LOCK_TIMEOUT", "a while")
    code, out, err = cli_parts("audit", "--json")
    assert code == 2 and "EVALGATE_LOCK_TIMEOUT='a while' is not a number of seconds" in err, (out, err)
    assert not (home / "home" / "evalgate.duckdb").exists()


@pytest.mark.file_only("the file lock's holders from /proc/locks")
def test_file_lock_holders_reads_proc_locks_by_device_and_inode(tmp_path: Path) -> None:
    """Linux's /proc/locks lines (proc(5)): a holder, a waiter (``->``) and another file's holder; only the first
    is named."""
    lock = tmp_path / "x.lock"
    lock.write_text("")
    st = os.stat(lock)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    me = os.getppid()  # a process that exists (the test's own pid is left out as the waiter's)
    text = (f"1: FLOCK  ADVISORY  WRITE {me} {dev}:{st.st_ino} 0 EOF\n"
            f"1: -> FLOCK  ADVISORY  WRITE 999999 {dev}:{st.st_ino} 0 EOF\n"
            f"2: POSIX  ADVISORY  WRITE 4242 {dev}:{st.st_ino + 1} 0 EOF\n")
    (tmp_path / "locks").write_text(text)
    holders = file_lock_holders(lock, tmp_path / "locks")
    assert [h["pid"] for h in holders] == [me] and holders[0]["since"].tzinfo is not None
    assert file_lock_holders(tmp_path / "missing.lock", tmp_path / "locks") == []


LOCK_FUNCTIONS = ", ".join(f"pg_{t}advisory_{x}lock{s}(bigint)" for t in ("", "try_") for x in ("", "xact_")
                           for s in ("", "_shared"))
"""The eight advisory-lock functions that take a bigint key (docs/SECURITY.md, 'The store's lock')."""


@pytest.mark.integration  # a real server, a database of its own (the revocation is database-wide)
@pytest.mark.server_only("PostgreSQL's privileges on its advisory-lock functions")
def test_an_administrator_can_keep_the_auditor_off_the_lock_and_evalgate_still_works(
        postgres_server: Any, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SECURITY.md's recipe, as a superuser: EXECUTE on the advisory-lock functions revoked from PUBLIC and granted to
    the evaluator group; the auditor's pg_advisory_lock is then refused, while a gate role's reads and the owner's
    work as before."""
    import psycopg

    from evalgate.splits import SplitManager, write_split
    from evalgate.store.pg import LOCK_KEY, ROLES
    from tests.helpers.postgres import SUPERUSER

    url = postgres_server.create_database()
    monkeypatch.setenv("EVALGATE_STORE", url)
    write_split("s", "dev", [{"id": "q0", "question": "1 + 1?"}], {"source": "test"})
    Store(url)
    for login in ("gail", "audrey"):
        postgres_server.admin(f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{login}') THEN "
                              f"CREATE ROLE {login} LOGIN; END IF; END $$")
    code, out, err = cli_parts("store", "grant-roles", "--gate", "gail", "--auditor", "audrey")
    assert code == 0, out + err
    dbname = url.split("@/", 1)[1].split("?", 1)[0]
    postgres_server.admin(f"REVOKE EXECUTE ON FUNCTION {LOCK_FUNCTIONS} FROM PUBLIC; "
                          f"GRANT EXECUTE ON FUNCTION {LOCK_FUNCTIONS} TO {ROLES['evaluator']}", dbname)
    with psycopg.connect(url.replace(f"{SUPERUSER}@", "audrey@"), autocommit=True) as auditor:
        for fn in ("pg_advisory_lock", "pg_try_advisory_lock", "pg_advisory_lock_shared"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                auditor.execute(f"SELECT {fn}(%s)", [LOCK_KEY])
        assert auditor.execute("SELECT count(*) FROM access_log").fetchone() == (0,)  # it still reads
    gate = url.replace(f"{SUPERUSER}@", "gail@")
    monkeypatch.setenv("EVALGATE_STORE", gate)
    SplitManager(Store(gate)).open("s", "tuning", "gail")  # a transaction and a session under the lock
    assert [r.actor for r in Store(url).access_rows("s")] == ["gail"]


@pytest.mark.integration  # a server of its own, stopped (SIGSTOP) and resumed
@pytest.mark.server_only("a PostgreSQL server that stops answering")
@pytest.mark.timeout(120)
def test_a_server_that_stops_answering_is_exit_2_naming_it_after_the_connect_timeout(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung server (its postmaster stopped: connections are accepted by the kernel, never answered): a new
    connection gives up after libpq's ``connect_timeout`` (here 2 s, given in the URL; psycopg's default is 130 s)
    and the command exits 2 naming the server; resumed, the same command works."""
    from tests.helpers.postgres import PostgresServer, find_bin_dir

    bin_dir, why = find_bin_dir()
    assert bin_dir is not None, why
    server = PostgresServer(bin_dir).start()
    try:
        url = server.create_schema()
        Store(url)  # migrated while it answers
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
        monkeypatch.setenv("EVALGATE_STORE", f"{url}&connect_timeout=2")
        os.kill(postmaster, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            code, out, err = cli_parts("audit")
            assert code == 2 and "cannot use the store on the PostgreSQL server postgresql://" in err, (out, err)
            assert "timeout" in err and "Traceback" not in err and time.monotonic() - t0 >= 2
        finally:
            os.kill(postmaster, signal.SIGCONT)
        code, out, err = cli_parts("audit")
        assert code == 0, (out, err)
    finally:
        server.stop()
