"""Issue 13, point 1: nothing derived from a private or human-audit item is in plain text at rest. The store file (and
any write-ahead log) and every file the gate writes are scanned byte by byte for each private item's question and
gold answer, after a real gate (the tiny random checkpoint: what the model writes is sealed whatever it says; the
worst completion, one repeating the question and answer, comes from a scripted server below); a dev item's text,
stored in clear on purpose, proves the scan sees plain text. Authorised reads decrypt; the cache still hits; a
missing or wrong key is refused before anything is written; migration 9 seals an existing store's plain-text rows."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.fernet import Fernet

from evalgate.core.errors import RefusedByPolicy
from evalgate.demo.train import addition_items
from evalgate.keys.sealing import SEALED_PREFIX, UNREADABLE, Sealer, sealer
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from evalgate.store.db import open_database
from evalgate.store.migrations import MIGRATIONS
from tests.conftest import REPO
from tests.helpers.cli import cli
from tests.helpers.http_server import serve_in_thread
from tests.helpers.store_suite import StoreBackend

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

# Distinctive texts: none can occur in a store or report by chance.
PRIVATE = [{"id": "zq-1", "question": "Zephyrine quokka ledger 4471: what is 860217000 plus 493?",
            "answer": "860217493"},
           {"id": "zq-2", "question": "Obsidian marmot tally 9083: what is 735190000 plus 268?",
            "answer": "735190268"}]
HUMAN_AUDIT = [{"id": "ha-1", "question": "Tangerine axolotl survey 3317: what is 512340000 plus 977?",
                "answer": "512340977"}]
DEV_MARKER = "Cobalt heron census 5521: what is 2 plus 2?"


def _secrets(items: list[dict]) -> list[bytes]:
    return [x.encode() for it in items for x in (it["question"], it["answer"])]




def _protocol(home: Path) -> Path:
    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto.update(name="seal-test")
    proto["sampling"]["max_tokens"] = 4
    path = home / "seal-test.yaml"
    path.write_text(yaml.safe_dump(proto))
    assert cli("protocol", "freeze", path).exit_code == 0
    return path


def _counts() -> dict[str, int]:
    with Store().connect() as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
                for t in ("runs", "generations", "samples", "prompts", "run_prompts")}


def test_gate_leaves_no_private_text_at_rest(home: Path, tiny_checkpoint: Path, store_backend: StoreBackend) -> None:
    write_split("seal-dev", "dev", [{"id": "dev-marker", "question": DEV_MARKER, "answer": "4"},
                                    *addition_items("dev", 1)], {"source": "test"})
    write_split("seal-private", "private", PRIVATE, {"source": "test"})
    ppath = _protocol(home)
    evaluate(ppath, tiny_checkpoint, "seal-dev", RunOptions(train_run="r", train_seed=1, step=1, progress=False),
             store=Store())
    policy = home / "g.yaml"
    policy.write_text(yaml.safe_dump({
        "name": "seal", "protocol": "seal-test@1", "protocol_file": str(ppath), "selection_split": "seal-dev",
        "decision_split": "seal-private", "baseline": {"value": 0.0},
        # the log-based rules off: no training log here, and a rule that cannot check fails before any private read
        "rules": {"min_seeds": 1, "max_truncation_rate": 1.0, "training_guards": False, "reward_hacking": False}}))
    out = {k: home / "out" / f"gate.{k}" for k in ("html", "xml", "json", "md")}
    g = cli("gate", "--policy", str(policy), "--json", "--report", str(out["html"]), "--junit", str(out["xml"]),
             "--json-out", str(out["json"]), "--markdown", str(out["md"]))
    assert g.exit_code in (0, 1), g.output
    run_id = json.loads(g.stdout)["seeds"][0]["decision"]["run_id"]
    # run --json of the private split: refused (the gate's purpose only), and its error document holds no item
    r = cli("run", "--protocol", str(ppath), "--checkpoint", str(tiny_checkpoint), "--split", "seal-private", "--json")
    assert r.exit_code == 2

    stored = store_backend.at_rest()
    assert DEV_MARKER.encode() in stored  # the scan sees plain text where it is allowed
    written = b"".join(p.read_bytes() for p in out.values()) + (g.output + r.output).encode()
    assert [s for s in _secrets(PRIVATE) if s in stored] == []
    assert [s for s in _secrets(PRIVATE) if s in written] == []

    # an authorised read decrypts; the prompt hash is the keyed digest, not a bare sha256
    rows = Store()._samples(run_id)  # private-tier samples: only the store's own reader decrypts them
    assert [r.item_id for r in rows] == ["zq-1", "zq-2"]
    assert PRIVATE[0]["question"] in rows[0].prompt and rows[0].text is not None
    (rp,) = [x for x in Store().run_prompts(run_id) if x.item_id == "zq-1"]
    assert rp.prompt_sha256 == sealer().digest(rp.text) != hashlib.sha256(rp.text.encode()).hexdigest()

    # the same gate again reuses its stored decision (nothing read); a changed policy decides afresh
    same = cli("gate", "--policy", str(policy), "--json")
    assert same.exit_code in (0, 1) and json.loads(same.stdout)["reused_from"]["gate_id"], same.output
    policy.write_text(policy.read_text().replace("name: seal", "name: seal-again"))
    again = cli("gate", "--policy", str(policy), "--json")
    assert again.exit_code in (0, 1) and json.loads(again.stdout)["reused_from"] is None, again.output
    # issue 27: the same checkpoint, protocol, split content and settings: the stored result is shown again (a
    # logged, uncharged re-read), nothing is evaluated
    assert json.loads(again.stdout)["seeds"][0]["decision"]["run_id"] == run_id
    assert json.loads(again.stdout)["rereads"] == [run_id]

    # a wrong key, then none, on a changed policy (no stored decision is reused; a re-read needs the key too):
    # refused (exit 2), nothing written
    policy.write_text(policy.read_text().replace("name: seal-again", "name: seal-third"))
    before = _counts()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVALGATE_PRIVATE_KEY", Fernet.generate_key().decode())
        wrong = cli("gate", "--policy", str(policy))
        assert wrong.exit_code == 2 and "key" in wrong.output, wrong.output
        with pytest.raises(RefusedByPolicy, match="does not decrypt"):
            Store()._samples(run_id)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(home / "nokey"))
        # only the private key is missing here, not the access log's signing key
        mp.setenv("EVALGATE_LOG_KEY_FILE", str(home / "config" / "evalgate" / "log-signing.key"))
        missing = cli("gate", "--policy", str(policy))
        assert missing.exit_code == 2 and "no key was found" in missing.output, missing.output
    assert _counts() == before


def test_human_audit_run_is_sealed_and_its_export_is_plain(home: Path, tiny_checkpoint: Path,
                                                           store_backend: StoreBackend) -> None:
    write_split("ha", "human-audit", HUMAN_AUDIT, {"source": "test"})
    ppath = _protocol(home)
    doc = evaluate(ppath, tiny_checkpoint, "ha", RunOptions(progress=False), store=Store())
    assert [s for s in _secrets(HUMAN_AUDIT) if s in store_backend.at_rest()] == []
    (row,) = Store().samples(doc["run_id"])
    assert HUMAN_AUDIT[0]["question"] in row.prompt
    # the explicit human-audit export is where these texts may be read in clear
    out = home / "audit.jsonl"
    r = cli("splits", "export-audit", "ha", "--run", doc["run_id"], "--out", out)
    assert r.exit_code == 0, r.output
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert rec["completion"] == row.text and rec["item"]["question"] == HUMAN_AUDIT[0]["question"]
    rec.update(human_score=1.0, note=f"rater quotes: {HUMAN_AUDIT[0]['question']}")
    out.write_text(json.dumps(rec) + "\n")
    assert cli("splits", "import-audit", out).exit_code == 0
    assert HUMAN_AUDIT[0]["question"].encode() not in store_backend.at_rest()
    assert Store().human_scores("ha")[0].note == rec["note"]


def test_human_audit_run_without_key_is_refused_and_logged(home: Path, tiny_checkpoint: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    write_split("ha", "human-audit", HUMAN_AUDIT, {"source": "test"})
    ppath = _protocol(home)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "nokey"))
    r = cli("run", "--protocol", str(ppath), "--checkpoint", str(tiny_checkpoint), "--split", "ha", "--json")
    assert r.exit_code == 2 and "encrypted at rest" in r.output, r.output
    assert Store().runs() == []
    log = Store().access_rows("ha")
    assert log[-1].outcome == "refused" and "no key was found" in log[-1].detail


def _store_at_migration_8(target: str) -> None:
    """A store as evalgate wrote it before encryption at rest: migrations 1-8 and one private run in plain text."""
    old = open_database(target, MIGRATIONS[:8])
    with old.transaction() as con:
        _old_private_run(con)
    old.close()


def _old_private_run(con: Any) -> None:
    q = PRIVATE[0]["question"]
    con.execute("INSERT INTO runs (run_id, status, protocol_name, protocol_version, protocol_hash, checkpoint_digest, "
                "checkpoint_path, split, tier, split_sha256, sampling_seed, backend, started_at) VALUES "
                "('old', 'complete', 'p', '1', 'ph', 'ck', '/ck', 'seal-private', 'private', 'x', 0, 'hf', "
                "current_timestamp)")
    con.execute("INSERT INTO runs (run_id, status, protocol_name, protocol_version, protocol_hash, checkpoint_digest, "
                "checkpoint_path, split, tier, split_sha256, sampling_seed, backend, started_at, error) VALUES "
                "('old-failed', 'failed', 'p', '1', 'ph', 'ck', '/ck', 'seal-private', 'private', 'x', 0, 'hf', "
                "current_timestamp, ?)", [f"EngineError: HTTP 400: bad prompt {q!r}"])
    con.execute("INSERT INTO prompts VALUES ('h1', ?)", [f"<user>{q}</user>"])
    con.execute("INSERT INTO run_prompts VALUES ('old', 'zq-1', 'h1', 10, 1, false, false)")
    con.execute("INSERT INTO generations VALUES ('ck', 'ph', 'zq-1', 0, 7, 'h1', ?, 10, 3, 'stop', "
                "current_timestamp, '', 'old')", [f"I think {PRIVATE[0]['answer']} done"])
    con.execute("INSERT INTO samples VALUES ('old', 'zq-1', 0, 7, 1.0, 'scored', ?, ?, false, '{}')",
                [PRIVATE[0]["answer"], f"expected {PRIVATE[0]['answer']}"])


def test_migration_9_seals_an_existing_store_or_refuses_without_the_key(
        home: Path, store_backend: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    write_split("seal-private", "private", PRIVATE, {"source": "test"})  # creates the key
    (home / "home").mkdir(parents=True, exist_ok=True)
    _store_at_migration_8(store_backend.target)
    secrets = _secrets(PRIVATE[:1])
    assert all(s in store_backend.at_rest() for s in secrets)  # the old store holds them in clear

    with monkeypatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(home / "nokey"))
        with pytest.raises(RefusedByPolicy, match="plain-text values derived from private"):
            Store()
    old = open_database(store_backend.target, MIGRATIONS[:8])
    with old.transaction() as con:  # refused: nothing changed
        assert con.execute("SELECT max(version) FROM schema_migrations").fetchone() == (8,)
        assert con.execute("SELECT text FROM generations").fetchone() == (f"I think {PRIVATE[0]['answer']} done",)
    old.close()

    store = Store()
    # the tables: the file (and its .wal), or the server's data files; its write-ahead log still holds the rows as
    # they were inserted before migration 9, until its segments are recycled (docs/STORE.md, "Sealed text")
    assert [s for s in secrets if s in store_backend.at_rest(server_wal=False)] == []
    (row,) = store._samples("old")  # a private-tier run: Store.samples refuses it (issue 27)
    assert (row.extracted, row.detail) == (PRIVATE[0]["answer"], f"expected {PRIVATE[0]['answer']}")
    assert row.text == f"I think {PRIVATE[0]['answer']} done" and PRIVATE[0]["question"] in row.prompt
    (failed,) = store.runs(run_id="old-failed")
    assert failed.error == f"EngineError: HTTP 400: bad prompt {PRIVATE[0]['question']!r}"
    with store.connect() as con:
        assert con.execute("SELECT text FROM generations").fetchone()[0].startswith(SEALED_PREFIX)


class _Parrot(BaseHTTPRequestHandler):
    """An OpenAI-compatible completions server on loopback whose model repeats the private question and its gold
    answer: the worst completion for encryption at rest."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        text = f"{HUMAN_AUDIT[0]['question']} {HUMAN_AUDIT[0]['answer']}"
        payload = json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 5, "completion_tokens": 9}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


