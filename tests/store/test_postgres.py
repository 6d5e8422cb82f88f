"""The store on a real PostgreSQL server (``tests/helpers/postgres.py``): budgets exact when 8 client processes on
their own connections race reads and contamination checks of private splits; a client killed (SIGKILL) in the middle
of its append leaves no row, no spent budget and no held lock; an unreachable server is exit 2 naming it, without
its password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import Policy, SplitManager, write_split
from evalgate.store import CONTAMINATION_CHECK, Store
from tests.conftest import REPO
from tests.helpers.cli import cli_parts
from tests.helpers.postgres import PostgresServer

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.server_only("PostgreSQL connections, advisory locks and server URLs")]
ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]
BUDGET = Policy(purposes=["release-gate"], max_reads=3, hard=True, max_contamination_checks=2)
"""Each private split's budget in these tests: 3 release-gate reads, 2 contamination checks, hard."""

CLIENT = """
import random, sys, time
from pathlib import Path
from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import SplitManager, load_manifest
from evalgate.store import CONTAMINATION_CHECK, Store
barrier, me, splits, clients = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mgr = SplitManager(Store())
manifests = [load_manifest(f"priv{i}") for i in range(splits)]
(barrier / f"ready-{me}").touch()
for i in range(splits):  # one race per split: every client waits for the others, then all go at once
    (barrier / f"round-{i}-{me}").touch()
    while len(list(barrier.glob(f"round-{i}-*"))) < clients:
        time.sleep(0.001)
    steps = ["gate", "check"]
    random.Random(me * 1000 + i).shuffle(steps)
    for step in steps:
        try:
            if step == "check":
                mgr.open(f"priv{i}", CONTAMINATION_CHECK, f"client-{me}", contamination_check=True)
            elif me % 2:  # an evaluation on the split for a release gate (evalgate run --purpose release-gate)
                mgr.open(f"priv{i}", "release-gate", f"client-{me}")
            else:  # a gate's reservation of its decision read, in one locked step
                mgr.reserve(manifests[i], f"client-{me}", "release-gate", [{"detail": "gate"}],
                            "budget spent: {left} left, {used} used")
        except RefusedByPolicy:
            pass
"""


VICTIM = """
import sys, time
from pathlib import Path
import evalgate.store.access as access
from evalgate.splits import SplitManager
from evalgate.store import Store

real = access.insert_values

def insert_then_hang(con, head, rows, *args, **kw):
    real(con, head, rows, *args, **kw)  # the row is written inside the append's transaction, not committed
    Path(sys.argv[1]).touch()
    time.sleep(600)

access.insert_values = insert_then_hang
SplitManager(Store()).open("priv0", "release-gate", "victim")
"""


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, env=os.environ.copy(),
                            stderr=subprocess.PIPE, text=True)


def _private_splits(url: str, monkeypatch: pytest.MonkeyPatch, n: int) -> Store:
    """``n`` private splits ``priv0``... under ``BUDGET``, with the store on the server at ``url`` for this process and
    its children (``EVALGATE_STORE``)."""
    monkeypatch.setenv("EVALGATE_STORE", url)
    for i in range(n):
        items = [{**item, "question": f"{item['question']} (set {i})"} for item in ITEMS]  # one content each:
        write_split(f"priv{i}", "private", items, {"source": "test"}, policy=BUDGET)  # twins share a budget
    return Store(url)


@pytest.mark.integration
def test_eight_clients_racing_spend_exactly_each_budget(home: Path, postgres_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """20 repetitions of one race: 8 processes wait for each other, then each makes a release-gate read (half
    through a gate's reservation, ``SplitManager.reserve``; half as an evaluation for a release gate,
    ``SplitManager.open``) and a contamination check of one private split (in an order of its own); each split's
    budget (3 reads, 2 checks) is spent exactly, never more."""
    splits = 20
    store = _private_splits(postgres_url, monkeypatch, splits)
    barrier = home / "barrier"
    barrier.mkdir()
    procs = [_spawn(CLIENT, str(barrier), str(i), str(splits), "8") for i in range(8)]
    deadline = time.monotonic() + 300
    while len(list(barrier.glob("ready-*"))) < 8:  # every client connected and waits
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a client died or hung"
        time.sleep(0.01)
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read() if p.stderr else ""
    for i in range(splits):
        got = Counter((r.purpose, r.outcome) for r in store.access_rows(f"priv{i}")
                      if r.actor.startswith("client-"))
        assert got == {("release-gate", "read"): 3, ("release-gate", "refused"): 5,
                       (CONTAMINATION_CHECK, "read"): 2, (CONTAMINATION_CHECK, "refused"): 6}, f"priv{i}"
    rows = store.access_rows()
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))  # one chain, no gap, no seq taken twice
    assert sum(r.actor.startswith("client-") for r in rows) == splits * 16
    code, out, err = cli_parts("audit", "verify")
    assert code == 0 and f"chain intact ({len(rows)} rows)" in out, out + err


