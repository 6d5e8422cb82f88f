"""The access log: tampering (edit, delete, insert, truncation) detected by 'evalgate audit verify' (on each
backend: a DuckDB file, a PostgreSQL server whose administrator edits the tables), 8 concurrent reader processes,
and 'evalgate audit'."""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.access.log import row_hash as access_row_hash
from evalgate.cli import main
from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import Policy, SplitManager, write_split
from evalgate.store import Store
from evalgate.views.audit import audit_summary
from tests.conftest import REPO
from tests.helpers.postgres import admin_edit
from tests.helpers.store_suite import StoreBackend

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server
ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]


@pytest.fixture
def five_rows(backend_store: Store) -> Store:
    write_split("s", "dev", ITEMS, {"source": "test"})
    store = Store()
    mgr = SplitManager(store)
    with store.session():  # one connection for the five reads (the file is opened per transaction otherwise)
        for actor in ("a1", "a2", "a3", "a4", "a5"):
            mgr.open("s", "tuning", actor)
    return store


def verify(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["audit", "verify", *args])
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes else "")


def sql(*statements: str, params: list | None = None) -> None:
    """Edit the active store as whoever holds its file or administers its server can (``admin_edit``)."""
    with admin_edit(Store()) as con:
        for s in statements:
            con.execute(s, params or [])


def test_intact_log_verifies(five_rows: Store) -> None:
    code, out = verify()
    assert code == 0 and "chain intact (5 rows)" in out


