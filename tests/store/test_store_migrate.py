"""``evalgate store migrate``: a DuckDB file store copied onto a real PostgreSQL server (``postgres_url``) and read
back equal, table by table, and a server's store copied into a new file; the budget spent before the copy still spent
after it and sealed text still sealed on the server; a tampered access log (an edited row, a truncated tail under a
signed head) refused with exit 2 before the server is opened and the source left unwritten, copied only when told
(``--accept-broken-chain REASON``, logged on the target, which stays broken); a copy onto the store itself, into a
store holding rows, and a failed copy's half-made file refused or removed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evalgate.access.log import verify
from evalgate.access.transfer import migrate_store
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.splits import Policy, SplitManager, write_split
from evalgate.store import Database, Store
from evalgate.store.db import open_database
from evalgate.store.migrations import MIGRATIONS
from tests.helpers.cli import cli_parts
from tests.helpers.postgres import admin_edit

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.server_only("copies between a DuckDB file and a server: both backends in each test")]

BUDGET = Policy(purposes=["release-gate"], max_reads=2, hard=True)
SEED = 2**64 - 1  # the largest sampling seed (UBIGINT in the file, NUMERIC(20) on the server)
SECRET = "the private answer is 4"


def _populate(store: Store) -> None:
    """A private split whose 2-read budget is spent (2 reads, then 1 refusal: 3 signed access-log rows), a dev
    split read once, one complete dev run with two samples (one with the largest seed, one with JSON behavior)
    and one private run whose sample holds ``SECRET`` (sealed)."""
    write_split("priv", "private", [{"id": "q1", "question": "2 + 2?"}], {"source": "test"}, policy=BUDGET)
    write_split("dev", "dev", [{"id": "d1", "question": "3 + 3?"}], {"source": "test"})
    mgr = SplitManager(store)
    mgr.open("priv", "release-gate", "alice")
    mgr.open("priv", "release-gate", "bob")
    with pytest.raises(RefusedByPolicy):
        mgr.open("priv", "release-gate", "carol")
    mgr.open("dev", "tuning", "alice")
    base = {"protocol_name": "p", "protocol_version": "1", "protocol_hash": "h", "checkpoint_digest": "c" * 64,
            "checkpoint_path": "/ckpt", "split_sha256": "s" * 64, "sampling_seed": 7, "backend": "hf",
            "actor": "alice"}
    store.create_run({**base, "run_id": "r1", "split": "dev", "tier": "dev", "purpose": "tuning"})
    store.finish_run({"run_id": "r1", "metrics": {"pass@1": 0.5}, "wall_s": 1.25},
                     [{"item_id": "d1", "sample_index": 0, "seed": SEED, "score": 1.0, "status": "ok",
                       "extracted": "6", "detail": "exact", "cached": False, "behavior": {"tokens": 3}},
                      {"item_id": "d1", "sample_index": 1, "seed": 0, "score": 0.0, "status": "wrong",
                       "extracted": "7", "detail": None, "cached": True, "behavior": None}])
    store.create_run({**base, "run_id": "r2", "split": "priv", "tier": "private", "purpose": "release-gate"})
    store.finish_run({"run_id": "r2"}, [{"item_id": "q1", "sample_index": 0, "seed": 1, "score": 1.0,
                                         "status": "ok", "extracted": SECRET, "detail": SECRET, "cached": False,
                                         "behavior": None}])


def _plain(value: Any) -> Any:
    """A value as both backends should give it back: a timestamp as UTC ISO text (DuckDB gives it in the local zone)."""
    return value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value


def _contents(store: Store) -> dict[str, list[str]]:
    """Every table's rows as sorted JSON lines: equal for equal stores. Left out: ``schema_migrations`` (each
    store records when it applied them) and the verified head's ``checked_at`` (the copy is verified when made)."""
    out = {}
    with store.connect() as con:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() AND "
            "table_schema = current_schema() AND table_type = 'BASE TABLE'").fetchall()]
        for table in names:
            if table == "schema_migrations":
                continue
            cur = con.execute(f'SELECT * FROM "{table}"')
            keep = [i for i, d in enumerate(cur.description) if (table, d[0]) != ("access_log_head", "checked_at")]
            out[table] = sorted(json.dumps([_plain(r[i]) for i in keep], default=str) for r in cur.fetchall())
    return out


def _server_tables(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as con:
        return [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                          "WHERE table_schema = current_schema()").fetchall()]


@pytest.fixture
def file_store(home: Path) -> Store:
    store = Store(open_database(str(home / "home" / "evalgate.duckdb")))
    _populate(store)
    return store


