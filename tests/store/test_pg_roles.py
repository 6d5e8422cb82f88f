"""The roles of a PostgreSQL store (``evalgate.store.pg.grant_roles``, migration 47), against a real server: an
evaluator appends to the access log and signs its new head, and the server refuses its UPDATE, DELETE and TRUNCATE
of log rows, any change of the signed head but the forward one, and a rollback of it; the tables' owner is refused
the same changes by the triggers; an auditor reads everything and changes nothing; only the gate role logs a
release-gate read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import astuple
from typing import Any

import psycopg
import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import SplitManager, write_split
from evalgate.store import AccessRow, Store
from evalgate.store.pg import ROLES
from tests.helpers.cli import cli_parts
from tests.helpers.postgres import SUPERUSER, PostgresServer

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.server_only("PostgreSQL roles, privileges and triggers (a DuckDB file has none)")]

ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]
LOGINS = {"eve": ROLES["evaluator"], "gail": ROLES["gate"], "audrey": ROLES["auditor"]}
"""The login roles of these tests and the group role each is a member of."""


@pytest.fixture
def urls(postgres_server: PostgresServer, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A store with three reads of split ``s`` and a signed head, made and granted by its owner (the superuser),
    and the URL of each login role (``LOGINS``) on it."""
    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    write_split("s", "dev", ITEMS, {"source": "test"})
    write_split("p", "private", ITEMS, {"source": "test"})
    mgr = SplitManager(Store(postgres_url))
    for actor in ("a1", "a2", "a3"):
        mgr.open("s", "tuning", actor)
    for login in LOGINS:
        postgres_server.admin(f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{login}') THEN "
                              f"CREATE ROLE {login} LOGIN; END IF; END $$")
    code, out, err = cli_parts("store", "grant-roles", "--evaluator", "eve", "--gate", "gail", "--auditor", "audrey")
    assert code == 0, out + err
    return {"owner": postgres_url, **{login: postgres_url.replace(f"{SUPERUSER}@", f"{login}@")
                                      for login in LOGINS}}


def _sql(url: str, sql: str, params: list[Any] | None = None) -> None:
    with Store(url).connect() as con:
        con.execute(sql, params or [])


