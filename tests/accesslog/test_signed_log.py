"""The access log is tamper-evident without trusting the store (issue 27): every append signs the new head with an
Ed25519 key kept outside the store; 'audit verify' and every gate check the newest signed head, so a log that was
rewritten, re-hashed and given a rewritten stored head fails without that key. A gate takes --expect-head (or
$EVALGATE_EXPECT_HEAD; its policy can require one); the empty head matches only an empty log; the head 'audit'
prints is one --expect-head accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import evalgate.gate.report.outputs as report_mod
from evalgate.access.log import GENESIS_HASH, row_hash
from evalgate.cli import main
from evalgate.core.errors import RefusedByPolicy
from evalgate.gate import load_policy, run_gate
from evalgate.splits import SplitManager, write_split
from evalgate.store import Store
from tests import gate_fixtures as fx
from tests.helpers.postgres import admin_edit
from tests.helpers.store_suite import StoreBackend

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server
ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]
PASSING = {"min_seeds": 2, "reward_hacking": False}
COLS = ["seq", "ts", "actor", "ci", "split", "tier", "purpose", "outcome", "cached", "checkpoint_digest",
        "protocol_hash", "run_id", "detail", "prev_hash", "row_hash"]


def verify(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["audit", "verify", *args])
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes else "")


def rewrite_log(keep: Any) -> int:
    """What someone who can write the store (and lacks the key) does: drop the rows ``keep`` rejects, renumber and
    re-hash the whole chain (with the module's own hash function, as anyone can), and rewrite the stored head to
    the new last row; on a server, as its administrator with the triggers off (``admin_edit``). Returns the number
    of rows left."""
    with admin_edit(Store()) as con:
        cur = con.execute(f"SELECT {', '.join(COLS)} FROM access_log ORDER BY seq")
        rows = [dict(zip(COLS, r, strict=True)) for r in cur.fetchall()]
        kept, prev = [], GENESIS_HASH
        for r in (r for r in rows if keep(r)):
            r = {**r, "seq": len(kept) + 1, "prev_hash": prev}
            r["row_hash"] = prev = row_hash(prev, r)
            kept.append(r)
        con.execute("DELETE FROM access_log")
        for r in kept:
            con.execute(f"INSERT INTO access_log ({', '.join(COLS)}) VALUES ({', '.join('?' * len(COLS))})",
                        [r[c] for c in COLS])
        con.execute("UPDATE access_log_head SET seq=?, row_hash=?, broken_seq=NULL, broken_reason=NULL",
                    [len(kept), prev])
    return len(kept)


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Any]:
    return fx.build(tmp_path / "runs", seeds=(1, 2))


def _policy_file(tmp_path: Path, **extra: Any) -> Path:
    d = {**fx.policy_dict(str(tmp_path / "runs" / "baseline"), **PASSING), **extra}
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def _cli_gate(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Any:
    """``evalgate gate`` over the fixtures: their decision runs are stored, not evaluated (no model here)."""
    monkeypatch.setattr(report_mod, "run_gate",
                        lambda p, s, a, **k: run_gate(p, s, a, evaluate_decision=False, **k))
    return CliRunner().invoke(main, ["gate", *args])


def test_a_rehashed_log_with_a_rewritten_head_fails_verify_and_the_gate(
        tmp_path: Path, home: Path, built: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    store = built["store"]
    pol = _policy_file(tmp_path)
    assert _cli_gate(monkeypatch, ["--policy", str(pol)]).exit_code == 0
    reads = [r for r in store.access_rows("fx-private") if r.outcome == "read"]
    assert len(reads) == 3 and verify()[0] == 0
    # The private reads deleted, the chain re-hashed, the stored head rewritten: the chain alone is consistent
    # again, and the budget is refunded.
    left = rewrite_log(lambda r: not (r["split"] == "fx-private" and r["outcome"] == "read"))
    assert left == len(store.access_rows()) and not [r for r in store.access_rows("fx-private")
                                                     if r.outcome == "read"]
    code, out = verify()
    assert code == 1 and "signed head" in out
    with pytest.raises(RefusedByPolicy, match="signed head"):
        run_gate(load_policy(pol), store, evaluate_decision=False)
    rows = len(store.access_rows())
    r = _cli_gate(monkeypatch, ["--policy", str(pol), "--json"])
    assert r.exit_code == 2 and json.loads(r.output)["reason"] == "refused", r.output
    assert len(store.access_rows()) == rows  # refused before any read: nothing logged, nothing spent


def _new_key_pem() -> bytes:
    """A fresh Ed25519 private key as PEM, the form of the key file (``cryptography``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption())


@pytest.mark.not_in_memory("reads the bytes the store keeps at rest")
def test_the_signing_key_lives_outside_the_store_and_another_key_fails(
        home: Path, tmp_path: Path, store_backend: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    write_split("s", "dev", ITEMS, {"source": "test"})
    SplitManager(Store()).open("s", "tuning", "a1")
    key = home / "config" / "evalgate" / "log-signing.key"  # beside the private-split key (XDG_CONFIG_HOME)
    assert key.is_file() and key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert key.read_bytes() not in store_backend.at_rest()
    assert verify()[0] == 0
    monkeypatch.setenv("EVALGATE_LOG_KEY_FILE", str(tmp_path / "other.key"))
    code, out = verify()  # no key at that path: nothing to check the signature with
    assert code == 2 and "NOT VERIFIED" in out and "EVALGATE_LOG_KEY" in out
    SplitManager(Store()).open("s", "tuning", "a2")  # appended unsigned: no key of its own is made for a signed store
    assert not (tmp_path / "other.key").exists()
    assert verify()[0] == 2
    (tmp_path / "other.key").write_bytes(_new_key_pem())
    code, out = verify()  # a different key cannot vouch for the head key 1 signed
    assert code == 1 and "does not verify with this key" in out
    monkeypatch.setenv("EVALGATE_LOG_KEY_FILE", str(key))
    code, out = verify()  # with the right key: row 2 was appended unsigned by the other key's holder
    assert code == 1 and "rows 2-2 follow the signed head 1 unsigned" in out


def test_audit_names_why_a_budget_is_unknown_when_only_the_signed_head_fails(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    write_split("p", "public", ITEMS, {"source": "test"})  # public: a read budget, so 'audit' prints its line
    SplitManager(Store()).open("p", "evaluation", "a1")  # row 1, signed by the default key
    key = home / "config" / "evalgate" / "log-signing.key"
    monkeypatch.setenv("EVALGATE_LOG_KEY_FILE", str(tmp_path / "other.key"))
    SplitManager(Store()).open("p", "evaluation", "a2")  # row 2, appended without the key that signs the store
    monkeypatch.setenv("EVALGATE_LOG_KEY_FILE", str(key))
    out = CliRunner().invoke(main, ["audit"]).output
    # the chain itself is intact (no first bad row); the budget line used to say 'chain broken at row None'
    assert "row None" not in out
    assert "unknown: log not verified from row 2 (signed head" in out
    monkeypatch.setenv("EVALGATE_LOG_KEY_FILE", str(tmp_path / "missing.key"))
    assert "unknown: log not verified (no signing key" in CliRunner().invoke(main, ["audit"]).output
    monkeypatch.setenv("EVALGATE_LOG_KEY_FILE", str(key))
    SplitManager(Store()).open("p", "evaluation", "a1")  # the next append warns, saying how to recover
    err = capsys.readouterr().err
    assert "rows 2-2 follow the signed head 1 unsigned" in err and "'evalgate audit sign'" in err
    assert "who edited the store" not in err  # nobody edited it: a row was appended without the key
    assert CliRunner().invoke(main, ["audit", "sign"]).exit_code == 0 and verify()[0] == 0


def test_a_ci_secret_key_signs_and_verifies(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()).decode()
    monkeypatch.setenv("EVALGATE_LOG_KEY", pem)
    write_split("s", "dev", ITEMS, {"source": "test"})
    SplitManager(Store()).open("s", "tuning", "ci-bot")
    assert not (home / "config" / "evalgate" / "log-signing.key").exists()  # the secret was used, no file made
    assert verify()[0] == 0
    monkeypatch.delenv("EVALGATE_LOG_KEY")
    assert verify()[0] == 2  # a CI step without the secret cannot check the log


def test_an_unsigned_row_appended_with_a_valid_hash_fails(home: Path) -> None:
    write_split("s", "dev", ITEMS, {"source": "test"})
    SplitManager(Store()).open("s", "tuning", "a1")
    rewrite_log(lambda r: True)  # nothing removed, only re-hashed: the same hashes
    assert verify()[0] == 0
    last = Store().access_rows()[-1]
    forged = {**last.as_dict(), "seq": 2, "actor": "mallory", "prev_hash": last.row_hash}
    forged["row_hash"] = row_hash(last.row_hash, forged)
    with admin_edit(Store()) as con:
        con.execute(f"INSERT INTO access_log ({', '.join(COLS)}) VALUES ({', '.join('?' * len(COLS))})",
                    [forged[c] for c in COLS])
        con.execute("UPDATE access_log_head SET seq=2, row_hash=?", [forged["row_hash"]])
    code, out = verify()
    assert code == 1 and "rows 2-2 follow the signed head 1 unsigned" in out


def test_gate_takes_expect_head(tmp_path: Path, built: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    pol = _policy_file(tmp_path)
    store = built["store"]
    assert _cli_gate(monkeypatch, ["--policy", str(pol)]).exit_code == 0
    code, out = verify("--json")
    head = json.loads(out)["head"]
    pinned = f"{head['seq']}:{head['hash']}"
    r = _cli_gate(monkeypatch, ["--policy", str(pol), "--expect-head", pinned])
    assert r.exit_code == 0, r.output
    # a store rolled back to before the pinned head (here: its last rows gone, head and signature as they were
    # at row 2, which a copy of the store from then would hold) is refused before any read
    later = f"{head['seq'] + 50}:{'ab' * 32}"
    rows = len(store.access_rows())
    r = _cli_gate(monkeypatch, ["--policy", str(pol), "--expect-head", later, "--json"])
    assert r.exit_code == 2 and "does not hold the expected head" in json.loads(r.output)["error"], r.output
    assert len(store.access_rows()) == rows
    monkeypatch.setenv("EVALGATE_EXPECT_HEAD", later)  # the same from the environment (a CI variable)
    assert _cli_gate(monkeypatch, ["--policy", str(pol)]).exit_code == 2
    bad = _cli_gate(monkeypatch, ["--policy", str(pol), "--expect-head", "5:abc"])
    assert bad.exit_code == 2 and "SEQ:HASH" in bad.output


def test_a_policy_can_require_an_expected_head(tmp_path: Path, built: dict[str, Any],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pol = _policy_file(tmp_path, require_expect_head=True)
    store = built["store"]
    r = _cli_gate(monkeypatch, ["--policy", str(pol), "--json"])
    assert r.exit_code == 2 and "require_expect_head" in json.loads(r.output)["error"], r.output
    assert store.access_rows("fx-private") == []  # nothing read
    code, out = verify("--json")
    head = json.loads(out)["head"]
    monkeypatch.setenv("EVALGATE_EXPECT_HEAD", f"{head['seq']}:{head['hash']}")
    assert _cli_gate(monkeypatch, ["--policy", str(pol)]).exit_code == 0


def test_the_empty_head_matches_only_an_empty_log(home: Path) -> None:
    empty = f"0:{GENESIS_HASH}"
    Store()
    assert verify("--expect-head", empty)[0] == 0  # a first run pinned this before anything was read: still true
    write_split("s", "dev", ITEMS, {"source": "test"})
    SplitManager(Store()).open("s", "tuning", "a1")
    code, out = verify("--expect-head", empty)  # any store with reads is not that log
    assert code == 1 and "empty head matches only an empty log" in out
    assert verify("--expect-head", f"0:{'ab' * 32}")[0] == 2  # row 0 has only the genesis hash


def test_the_head_audit_prints_is_one_expect_head_accepts(home: Path) -> None:
    write_split("s", "dev", ITEMS, {"source": "test"})
    SplitManager(Store()).open("s", "tuning", "a1")
    text = CliRunner().invoke(main, ["audit"]).output
    m = re.search(r"head (\d+:[0-9a-f]+)\)", text)
    assert m, text
    code, out = verify("--expect-head", m.group(1))
    assert code == 0, out


def test_a_backdated_and_rehashed_read_fails(home: Path) -> None:
    from datetime import timedelta

    write_split("s", "dev", ITEMS, {"source": "test"})
    for actor in ("a1", "a2", "a3"):
        SplitManager(Store()).open("s", "tuning", actor)

    def backdate(r: dict[str, Any]) -> bool:  # move read 2 out of any 30-day budget window
        if r["actor"] == "a2":
            r["ts"] = r["ts"] - timedelta(days=60)
        return True

    assert rewrite_log(backdate) == 3
    code, out = verify()
    assert code == 1 and "row 3 no longer has its signed hash" in out


def test_the_heads_read_together_are_the_heads_read_one_by_one(home: Path) -> None:
    """An append reads the verified and the signed head in one statement (``access_log_heads``) and moves each with
    one ``UPDATE``, inserting it only where there was none: empty before the first read; after three reads both at
    row 3, one row each; a head recorded without a signature reads as such."""
    store = Store()
    assert store.access_log_heads() == (None, None)
    write_split("s", "dev", ITEMS, {"source": "test"})
    for purpose in ("a1", "a2", "a3"):
        SplitManager(Store()).open("s", "tuning", purpose)
    verified, signed = store.access_log_heads()
    assert (verified, signed) == (store.access_log_head(), store.access_log_signature())
    last = store.access_rows()[-1]
    assert verified is not None and (verified.seq, verified.row_hash, verified.broken_seq) == (3, last.row_hash,
                                                                                               None)
    assert signed is not None and (signed.seq, signed.row_hash) == (3, last.row_hash)
    with store.connect() as con:
        assert [con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("access_log_head", "access_log_signature")] == [1, 1]
    with admin_edit(store) as con:
        con.execute("DELETE FROM access_log_signature")
    assert store.access_log_heads() == (store.access_log_head(), None)
