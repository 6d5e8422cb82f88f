"""The store's readers return typed rows (``evalgate.store.rows``): runs, samples, sample scores, gates, human scores
and ratings; each row still reads by key for one release with a ``DeprecationWarning``, and ``evalgate runs --json``
prints what it did."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from datetime import timedelta

import pytest

from evalgate.access import log as accesslog
from evalgate.core.results import Metrics
from evalgate.store import (
    AccessRow,
    BatchItem,
    BatchRow,
    GateRow,
    HumanScore,
    RaterRow,
    RatingEvent,
    RatingRow,
    RunPrompt,
    RunRow,
    SampleRow,
    SampleScore,
    Store,
    TurnRow,
)
from tests.helpers.cli import cli_parts

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

RUN = {"run_id": "r1", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "ph",
       "checkpoint_digest": "d1", "checkpoint_path": "/ck/seed-1/checkpoint-800", "train_run": "t", "train_seed": 1,
       "step": 800, "split": "dev", "tier": "dev", "split_sha256": "ss", "sampling_seed": 7, "backend": "hf",
       "effective_params": {"temperature": 0.0}}


def _stored_run(store: Store) -> None:
    """Run r1 complete with two scored samples, one with its generation and prompt in the cache."""
    store.create_run(RUN)
    store.put_generations("d1", "ph", [{"item_id": "q1", "sample_index": 0, "seed": 11, "prompt_sha256": "p1",
                                        "text": "4", "prompt_tokens": 3, "completion_tokens": 1,
                                        "finish_reason": "stop"}], {"p1": "2+2?"}, "", run_id="r1")
    store.finish_run({"run_id": "r1", "metrics": {"pass@1": 0.5, "pass@1_stderr": 0.5}, "counts": {"items": 2}},
                     [{"item_id": "q1", "sample_index": 0, "seed": 11, "score": 1.0, "status": "correct",
                       "extracted": "4", "cached": False, "behavior": {"len": 1}},
                      {"item_id": "q2", "sample_index": 0, "seed": 12, "score": 0.0, "status": "incorrect",
                       "cached": True}])


def test_each_row_type_has_its_tables_columns_in_table_order(backend_store: Store) -> None:
    def columns(table: str) -> tuple[str, ...]:
        return tuple(backend_store.frame(f"SELECT * FROM {table} LIMIT 0", [], "arrow").column_names)

    assert RunRow.COLUMNS == columns("runs")
    assert GateRow.COLUMNS == columns("gates")
    # a sample: its samples columns, then the generation's and the prompt's
    assert SampleRow.COLUMNS == columns("samples") + ("text", "completion_tokens", "prompt_tokens", "finish_reason",
                                                      "prompt")
    assert SampleScore.COLUMNS == ("item_id", "sample_index", "score", "status")
    assert HumanScore.COLUMNS == columns("human_scores")
    assert BatchRow.COLUMNS == columns("audit_batches") + ("n_items",)
    assert BatchItem.COLUMNS == ("sample_key", "position", "item_id", "sample_index")
    assert RatingRow.COLUMNS == columns("audit_ratings")
    assert RatingEvent.COLUMNS == columns("audit_rating_events")
    assert RaterRow.COLUMNS == ("name", "role")
    assert RunPrompt.COLUMNS == columns("run_prompts") + ("text",)
    assert AccessRow.COLUMNS == columns("access_log")
    assert TurnRow.COLUMNS == columns("trajectories")


def test_a_run_and_its_samples_read_back_typed(backend_store: Store) -> None:
    _stored_run(backend_store)
    (run,) = backend_store.runs(run_id="r1")
    assert isinstance(run, RunRow)
    assert (run.status, run.step, run.train_seed, run.checkpoint_path) == ("complete", 800, 1,
                                                                           "/ck/seed-1/checkpoint-800")
    assert isinstance(run.metrics, Metrics) and run.metrics.pass_at[1] == (0.5, 0.5)
    assert run.counts == {"items": 2} and run.effective_params == {"temperature": 0.0}
    assert run.finished_at is not None and run.finished_at >= run.started_at
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.status = "failed"  # type: ignore[misc]

    assert backend_store.sample_scores("r1") == [SampleScore("q1", 0, 1.0, "correct"),
                                                SampleScore("q2", 0, 0.0, "incorrect")]
    q1, q2 = backend_store.samples("r1")
    assert (q1.item_id, q1.seed, q1.extracted, q1.behavior, q1.text, q1.prompt, q1.completion_tokens,
            q1.finish_reason, q1.cached) == ("q1", 11, "4", {"len": 1}, "4", "2+2?", 1, "stop", False)
    # no generation cached for q2: its generation's fields are None, its behaviour empty
    assert (q2.item_id, q2.text, q2.prompt, q2.finish_reason, q2.behavior, q2.cached) == ("q2", None, None, None,
                                                                                         {}, True)


def test_a_row_still_reads_by_key_for_one_release_with_a_deprecation_warning(backend_store: Store) -> None:
    _stored_run(backend_store)
    (run,) = backend_store.runs()
    with pytest.warns(DeprecationWarning, match=r"RunRow\['status'\] is deprecated.*read \.status"):
        assert run["status"] == "complete"
    with pytest.warns(DeprecationWarning, match=r"RunRow\.get\('error'\) is deprecated"):
        assert run.get("error", "none") is None
    with pytest.warns(DeprecationWarning):
        assert run.get("no such column", "none") == "none"
    with pytest.warns(DeprecationWarning):  # the dict it was: metrics as a plain dict
        assert type(run["metrics"]) is dict and run["metrics"] == {"pass@1": 0.5, "pass@1_stderr": 0.5}
    score = backend_store.sample_scores("r1")[1]
    with pytest.warns(DeprecationWarning, match=r"SampleScore\['score'\]"):
        assert score["score"] == 0.0
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError):
        score["text"]


def test_as_dict_is_the_dict_the_reader_returned(backend_store: Store) -> None:
    _stored_run(backend_store)
    (run,) = backend_store.runs()
    doc = run.as_dict()
    assert list(doc) == list(RunRow.COLUMNS)
    assert {k: doc[k] for k in RUN} == RUN
    assert (doc["status"], doc["metrics"], doc["counts"], doc["error"], doc["wall_s"]) == (
        "complete", {"pass@1": 0.5, "pass@1_stderr": 0.5}, {"items": 2}, None, None)
    assert type(doc["metrics"]) is dict
    assert backend_store.sample_scores("r1")[0].as_dict() == {"item_id": "q1", "sample_index": 0, "score": 1.0,
                                                             "status": "correct"}


def test_runs_json_prints_every_column_as_before(backend_store: Store) -> None:
    _stored_run(backend_store)
    (run,) = backend_store.runs()
    code, out, _ = cli_parts("runs", "--json")
    assert code == 0
    (doc,) = json.loads(out)
    assert list(doc) == list(RunRow.COLUMNS)
    assert {k: doc[k] for k in RUN} == RUN
    assert doc["metrics"] == {"pass@1": 0.5, "pass@1_stderr": 0.5} and doc["counts"] == {"items": 2}
    assert doc["started_at"] == str(run.started_at) and doc["status"] == "complete" and doc["error"] is None
    assert out == json.dumps([run.as_dict()], indent=2, default=str) + "\n"


def test_a_gate_row_reads_back_typed_with_its_json_decoded(backend_store: Store) -> None:
    backend_store.put_gate({"gate_id": "g1", "name": "release", "policy_sha256": "ps", "protocol_hash": "ph",
                           "inputs_sha256": "is", "inputs": {"backend": "hf"},
                           "decision_runs": [{"run_id": "r1", "checkpoint_digest": "d1"}], "verdict": "FAIL",
                           "reason": "no seed improved", "reasons": ["no seed improved"],
                           "document": {"verdict": "FAIL", "stderr": math.nan}, "reused_from": None,
                           "actor": "ci"})
    (g,) = backend_store.gates(gate_id="g1")
    assert isinstance(g, GateRow)
    assert (g.verdict, g.reason, g.actor, g.reused_from) == ("FAIL", "no seed improved", "ci", None)
    assert g.inputs == {"backend": "hf"} and g.decision_runs == [{"run_id": "r1", "checkpoint_digest": "d1"}]
    assert g.document["verdict"] == "FAIL" and math.isnan(g.document["stderr"])
    (recent,) = backend_store.recent_gates()  # the dashboard's reader: the same row, its JSON decoded too
    assert isinstance(recent, GateRow) and recent.inputs == {"backend": "hf"} and recent.reasons == [
        "no seed improved"] and math.isnan(recent.document["stderr"]) and recent.gate_id == "g1"


def test_a_batch_its_items_ratings_events_and_raters_read_back_typed(backend_store: Store) -> None:
    st = backend_store
    _stored_run(st)
    t0 = st.clock()
    st.create_batch({"batch_id": "b1", "run_id": "r1", "split": "dev", "rubric": "correct?", "scale_min": 1,
                     "scale_max": 5, "stratify": None, "selection_seed": 3, "created_by": "lead", "created_at": t0,
                     "show_gold": False},
                    [{"sample_key": "k2", "position": 0, "item_id": "q2", "sample_index": 0},
                     {"sample_key": "k1", "position": 1, "item_id": "q1", "sample_index": 0}])
    (b,) = st.batches("b1")
    assert isinstance(b, BatchRow)
    assert (b.batch_id, b.run_id, b.scale_min, b.scale_max, b.selection_seed, b.show_gold, b.n_items) == (
        "b1", "r1", 1, 5, 3, False, 2)
    assert st.batch_items("b1") == [BatchItem("k2", 0, "q2", 0), BatchItem("k1", 1, "q1", 0)]

    assert st.put_rater("ann", "t" * 64, "rater", "lead") is False
    assert st.rater_by_token("t" * 64) == RaterRow("ann", "rater") and st.rater_by_token("u" * 64) is None
    st.start_session("s" * 64, "ann")
    assert st.session_rater("s" * 64, t0 - timedelta(hours=1)) == RaterRow("ann", "rater")

    mirror = {"split": "dev", "run_id": "r1", "rater": "ann", "auto_score": 1.0, "source_sha256": "batch:b1",
              "imported_by": "ann"}
    for token, score in (("f1", 4.0), ("f2", 2.0), ("f3", None)):  # scored, replaced, a skip that keeps the 2
        st.issue_form_token(token * 32, "ann", "rate", timedelta(hours=1))
        st.submit_rating(form_token_sha256=token * 32, purpose="rate", ttl=timedelta(hours=1), batch_id="b1",
                         rater="ann", sample_key="k1", score=score, note=None,
                         human_score=mirror if score is not None else None)
    (r,) = st.ratings("b1", "ann")
    assert isinstance(r, RatingRow)
    assert (r.item_id, r.sample_index, r.score, r.skipped, r.note, r.submissions) == ("q1", 0, 2.0, False, None, 2)
    events = st.rating_events("b1")
    assert all(isinstance(e, RatingEvent) for e in events)
    assert [(e.action, e.score, e.previous_score, e.skipped) for e in events] == [
        ("scored", 4.0, None, False), ("replaced", 2.0, 4.0, False), ("skipped", None, 2.0, True)]
    (h,) = st.human_scores("dev", "r1")
    assert isinstance(h, HumanScore)
    assert (h.item_id, h.sample_index, h.rater, h.score, h.auto_score, h.source_sha256, h.imported_by) == (
        "q1", 0, "ann", 2.0, 1.0, "batch:b1", "ann")
    with pytest.warns(DeprecationWarning, match=r"BatchRow\['n_items'\]"):
        assert b["n_items"] == 2


def test_access_rows_read_back_typed_and_a_stored_rows_hash_computed_by_hand_still_verifies(
        backend_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "TF_BUILD", "CI"):
        monkeypatch.delenv(var, raising=False)
    accesslog.append(backend_store, accesslog.entry(actor="ann", split="dev", tier="dev", purpose="tuning",
                                                    outcome="read", checkpoint_digest="d1", run_id="r1",
                                                    detail="why \u00e9"))
    accesslog.append(backend_store, accesslog.entry(actor="bob", split="dev", tier="dev", purpose="add-split",
                                                    outcome="added", detail="abc"))
    first, second = backend_store.access_rows()
    assert isinstance(first, AccessRow)
    assert (first.seq, first.actor, first.ci, first.split, first.tier, first.purpose, first.outcome, first.cached,
            first.checkpoint_digest, first.protocol_hash, first.run_id, first.detail, first.prev_hash) == (
        1, "ann", None, "dev", "dev", "tuning", "read", False, "d1", None, "r1", "why \u00e9", "0" * 64)
    assert second.seq == 2 and second.prev_hash == first.row_hash
    # the hash input, written out by hand: the genesis hash, then the fields but the two hashes as sorted,
    # compact JSON (ts as ISO text, non-ASCII as is); the stored row's hash is still that text's sha256
    text = ("0" * 64 + '{"actor":"ann","cached":false,"checkpoint_digest":"d1","ci":null,"detail":"why \u00e9",'
            '"outcome":"read","protocol_hash":null,"purpose":"tuning","run_id":"r1","seq":1,"split":"dev",'
            f'"tier":"dev","ts":"{first.ts.isoformat()}"}}')
    assert first.row_hash == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert accesslog.row_hash("0" * 64, first) == accesslog.row_hash("0" * 64, first.as_dict()) == first.row_hash
    assert accesslog.verify(backend_store)["ok"] is True
    assert backend_store.access_rows("dev", from_seq=2) == [second]
    assert backend_store.access_content_changes() == [second]
    assert list(first.as_dict()) == list(AccessRow.COLUMNS) and first.as_dict()["detail"] == "why \u00e9"
    with pytest.warns(DeprecationWarning, match=r"AccessRow\['outcome'\] is deprecated.*read \.outcome"):
        assert first["outcome"] == "read"


def test_rows_from_a_cursor_refuse_other_columns(backend_store: Store) -> None:
    with backend_store.connect() as con:
        assert RaterRow.from_cursor(con.execute("SELECT 'r' AS role, 'ann' AS name")) == [RaterRow("ann", "r")]
        with pytest.raises(TypeError, match="RaterRow has the columns name, role; the result has name, rank"):
            RaterRow.from_cursor(con.execute("SELECT 'ann' AS name, 1 AS rank"))
        with pytest.raises(TypeError, match="the result has name$"):
            RaterRow.from_cursor(con.execute("SELECT 'ann' AS name"))
