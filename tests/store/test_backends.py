"""The repositories on each backend (a DuckDB file, a PostgreSQL server): one migration history from empty and from
an older schema, and every table group's writes read back as written (the values by hand: a seed at 2**64 - 1,
text holding ``%`` and ``?``, JSON, UTC timestamps, a replaced human score)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from evalgate.store import SampleScore, Store, TurnRow
from evalgate.store.db import open_database
from evalgate.store.dialect import POSTGRESQL, dialect
from evalgate.store.migrations import MIGRATIONS
from tests.helpers.postgres import PostgresServer
from tests.helpers.store_suite import StoreBackend

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

TABLES = {"schema_migrations", "protocols", "checkpoints", "runs", "prompts", "generations", "samples", "access_log",
          "human_scores", "run_prompts", "access_log_head", "sealed_key", "gates", "trajectories", "raters",
          "audit_batches", "audit_batch_items", "audit_rater_seeds", "audit_ratings", "audit_rating_events",
          "form_tokens", "access_log_signature", "rater_sessions", "reward_scores", "private_contents",
          "private_fingerprints"}
"""Every table the migrations create (read off ``evalgate/store/migrations.py`` by hand)."""

MAX_SEED = 2**64 - 1
"""The largest sampling seed (``UBIGINT`` in DuckDB; ``NUMERIC(20)`` on PostgreSQL, which has no unsigned type)."""


def _tables(store: Store) -> set[str]:
    with store.connect() as con:
        rows = con.execute("SELECT table_name FROM information_schema.tables WHERE table_catalog=current_database() "
                           "AND table_schema=current_schema() AND table_type='BASE TABLE'").fetchall()
    return {r[0] for r in rows}


def test_every_migration_applies_from_empty_once(backend_store: Store) -> None:
    assert _tables(backend_store) == TABLES
    with backend_store.connect() as con:
        got = con.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert got == [(v, name) for v, name, _ in MIGRATIONS]
    Store(backend_store.db)  # opened again: nothing applied twice
    with backend_store.connect() as con:
        assert con.execute("SELECT count(*) FROM schema_migrations").fetchone() == (len(MIGRATIONS),)


def test_a_store_migrated_to_migration_4_keeps_its_rows_through_the_rest(store_backend: StoreBackend) -> None:
    """A generation written before migrations 5 and 8 rebuilt the table (11 columns, no prompt or settings hash in
    the key) is still there after them, with an empty settings hash (migration 8's rule)."""
    target = store_backend.fresh()
    old = Store(open_database(target, [m for m in MIGRATIONS if m[0] <= 4]))
    assert "trajectories" not in _tables(old) and "run_prompts" in _tables(old)
    with old.connect() as con:
        con.execute("INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    ["ck", "ph", "q1", 0, MAX_SEED, "p1", "old 100% text?", 3, 2, "stop",
                     datetime(2026, 1, 2, tzinfo=UTC)])
    old.db.close()
    store = Store(open_database(target))
    assert _tables(store) == TABLES
    got = store.cached_generations("ck", "ph", [("q1", 0, MAX_SEED)], {"q1": "p1"}, settings_sha256="")
    assert got == {("q1", 0, MAX_SEED): {"text": "old 100% text?", "completion_tokens": 2, "prompt_tokens": 3,
                                         "finish_reason": "stop", "prompt_sha256": "p1", "run_id": None}}


def test_runs_samples_and_generations_read_back_as_written(backend_store: Store) -> None:
    store = backend_store
    store.upsert_checkpoint("d1", "/ck/a", "hf", "train-1", 7, 800)
    store.create_run({"run_id": "r1", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "ph",
                      "checkpoint_digest": "d1", "checkpoint_path": "/ck/a", "split": "s", "tier": "dev",
                      "split_sha256": "ss", "sampling_seed": 2**63 - 1, "backend": "replay",
                      "effective_params": {"temperature": 0.5, "stop": ["?", "%"]}})
    samples = [{"item_id": "q1", "sample_index": 0, "seed": MAX_SEED, "score": 1.0, "status": "ok",
                "extracted": "50%", "detail": "why?", "cached": False, "behavior": {"len": 3}},
               {"item_id": "q2", "sample_index": 1, "seed": 0, "score": 0.25, "status": "ok",
                "extracted": None, "detail": None, "cached": True, "behavior": None}]
    store.put_generations("d1", "ph", [{"item_id": "q1", "sample_index": 0, "seed": MAX_SEED, "prompt_sha256": "p1",
                                        "text": "it is 50% ? yes", "prompt_tokens": 4, "completion_tokens": 5,
                                        "finish_reason": "length"}], {"p1": "what's 50%?"}, "", run_id="r1")
    # a one-item run's standard error is NaN (PostgreSQL's JSON type refused it before migration 50)
    store.finish_run({"run_id": "r1", "metrics": {"pass@1": 0.625, "pass@1_stderr": math.nan}, "counts": {"ok": 2}},
                     samples)
    (run,) = store.runs(split="s")
    assert run.status == "complete" and run.sampling_seed == 2**63 - 1
    assert run.effective_params == {"temperature": 0.5, "stop": ["?", "%"]}
    assert run.metrics is not None and run.metrics["pass@1"] == 0.625 and math.isnan(run.metrics["pass@1_stderr"])
    assert run.started_at.utcoffset().total_seconds() == 0 and run.finished_at >= run.started_at
    assert store.sample_scores("r1") == [SampleScore("q1", 0, 1.0, "ok"), SampleScore("q2", 1, 0.25, "ok")]
    got = store.samples("r1")
    assert [(s.seed, s.extracted, s.detail, s.cached, s.behavior, s.text, s.prompt)
            for s in got] == [(MAX_SEED, "50%", "why?", False, {"len": 3}, "it is 50% ? yes", "what's 50%?"),
                              (0, None, None, True, {}, None, None)]
    assert store.recorded_checkpoint("/ck/a") == "d1"
    frame = store.frame("SELECT item_id, seed, score FROM samples WHERE run_id=? ORDER BY item_id", ["r1"], "arrow")
    assert frame.column_names == ["item_id", "seed", "score"]
    assert frame.to_pylist() == [{"item_id": "q1", "seed": MAX_SEED, "score": 1.0},
                                 {"item_id": "q2", "seed": 0, "score": 0.25}]


