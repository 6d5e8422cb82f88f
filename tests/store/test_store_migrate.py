"""``evalgate store migrate``: a file store copied to a real PostgreSQL server and a server's store copied back to a
file, every row as stored and the access log still verifying; a broken log refused (nothing copied) unless
``--allow-broken``, a truncated tail under a signed head refused (only the signature shows it), a private run's
sealed text still sealed on the server and a spent budget still spent there, and a target holding rows refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.splits import SplitManager, write_split
from evalgate.store import Store
from tests.helpers.cli import cli_parts
from tests.helpers.postgres import admin_edit

ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]
MAX_SEED = 2**64 - 1


def _fill(store: Store) -> None:
    """Four reads of split ``s`` (signed), a private split's fingerprints, a complete run with a seed at 2**64 - 1."""
    write_split("s", "dev", ITEMS, {"source": "test"})
    write_split("p", "private", ITEMS, {"source": "test"})
    mgr = SplitManager(store)
    for actor in ("a1", "a2", "a3", "a4"):
        mgr.open("s", "tuning", actor)
    store.create_run({"run_id": "r1", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "ph",
                      "checkpoint_digest": "d1", "checkpoint_path": "/ck", "split": "s", "tier": "dev",
                      "split_sha256": "ss", "sampling_seed": 3, "backend": "replay"})
    store.finish_run({"run_id": "r1", "metrics": {"pass@1": 0.5}}, [
        {"item_id": "q1", "sample_index": 0, "seed": MAX_SEED, "score": 1.0, "status": "ok", "extracted": "2",
         "detail": "50%?", "cached": False, "behavior": {"n": 1}}])


def _same(a: Store, b: Store) -> None:
    assert a.access_rows() == b.access_rows() and a.access_log_signature() == b.access_log_signature()
    assert a.runs() == b.runs() and a._samples("r1") == b._samples("r1")


def test_a_file_store_goes_to_the_server_and_back_with_its_log_verifying(
        home: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = Store()
    _fill(source)
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url)
    assert code == 0 and "access log 4 rows, intact" in out, out + err
    server = Store(postgres_url)
    _same(source, server)
    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    assert cli_parts("audit", "verify")[0] == 0
    SplitManager(server).open("s", "tuning", "on-the-server")  # the copy is a working store: it appends and signs
    back = home / "back.duckdb"
    code, out, err = cli_parts("store", "migrate", "--to", str(back))
    assert code == 0 and "access log 5 rows, intact" in out, out + err
    _same(server, Store(str(back)))


def test_a_broken_log_is_refused_unless_allowed_and_a_full_target_is_refused(
        home: Path, postgres_url: str, postgres_server: object) -> None:
    source = Store()
    _fill(source)
    with admin_edit(source) as con:
        con.execute("UPDATE access_log SET actor='mallory' WHERE seq=2")
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url)
    assert code == 2 and "first bad row 2" in err and "nothing was copied" in err, out + err
    assert Store(postgres_url).access_rows() == []
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url, "--allow-broken")
    assert code == 1 and "NOT intact (first bad row 2)" in out, out + err  # copied as it is, and says so
    assert [r["actor"] for r in Store(postgres_url).access_rows()][1] == "mallory"
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url, "--allow-broken")
    assert code == 2 and "is not empty" in err, out + err


SECRET = "the private answer is 4"


def test_a_truncated_signed_tail_is_refused_and_sealed_text_and_spent_budgets_travel(
        home: Path, postgres_url: str) -> None:
    from evalgate.core.errors import RefusedByPolicy
    from evalgate.splits import Policy

    source = Store()
    write_split("priv", "private", ITEMS[:1], {"source": "test"}, policy=Policy(purposes=["release-gate"],
                                                                                  max_reads=1, hard=True))
    mgr = SplitManager(source)
    mgr.open("priv", "release-gate", "alice")
    with pytest.raises(RefusedByPolicy):
        mgr.open("priv", "release-gate", "bob")  # the budget of 1 is spent: rows 1 (read) and 2 (refused)
    source.create_run({"run_id": "r2", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "ph",
                       "checkpoint_digest": "d1", "checkpoint_path": "/ck", "split": "priv", "tier": "private",
                       "split_sha256": "ss", "sampling_seed": 3, "backend": "replay"})
    source.finish_run({"run_id": "r2"}, [{"item_id": "q0", "sample_index": 0, "seed": 1, "score": 1.0, "status": "ok",
                                          "extracted": SECRET, "detail": SECRET, "cached": False, "behavior": None}])
    with admin_edit(source) as con:  # the last row and the verified head gone: the rows still chain
        con.execute("DELETE FROM access_log WHERE seq=2")
        con.execute("DELETE FROM access_log_head")
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url)
    assert code == 2 and "signed head row 2 is missing" in err, out + err  # only the signature shows it
    assert Store(postgres_url).access_rows() == []

    code, out, err = cli_parts("store", "migrate", "--to", postgres_url, "--allow-broken")
    assert code == 1, out + err  # copied as it is, and the copy fails the same check
    server = Store(postgres_url)
    with server.connect() as con:
        text = repr(con.execute("SELECT * FROM samples").fetchall() + con.execute("SELECT * FROM runs").fetchall())
    assert "r2" in text and SECRET not in text  # sealed at rest on the server as in the file
    with pytest.raises(RefusedByPolicy):  # the read spent in the file is spent on the server
        SplitManager(server).open("priv", "release-gate", "carol")