def test_a_client_killed_mid_append_leaves_no_row_no_spent_budget_and_no_lock(
        home: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _private_splits(postgres_url, monkeypatch, 1)
    before = store.access_rows()
    hung = home / "hung"
    victim = _spawn(VICTIM, str(hung))
    deadline = time.monotonic() + 120
    while not hung.exists():  # the victim's read row is inserted, its transaction open, the lock held
        assert time.monotonic() < deadline and victim.poll() is None, victim.stderr.read() if victim.stderr else ""
        time.sleep(0.01)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    mgr = SplitManager(store)
    for actor in ("a1", "a2", "a3"):  # the whole budget is still there, and the lock was released
        mgr.open("priv0", "release-gate", actor)
    with pytest.raises(RefusedByPolicy, match="budget"):
        mgr.open("priv0", "release-gate", "a4")
    rows = store.access_rows()
    assert rows[:len(before)] == before and "victim" not in {r.actor for r in rows}
    assert [(r.actor, r.outcome) for r in rows[len(before):]] == [("a1", "read"), ("a2", "read"),
                                                                         ("a3", "read"), ("a4", "refused")]
    code, out, err = cli_parts("audit", "verify")
    assert code == 0 and f"chain intact ({len(before) + 4} rows)" in out, out + err


def test_a_connection_the_server_dropped_is_replaced_at_the_next_transaction(
        postgres_server: PostgresServer, postgres_url: str) -> None:
    store = Store(postgres_url)
    store.record_protocol("p", "1", "a" * 64, {"n": 1})
    with store.connect() as con:
        (pid,) = con.execute("SELECT pg_backend_pid()").fetchone()
    postgres_server.admin(f"SELECT pg_terminate_backend({pid})")  # a restart, an idle timeout, an administrator
    store.record_protocol("p", "2", "b" * 64, {"n": 2})  # a new connection, nothing lost, nothing raised
    with store.connect() as con:
        assert con.execute("SELECT pg_backend_pid()").fetchone() != (pid,)
    assert store.protocol_hash("p", "1") == "a" * 64 and store.protocol_hash("p", "2") == "b" * 64


def test_an_unreachable_server_is_exit_2_naming_it_without_the_password(home: Path) -> None:
    url = "postgresql://alice:s3cret-pw@127.0.0.1:1/evalgate"  # port 1: nothing listens there
    code, out, err = cli_parts("audit", env={"EVALGATE_STORE": url})
    assert code == 2, out + err
    assert "postgresql://alice@127.0.0.1:1/evalgate" in err and "Traceback" not in err
    assert "s3cret" not in out + err


@pytest.mark.parametrize("value", ["postgressql://alice:s3cret-pw@db.example.org/evalgate",  # a typo'd scheme
                                   "postgresql:/alice@db.example.org/evalgate",  # one slash
                                   "team-store.duckdb"])  # a file path: EVALGATE_STORE takes servers only
def test_a_store_url_that_is_no_postgresql_url_is_exit_2_writing_nothing(home: Path, value: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A new user's typo'd scheme was taken as a DuckDB file's path: 'postgressql:/alice@/...' folders appeared in
    the working directory and DuckDB complained of a missing extension 'postgressql'."""
    cwd = tmp_path / "repo"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    before = set(cwd.iterdir())
    code, out, err = cli_parts("audit", env={"EVALGATE_STORE": value})
    assert code == 2, out + err
    assert "is not a PostgreSQL URL" in err and "postgresql://" in err and "Traceback" not in err
    assert "s3cret" not in out + err and "extension" not in err
    assert set(cwd.iterdir()) == before