def test_turns_rewards_gates_and_protocols_read_back_as_written(backend_store: Store) -> None:
    store = backend_store
    turn = {"item_id": "q1", "sample_index": 0, "seed": MAX_SEED, "turn": 0, "turn_seed": 5, "prompt_sha256": "p",
            "text": "call 100%?", "prompt_tokens": 3, "completion_tokens": 4, "finish_reason": "stop",
            "calls": [{"name": "python", "arguments": {"code": "print('?')"}}], "parse_error": None,
            "violation": None, "ended": "answer", "gen_s": 0.5, "tool_s": 0.25}
    store.create_run({"run_id": "r1", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "ph",
                      "checkpoint_digest": "d1", "checkpoint_path": "/ck", "split": "s", "tier": "dev",
                      "split_sha256": "ss", "sampling_seed": 1, "backend": "replay"})
    store.put_turns("d1", "ph", "st", [turn], "r1")
    store.put_turns("d1", "ph", "st", [{**turn, "text": "second write"}], "r1")  # a stored turn is kept
    (got,) = store.trajectory_turns("d1", "ph", "st", ["q1"], split_sha256="ss")
    assert isinstance(got, TurnRow) and {k: getattr(got, k) for k in turn} == turn and got.run_id == "r1"
    store.put_rewards("rm", "hf", {"pair1": 0.75})
    store.put_rewards("rm", "hf", {"pair1": 9.0, "pair2": -1.5})  # the first value of a pair is kept
    assert store.cached_rewards("rm", "hf", ["pair1", "pair2", "pair3"]) == {"pair1": 0.75, "pair2": -1.5}
    store.record_protocol("p", "1", "a" * 64, {"sampling": {"n": 4}})
    assert store.protocol_resolved("p", "1") == ("a" * 64, {"sampling": {"n": 4}})
    store.put_gate({"gate_id": "g1", "name": "ship", "policy_sha256": "x", "protocol_hash": "ph",
                    "inputs_sha256": "i", "inputs": {"runs": ["r1"]}, "decision_runs": ["r1"], "verdict": "PASS",
                    "reason": "ok", "reasons": [], "document": '{"delta": NaN}', "actor": "me"})
    (gate,) = store.gates(gate_id="g1")  # the document is VARCHAR: it may hold NaN, which JSON columns refuse
    assert math.isnan(gate.document["delta"]) and gate.inputs == {"runs": ["r1"]}


def test_a_human_score_given_twice_keeps_the_last(backend_store: Store) -> None:
    row = {"split": "ha", "item_id": "q1", "run_id": "", "sample_index": -1, "rater": "ann", "score": 2.0,
           "auto_score": None, "note": None, "source_sha256": "f", "imported_by": "me",
           "imported_at": datetime(2026, 1, 1, tzinfo=UTC)}
    backend_store.put_human_scores([row, {**row, "score": 4.0}])
    backend_store.put_human_scores([{**row, "score": 3.0, "rater": "bob"}])
    assert [(r.rater, r.score) for r in backend_store.human_scores("ha")] == [("ann", 4.0), ("bob", 3.0)]


@pytest.mark.server_only("a PostgreSQL URL selects the server store")
def test_the_postgresql_store_is_selected_by_its_url_and_named_without_a_password(
        postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.workspace import Workspace

    url = postgres_server.create_schema()
    monkeypatch.setenv("EVALGATE_STORE", url)
    store = Workspace.from_env().store
    with store.connect() as con:
        assert dialect(con) == POSTGRESQL
    assert store.location.startswith("postgresql://evalgate_admin@") and "options=-csearch_path=t_" in store.location
    ws = Workspace(store=url.replace("evalgate_admin@", "evalgate_admin:s3cret@"))
    assert "s3cret" not in ws.store.location and "s3cret" not in repr(ws.store.db)