def test_an_append_that_fails_midway_leaves_nothing(five_rows: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain check, the row, the signed head and the verified head are one transaction: a failure after the
    row was inserted (here recording the verified head) leaves neither the row nor a signature for it."""
    store = Store()
    before = store.access_rows()
    signed = store.access_log_signature()

    def fail(seq: int, row_hash: str) -> None:
        raise RuntimeError("disk full")

    with monkeypatch.context() as m, pytest.raises(RuntimeError, match="disk full"):
        m.setattr(Store, "set_access_log_head", lambda self, seq, row_hash: fail(seq, row_hash))
        SplitManager(store).open("s", "tuning", "a6")
    assert store.access_rows() == before and store.access_log_signature() == signed
    code, out = verify()
    assert code == 0 and "chain intact (5 rows)" in out


def test_edited_row_is_named(five_rows: Store) -> None:
    sql("UPDATE access_log SET actor='mallory' WHERE seq=3")
    code, out = verify()
    assert code == 1
    assert "first bad row seq 3: row content does not match its hash (the row was edited)" in out


def test_reading_into_a_broken_log_warns_once_and_is_still_logged(five_rows: Store,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    mgr = SplitManager(Store())
    mgr.open("s", "tuning", "a6")
    assert capsys.readouterr().err == ""  # intact chain: nothing to say
    sql("UPDATE access_log SET actor='mallory' WHERE seq=6")  # the last verified row
    mgr.open("s", "tuning", "a7")
    err = capsys.readouterr().err
    assert err.startswith("warning:") and "broken at row 6" in err and "'evalgate audit verify'" in err
    mgr.open("s", "tuning", "a8")
    assert capsys.readouterr().err == ""  # once per process
    assert [r.actor for r in Store().access_rows()][-2:] == ["a7", "a8"]  # the reads were not refused


def test_append_sees_deleted_old_rows_but_old_edits_only_after_a_full_verify(
        five_rows: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.access import log as accesslog

    mgr = SplitManager(Store())
    sql("UPDATE access_log SET actor='mallory' WHERE seq=2")
    mgr.open("s", "tuning", "a6")
    # An append re-hashes only what is new since the verified head (row 5): an older edit goes unseen here...
    assert capsys.readouterr().err == ""
    code, out = verify()  # ...until the full check, which records the break in the store
    assert code == 1 and "first bad row seq 2" in out
    monkeypatch.setattr(accesslog, "_warned_broken", set())  # a new process
    mgr.open("s", "tuning", "a7")
    assert "broken at row 2" in capsys.readouterr().err


def test_append_sees_a_deleted_old_row(five_rows: Store, capsys: pytest.CaptureFixture[str]) -> None:
    sql("DELETE FROM access_log WHERE seq=2")
    SplitManager(Store()).open("s", "tuning", "a6")
    err = capsys.readouterr().err
    assert "broken at row 5" in err and "4 rows up to row 5" in err


def test_deleted_row_is_named(five_rows: Store) -> None:
    sql("DELETE FROM access_log WHERE seq=2")
    code, out = verify()
    assert code == 1 and "first bad row seq 3: sequence jumps from 1 to 3" in out


def test_inserted_row_is_named(five_rows: Store) -> None:
    # Make room at seq 3 (descending, so the primary key never collides) and insert a forged row there.
    sql(*[f"UPDATE access_log SET seq={s + 1} WHERE seq={s}" for s in (5, 4, 3)])
    sql("INSERT INTO access_log SELECT 3, ts, 'mallory', ci, split, tier, purpose, outcome, cached, "
                   "checkpoint_digest, protocol_hash, run_id, detail, prev_hash, row_hash FROM access_log WHERE seq=2")
    code, out = verify()
    assert code == 1 and "first bad row seq 3" in out  # a naive forgery: its own hash is wrong


def test_inserted_row_with_a_valid_hash_is_caught_at_the_next_row(five_rows: Store) -> None:
    sql(*[f"UPDATE access_log SET seq={s + 1} WHERE seq={s}" for s in (5, 4, 3)])
    row2 = Store().access_rows()[1]
    forged = {**row2.as_dict(), "seq": 3, "actor": "mallory"}
    forged["prev_hash"] = row2.row_hash
    forged["row_hash"] = access_row_hash(row2.row_hash, forged)
    cols = list(forged)
    sql(f"INSERT INTO access_log ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        params=[forged[c] for c in cols])
    code, out = verify()
    # The forged row itself is consistent; the row after it no longer chains to its predecessor.
    assert code == 1 and "first bad row seq 4: prev_hash does not match" in out


def test_deleted_final_rows_are_caught_against_a_recorded_head(backend_store: Store) -> None:
    write_split("s", "dev", ITEMS, {"source": "test"})
    mgr = SplitManager(Store())
    for actor in ("a1", "a2", "a3"):
        mgr.open("s", "tuning", actor)
    old_signature = Store().access_log_signature()  # an editor who kept a copy of the store at row 3
    for actor in ("a4", "a5"):
        mgr.open("s", "tuning", actor)
    code, out = verify("--json")
    head = json.loads(out)["head"]
    sql("DELETE FROM access_log WHERE seq>=4")
    code, out = verify()  # the head the store recorded at the last check is gone
    assert code == 1 and "first bad row seq 4: the recorded head row 5 is missing" in out
    sql("DELETE FROM access_log_head")  # an editor who also removes that record
    code, out = verify()  # the signed head (row 5) is gone too, and the editor cannot sign row 3 without the key
    assert code == 1 and "the signed head row 5 is missing" in out
    # Putting back the genuine older signature of row 3 rolls the store back to an earlier state: that passes
    # (nothing in the store can tell), which is what a head pinned outside the store is for.
    sql("DELETE FROM access_log_signature")
    sql("INSERT INTO access_log_signature VALUES (?, ?, ?, ?, ?)", params=list(dataclasses.astuple(old_signature)))
    assert verify()[0] == 0
    code, out = verify("--expect-head", f"{head['seq']}:{head['hash']}")
    assert code == 1 and "first bad row seq 4: the recorded head row 5 is missing" in out  # ...but not this one


READER = """
import os, sys, time
from pathlib import Path
from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import SplitManager
from evalgate.store import Store
barrier, me = Path(sys.argv[1]), sys.argv[2]

def wait(name):
    while not (barrier / name).exists():
        time.sleep(0.005)

(barrier / ("ready-" + me)).touch()
wait("go")
mgr = SplitManager(Store())
mgr.open("free", "tuning", "reader-" + me)
# Every process passes the budget check before any logs its read: only the atomic append can hold the budget.
m, _ = mgr.check("budgeted", "tuning", "reader-" + me)
(barrier / ("checked-" + me)).touch()
wait("go2")
try:
    mgr.log_read(m, "reader-" + me, "tuning", cached=False)
except RefusedByPolicy:
    pass
"""


@pytest.mark.integration
@pytest.mark.not_in_memory("eight processes share the store; a memory one lives in one process")
def test_eight_concurrent_reader_processes(home: Path) -> None:
    write_split("free", "dev", ITEMS, {"source": "test"})
    write_split("budgeted", "dev", ITEMS, {"source": "test"}, policy=Policy(max_reads=3, hard=True))
    Store()  # create the database before the race
    barrier = home / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", READER, str(barrier), str(i)], cwd=REPO, env=os.environ.copy(),
                              stderr=subprocess.PIPE, text=True) for i in range(8)]
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready-*"))) < 8:  # every interpreter started and waits on the barrier
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a reader died or hung"
        time.sleep(0.01)
    (barrier / "go").touch()
    while len(list(barrier.glob("checked-*"))) < 8:
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a reader died"
        time.sleep(0.01)
    (barrier / "go2").touch()
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
    store = Store()
    free = store.access_rows("free")
    assert len(free) == 8 and sorted(r.actor for r in free) == [f"reader-{i}" for i in range(8)]
    budgeted = [r.outcome for r in store.access_rows("budgeted")]
    assert sorted(budgeted) == ["read"] * 3 + ["refused"] * 5  # the hard budget holds under the race
    rows = store.access_rows()
    assert [r.seq for r in rows] == list(range(1, 17))
    assert CliRunner().invoke(main, ["audit", "verify"]).exit_code == 0


def test_audit_reports_reads_by_split_actor_purpose_day_budget_and_refusals(home: Path) -> None:
    write_split("pub", "public", ITEMS, {"source": "test"})
    write_split("priv", "private", ITEMS, {"source": "test"})
    store = Store()
    mgr = SplitManager(store)
    mgr.open("pub", "trend", "alice")
    mgr.open("pub", "trend", "bob", cached=True)
    mgr.open("pub", "debug", "bob")
    mgr.open("priv", "release-gate", "ci-bot")
    with pytest.raises(RefusedByPolicy):
        mgr.open("priv", "tuning", "mallory")
    r = CliRunner().invoke(main, ["audit", "--json"])
    assert r.exit_code == 0
    doc = json.loads(r.output)
    pub, priv = doc["splits"]["pub"], doc["splits"]["priv"]
    assert (pub["tier"], pub["reads"], pub["cached_reads"], pub["refusals"]) == ("public", 3, 1, 0)
    assert pub["by_actor"] == {"alice": 1, "bob": 2} and pub["by_purpose"] == {"trend": 2, "debug": 1}
    assert pub["budget"] == {"max_reads": 20, "window_days": 30, "hard": False, "used": 3, "left": 17}
    assert list(pub["by_day"].values()) == [3]
    assert (priv["reads"], priv["refusals"], priv["refusals_by_actor"]) == (1, 1, {"mallory": 1})
    assert priv["budget"]["left"] == 3 and doc["chain"]["ok"]
    assert list(audit_summary(store, tier="private").splits) == ["priv"]  # the release report's table
    text = CliRunner().invoke(main, ["audit", "--split", "pub"]).output
    assert "pub" in text and "3/20 per 30d (17 left)" in text and "alice 1, bob 2" in text and "priv" not in text
    future = CliRunner().invoke(main, ["audit", "--since", "2999-01-01", "--json"]).output
    assert json.loads(future)["splits"]["pub"]["reads"] == 0
    unknown = CliRunner().invoke(main, ["audit", "--split", "nope"])
    assert unknown.exit_code == 2 and "unknown split 'nope'" in unknown.stderr
    assert "known splits: priv, pub" in unknown.stderr
    bad = CliRunner().invoke(main, ["audit", "--since", "yesterday"])
    assert bad.exit_code == 2 and "not an ISO date" in bad.stderr


@pytest.mark.not_in_memory("opens the test's store with the migrations before 6; a memory database is named, and "
                           "migrated, once")
def test_a_store_from_before_migration_6_is_checked_in_full_once_then_incrementally(
        store_backend: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.access import log as accesslog
    from evalgate.store.db import open_database
    from evalgate.store.migrations import MIGRATIONS

    write_split("s", "dev", ITEMS, {"source": "test"})
    old_schema = [x for x in MIGRATIONS if x[0] < 6]  # a store as it was before migration 6: no verified head
    old = Store(open_database(store_backend.target, old_schema))
    for i in range(3):
        old.append([_chained(old, f"old{i}")])
    store = Store()
    assert store.access_log_head() is None
    seen: list[int | None] = []
    real = store.access_rows
    monkeypatch.setattr(store, "access_rows", lambda *a, **k: seen.append(k.get("from_seq")) or real(*a, **k))
    SplitManager(store).open("s", "tuning", "a1")  # first append: rows 1-3 checked from the start
    SplitManager(store).open("s", "tuning", "a2")  # second: only from the head (row 4) on
    assert seen == [1, 4]
    head = store.access_log_head()
    assert head is not None and head.seq == 5 and head.broken_seq is None
    res = accesslog.verify(store)  # an old store's chain is intact but has no signed head until someone signs it
    assert res["first_bad_seq"] is None and not res["ok"] and "no signed head" in res["signature"]["reason"]
    assert accesslog.sign_head(store)["ok"] and accesslog.verify(store)["ok"]


def _chained(store: Store, actor: str) -> dict:
    from datetime import UTC, datetime

    from evalgate.access import log as accesslog

    last = store.access_log_last()
    seq, prev = (last.seq + 1, last.row_hash) if last else (1, accesslog.GENESIS_HASH)
    row = {**accesslog.entry(actor=actor, split="s", tier="dev", purpose="tuning", outcome="read"),
           "seq": seq, "ts": datetime(2026, 11, 1, tzinfo=UTC), "prev_hash": prev}
    row["row_hash"] = accesslog.row_hash(prev, row)
    return row


def test_audit_from_another_directory_says_the_budget_is_unknown_and_where_it_looked(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28 item 18: run where the manifests are not (another working directory, no EVALGATE_SPLITS), the
    budget column showed "-" as for a split without a budget; it must say the budget is unknown and name the
    directory it read manifests from."""
    write_split("pub", "public", ITEMS, {"source": "test"})
    SplitManager(Store()).open("pub", "trend", "alice")
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("EVALGATE_SPLITS")
    r = CliRunner().invoke(main, ["audit"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.output.splitlines() if ln.startswith("pub "))
    assert line.rstrip().endswith("? (no manifest)")
    assert f"budget of pub unknown: no manifest in {elsewhere / 'splits'}" in r.output
    doc = json.loads(CliRunner().invoke(main, ["audit", "--json"]).output)
    assert doc["splits_dir"] == str(elsewhere / "splits") and doc["splits"]["pub"]["manifest"] is False
    monkeypatch.setenv("EVALGATE_SPLITS", str(home / "splits"))  # where the manifests are: the budget again
    r = CliRunner().invoke(main, ["audit"])
    assert "1/20 per 30d (19 left)" in r.output and "unknown" not in r.output