def test_openai_backend_completions_are_sealed(home: Path, tiny_checkpoint: Path, store_backend: StoreBackend) -> None:
    write_split("ha", "human-audit", HUMAN_AUDIT, {"source": "test"})
    ppath = _protocol(home)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Parrot)
    serve_in_thread(server)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        doc = evaluate(ppath, tiny_checkpoint, "ha", RunOptions(backend="openai", backend_options={"base_url": url},
                                                           progress=False), store=Store())
    finally:
        server.shutdown()
        server.server_close()
    assert doc["counts"]["generated"] == 1
    assert [s for s in _secrets(HUMAN_AUDIT) if s in store_backend.at_rest()] == []
    (row,) = Store().samples(doc["run_id"])
    assert row.text.startswith(HUMAN_AUDIT[0]["question"]) and row.extracted == HUMAN_AUDIT[0]["answer"]


def test_a_failed_private_runs_error_is_sealed_and_listings_work_without_the_key(
        home: Path, store_backend: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    write_split("seal-private", "private", PRIVATE, {"source": "test"})
    store = Store()
    store.create_run({"run_id": "f", "status": "running", "protocol_name": "p", "protocol_version": "1",
                      "protocol_hash": "ph", "checkpoint_digest": "ck", "checkpoint_path": "/ck",
                      "split": "seal-private", "tier": "private", "split_sha256": "x", "sampling_seed": 0,
                      "backend": "openai", "started_at": datetime.now(UTC)})
    error = f"EngineError: HTTP 400 from the server: prompt {PRIVATE[1]['question']!r} too long"
    store.fail_run("f", error)
    assert PRIVATE[1]["question"].encode() not in store_backend.at_rest()
    assert store.runs(run_id="f")[0].error == error
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "nokey"))  # a store made now has no key
    assert Store().runs(run_id="f")[0].error == UNREADABLE  # `evalgate runs` still lists it


def test_a_completion_that_looks_sealed_is_still_encrypted() -> None:
    s = Sealer(Fernet.generate_key())
    tricky = SEALED_PREFIX + PRIVATE[0]["question"]
    sealed = s.seal(tricky)
    assert sealed is not None and PRIVATE[0]["question"] not in sealed and s.open(sealed) == tricky
    assert s.open("plain dev text") == "plain dev text" and s.seal(None) is None
    with pytest.raises(RefusedByPolicy, match="does not decrypt"):
        Sealer(Fernet.generate_key()).open(sealed)