def test_file_store_copied_to_server_reads_back_equal(file_store: Store, postgres_url: str) -> None:
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["rows"]["access_log"], doc["rows"]["samples"], doc["rows"]["runs"]) == (4, 3, 2)
    assert doc["before"]["ok"] and doc["after"]["ok"] and doc["accepted_broken_chain"] is None

    server = Store(open_database(postgres_url))
    before = _contents(file_store)
    assert before == _contents(server)
    assert {t: len(rows) for t, rows in before.items() if rows} == {
        "access_log": 4, "access_log_signature": 1, "access_log_head": 1, "runs": 2, "samples": 3,
        "sealed_key": 1}  # the fingerprint of the key the private run's text is sealed with
    assert [s.seed for s in server.samples("r1")] == [SEED, 0]
    with server.connect() as con:
        text = repr(con.execute("SELECT * FROM samples").fetchall() + con.execute("SELECT * FROM runs").fetchall())
    assert "r2" in text and SECRET not in text  # sealed at rest on the server as in the file
    result = verify(server)
    assert result["ok"] and result["head"]["seq"] == 4 and result["signature"]["ok"]
    with pytest.raises(RefusedByPolicy):  # the budget spent in the file is spent on the server
        SplitManager(server).open("priv", "release-gate", "dave")
    SplitManager(server).open("dev", "tuning", "dave")  # and the copy goes on, signed
    assert verify(server)["ok"] and verify(server)["head"]["seq"] == 6
    assert len(file_store.access_rows()) == 4  # the source unchanged

    code, _, err = cli_parts("store", "migrate", "--to", postgres_url)  # the server now holds rows
    assert code == 2 and "is not empty" in err


@pytest.mark.parametrize("tamper", ["edit", "gap", "truncate"])
def test_tampered_chain_refused_then_copied_when_told(file_store: Store, postgres_url: str, tamper: str) -> None:
    with admin_edit(file_store) as con:
        if tamper == "edit":  # bob's read becomes carol's: the row no longer matches its hash
            con.execute("UPDATE access_log SET actor='carol' WHERE seq=2")
        elif tamper == "gap":  # bob's read deleted: row 3 no longer chains (the server's trigger lets the owner's
            con.execute("DELETE FROM access_log WHERE seq=2")  # copy of an accepted broken log through)
        else:  # the last row and the verified head deleted: the rows chain, only the signed head (row 4) is gone
            con.execute("DELETE FROM access_log WHERE seq=4")
            con.execute("DELETE FROM access_log_head")
    code, out, err = cli_parts("store", "migrate", "--to", postgres_url)
    assert code == 2, (out, err)
    assert "not copying" in err and "Nothing was written" in err
    assert {"edit": "broken at row 2", "gap": "broken at row 3", "truncate": "signed head row 4 is missing"}[tamper] \
        in err
    assert _server_tables(postgres_url) == []  # the server's schema was not even opened
    with file_store.connect() as con:  # the check wrote nothing to the source: no broken mark, no verified head
        assert con.execute("SELECT count(*) FROM access_log_head").fetchone()[0] == (0 if tamper == "truncate" else 1)

    code, out, err = cli_parts("store", "migrate", "--to", postgres_url, "--accept-broken-chain", "restore drill",
                               "--json")
    assert code == 0, err
    assert json.loads(out)["accepted_broken_chain"] == "restore drill" and "accepted: restore drill" in err
    server = Store(open_database(postgres_url))
    last = server.access_rows()[-1]
    assert (last.purpose, last.outcome, last.split) == ("store-migrate", "broken-chain-accepted", "*")
    assert "restore drill" in last.detail and str(file_store.location) in last.detail
    assert not verify(server)["ok"]  # the copy stays broken as its source is: the accepted row was not signed


def test_server_store_copied_to_a_new_file(home: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    server = Store(open_database(postgres_url))
    _populate(server)
    target = home / "copy" / "local.duckdb"
    code, out, err = cli_parts("store", "migrate", "--to", str(target))
    assert code == 0, err
    assert "access log 4 rows, intact" in out
    local = Store(open_database(str(target)))
    assert _contents(local) == _contents(server)
    assert verify(local)["ok"]

    code, _, err = cli_parts("store", "migrate", "--to", str(target))
    assert code == 2 and "is not empty" in err
    assert _contents(local) == _contents(server)  # the refused copy wrote nothing


def test_copy_onto_itself_refused(file_store: Store, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = cli_parts("store", "migrate", "--to", str(file_store.db.path))
    assert code == 2 and "is the store being copied" in err
    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    Store(postgres_url)
    same = postgres_url.replace("://evalgate_admin@", "://evalgate_admin:not-a-password@")  # the same store
    code, out, err = cli_parts("store", "migrate", "--to", same)
    assert code == 2 and "is the store being copied" in err and "not-a-password" not in out + err


def test_a_failed_copy_leaves_no_file(home: Path) -> None:
    old = Store(Database(home / "old.duckdb", MIGRATIONS[:-1]))  # a store one migration behind this evalgate
    target = home / "new" / "copy.duckdb"
    with pytest.raises(BadInput, match="applied different migrations"):
        migrate_store(old, str(target), "alice")
    assert sorted(p.name for p in target.parent.iterdir()) == []  # no file, no .wal, no .lock