@pytest.fixture
def as_(urls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def use(login: str) -> Store:
        monkeypatch.setenv("EVALGATE_STORE", urls[login])
        return Store(urls[login])
    yield use


TAMPERING = {
    "update a row": "UPDATE access_log SET actor='mallory' WHERE seq=2",
    "delete a row": "DELETE FROM access_log WHERE seq=2",
    "delete the tail": "DELETE FROM access_log WHERE seq>=2",
    "truncate the log": "TRUNCATE access_log",
    "delete the signed head": "DELETE FROM access_log_signature",
    "roll the signed head back": "UPDATE access_log_signature SET seq=1",
    "insert a second signed head": "INSERT INTO access_log_signature SELECT * FROM access_log_signature",
}


@pytest.mark.parametrize("what", TAMPERING)
@pytest.mark.parametrize("who", ["eve", "owner"])
def test_the_server_refuses_rewriting_the_log_or_its_signed_head(urls: dict[str, str], who: str, what: str) -> None:
    before = Store(urls["owner"]).access_rows(), Store(urls["owner"]).access_log_signature()
    with pytest.raises(RefusedByPolicy):
        _sql(urls[who], TAMPERING[what])
    assert (Store(urls["owner"]).access_rows(), Store(urls["owner"]).access_log_signature()) == before


@pytest.mark.parametrize("sql", ["DELETE FROM sealed_key", "UPDATE sealed_key SET fingerprint='other'",
                                 "TRUNCATE sealed_key"])
def test_an_evaluator_cannot_forget_or_change_the_stores_sealing_key(urls: dict[str, str], sql: str) -> None:
    """Deleting the record of the store's sealing key would let the next writer's different key become the store's,
    and outputs sealed after it unreadable with the owner's key (adversary round): only the owner changes it."""
    _sql(urls["owner"], "INSERT INTO sealed_key VALUES ('fp-of-the-owners-key', now())")
    with pytest.raises(RefusedByPolicy):
        _sql(urls["eve"], sql)
    with Store(urls["owner"]).connect() as con:
        assert con.execute("SELECT fingerprint FROM sealed_key").fetchall() == [("fp-of-the-owners-key",)]


@pytest.mark.parametrize("sql", ["DELETE FROM private_fingerprints", "DELETE FROM private_contents",
                                 "UPDATE private_fingerprints SET digest='other'",
                                 "UPDATE private_contents SET content_sha256='other'", "TRUNCATE private_fingerprints"])
def test_an_evaluator_cannot_erase_the_record_of_a_private_split(urls: dict[str, str], sql: str) -> None:
    """Session 18's adversary: the evaluator role could DELETE the store's record of the private contents it has
    seen and their items' keyed fingerprints, after which a copy of a private split whose manifest left the disk
    was no longer refused under another name or tier (splits.twins). evalgate only ever appends them: only the
    owner changes them."""
    def rows() -> tuple[list[Any], list[Any]]:
        with Store(urls["owner"]).connect() as con:
            return (con.execute("SELECT * FROM private_contents ORDER BY split").fetchall(),
                    con.execute("SELECT * FROM private_fingerprints ORDER BY digest").fetchall())

    from evalgate.splits.twins import remember_private

    remember_private(Store(urls["owner"]), "p", ITEMS, "added")  # as splits add records the fixture's private split
    before = rows()
    assert [r[0] for r in before[0]] == ["p"] and before[1]
    with pytest.raises(RefusedByPolicy):
        _sql(urls["eve"], sql)
    assert rows() == before


def test_an_evaluator_appends_reads_and_signs_the_new_head_only(urls: dict[str, str], as_: Any) -> None:
    store = as_("eve")
    old = store.access_log_signature()
    SplitManager(store).open("s", "tuning", "eve")
    new = store.access_log_signature()
    assert new is not None and old is not None and new.seq == old.seq + 1
    code, out, err = cli_parts("audit", "verify", env={"EVALGATE_STORE": urls["owner"]})
    assert code == 0 and "chain intact (4 rows)" in out, out + err
    with pytest.raises(RefusedByPolicy, match="last row"):  # the genuine older head, again
        _sql(urls["eve"], "SELECT evalgate_sign_head(?, ?, ?, ?, ?)", list(astuple(old)))
    with pytest.raises(RefusedByPolicy, match="last row"):
        _sql(urls["owner"], "SELECT evalgate_sign_head(?, ?, ?, ?, ?)", list(astuple(old)))
    assert Store(urls["owner"]).access_log_signature() == new


def test_only_the_gate_role_logs_a_release_gate_read(urls: dict[str, str], as_: Any) -> None:
    with pytest.raises(RefusedByPolicy, match="release-gate"):
        SplitManager(as_("eve")).open("p", "release-gate", "eve")
    SplitManager(as_("gail")).open("p", "release-gate", "gail")
    rows = [(r.actor, r.outcome) for r in Store(urls["owner"]).access_rows("p")]
    assert rows == [("gail", "read")]
    with pytest.raises(RefusedByPolicy):  # a refusal is logged whoever asks
        SplitManager(as_("eve")).open("p", "tuning", "eve")
    assert [(r.actor, r.outcome) for r in Store(urls["owner"]).access_rows("p")][-1] == ("eve", "refused")


@pytest.mark.parametrize("sql", ["INSERT INTO access_log SELECT * FROM access_log WHERE seq=1",
                                 "UPDATE runs SET status='x'", "DELETE FROM access_log_head",
                                 "SELECT evalgate_sign_head(1, 'x', 'k', 's', now())"])
def test_an_auditor_reads_everything_and_changes_nothing(urls: dict[str, str], sql: str) -> None:
    auditor = Store(urls["audrey"])
    assert [r.actor for r in auditor.access_rows()] == ["a1", "a2", "a3"]
    assert auditor.access_log_signature() == Store(urls["owner"]).access_log_signature()
    with pytest.raises(RefusedByPolicy):
        _sql(urls["audrey"], sql)


def test_an_auditor_verifies_and_summarises_the_log_without_writing(urls: dict[str, str]) -> None:
    env = {"EVALGATE_STORE": urls["audrey"]}
    code, out, err = cli_parts("audit", "verify", env=env)
    assert code == 0 and "chain intact (3 rows)" in out, out + err
    code, out, err = cli_parts("audit", env=env)
    assert code == 0 and "access log: 3 rows, chain intact" in out, out + err


def _session(url: str, *sql: str) -> None:
    """``sql`` in order on one connection (a temporary table lives as long as its session)."""
    with psycopg.connect(url, autocommit=True) as con:
        for q in sql:
            con.execute(q)


SHADOWS = {
    # an evaluator's temporary access_log (searched before the store's schema unless the path lists pg_temp) holding
    # the row it wants signed: the SECURITY DEFINER function must read the real log, and refuse
    "sign a head of a row the log does not hold": (
        "CREATE TEMP TABLE access_log (seq BIGINT, row_hash VARCHAR)",
        "INSERT INTO access_log VALUES (100, 'forged')",
        "SELECT evalgate_sign_head(100, 'forged', 'k', 's', now())"),
    # the release-gate trigger asked the owner of 'access_log'::regclass: the session's temporary table, the
    # evaluator's own; a temporary pg_class is the same attack one level down
    "log a release-gate result through a temporary access_log": (
        "CREATE TEMP TABLE access_log (seq BIGINT)",
        "CREATE TEMP TABLE x AS SELECT * FROM {schema}.access_log WHERE seq=3",
        "UPDATE x SET seq=4, purpose='release-gate', outcome='result'",
        "INSERT INTO {schema}.access_log SELECT * FROM x"),
    "log a release-gate result through a temporary pg_class": (
        "CREATE TEMP TABLE pg_class AS SELECT oid, (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = "
        "current_user) AS relowner FROM pg_catalog.pg_class",
        "CREATE TEMP TABLE x AS SELECT * FROM {schema}.access_log WHERE seq=3",
        "UPDATE x SET seq=4, purpose='release-gate', outcome='read'",
        "INSERT INTO {schema}.access_log SELECT * FROM x"),
}


@pytest.mark.parametrize("what", SHADOWS)
def test_an_evaluators_temporary_tables_do_not_stand_in_for_the_log_or_the_catalog(urls: dict[str, str],
                                                                                  what: str) -> None:
    """Each attack is refused by the server, the log and its signed head unchanged (before migration 48 and the
    trigger's pinned search path, each went through: a signed head of seq 100 with the key 'k', a release-gate
    'result' row an evaluator may not write)."""
    owner = Store(urls["owner"])
    before = owner.access_rows(), owner.access_log_signature()
    with psycopg.connect(urls["eve"]) as con:
        schema = con.execute("SELECT current_schema()").fetchall()[0][0]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _session(urls["eve"], *(q.format(schema=schema) for q in SHADOWS[what]))
    assert (owner.access_rows(), owner.access_log_signature()) == before


def test_grant_roles_command_is_idempotent_and_lists_the_members(urls: dict[str, str]) -> None:
    code, out, err = cli_parts("store", "grant-roles", "--json")  # the fixture granted them through the command
    assert code == 0, err
    doc = json.loads(out)
    assert doc["created"] == [] and doc["roles"] == ROLES
    assert doc["members"] == {ROLES["auditor"]: ["audrey"], ROLES["evaluator"]: ["eve"], ROLES["gate"]: ["gail"]}
    code, out, err = cli_parts("store", "grant-roles")
    assert code == 0 and "roles already there" in out and f"{ROLES['gate']}: gail" in out, out + err
    assert "evalgate_admin@" in out and "host=" not in out  # the server named as user@host:port/dbname


def test_grant_roles_refused_for_a_role_that_is_not_the_owner(urls: dict[str, str]) -> None:
    with_password = urls["eve"].replace("eve@", "eve:hunter2-secret@")
    code, out, err = cli_parts("store", "grant-roles", "--evaluator", "audrey",
                               env={"EVALGATE_STORE": with_password})
    assert code == 2, out + err
    assert "may not grant" in err and "eve@" in err and "nothing was changed" in err
    assert "hunter2-secret" not in out + err and "Traceback" not in err
    assert json.loads(cli_parts("store", "grant-roles", "--json")[1])["members"][ROLES["evaluator"]] == ["eve"]


def test_grant_roles_with_an_unknown_login_changes_nothing(urls: dict[str, str],
                                                           postgres_server: PostgresServer) -> None:
    postgres_server.admin("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'frank') THEN "
                          "CREATE ROLE frank LOGIN; END IF; END $$")
    code, out, err = cli_parts("store", "grant-roles", "--evaluator", "frank", "--gate", "nobody_here")
    assert code == 2 and "has no role 'nobody_here'" in err and "CREATE ROLE nobody_here LOGIN" in err, out + err
    members = json.loads(cli_parts("store", "grant-roles", "--json")[1])["members"]
    assert "frank" not in members[ROLES["evaluator"]]  # one transaction: frank's grant went with the refusal


def test_grant_roles_needs_a_server_store(home: object) -> None:
    code, out, err = cli_parts("store", "grant-roles")
    assert code == 2 and "EVALGATE_STORE=postgresql://" in err and "a store file has no roles" in err, out + err


def _forged(url: str, seq_step: int, prev_hash: str | None) -> list[Any]:
    """The log's last row as a new row ``seq_step`` after it, chained to ``prev_hash`` (None: its real last hash),
    its own hash made up (the server does not recompute it)."""
    last = Store(url).access_rows()[-1]
    row = {**last.as_dict(), "seq": last.seq + seq_step, "prev_hash": prev_hash or last.row_hash,
           "row_hash": "f" * 64, "actor": "mallory"}
    return [row[k] for k in AccessRow.COLUMNS]


@pytest.mark.parametrize("who", ["eve", "owner"])
@pytest.mark.parametrize("what", ["a fork (prev_hash of an older row)", "a gap (seq skips one)"])
def test_the_server_refuses_a_row_that_does_not_chain_to_the_last(urls: dict[str, str], who: str, what: str) -> None:
    owner = Store(urls["owner"])
    rows = owner.access_rows()
    bad = _forged(urls["owner"], 1, rows[0].row_hash) if what.startswith("a fork") else \
        _forged(urls["owner"], 2, None)
    with pytest.raises(RefusedByPolicy, match="does not chain to the log's last row 3"):
        _sql(urls[who], f"INSERT INTO access_log VALUES ({', '.join('?' * len(bad))})", bad)
    assert owner.access_rows() == rows


def test_a_chained_row_with_a_made_up_hash_goes_in_and_audit_verify_finds_it(urls: dict[str, str]) -> None:
    """What the server's chain check does not cover: a row that links to the last one but whose own hash is not the
    hash of its content. The server takes it (it does not hash rows); ``audit verify`` names it."""
    row = _forged(urls["owner"], 1, None)
    _sql(urls["eve"], f"INSERT INTO access_log VALUES ({', '.join('?' * len(row))})", row)
    code, out, err = cli_parts("audit", "verify", env={"EVALGATE_STORE": urls["owner"]})
    assert code == 1 and "first bad row seq 4: row content does not match its hash" in out + err, out + err
