"""The typed results of ``Workspace.samples``, ``Workspace.compare`` and ``Workspace.audit`` (issue 31): their
fields hold the values known by construction, and ``as_dict()`` is, key for key and in order, the document the
matching ``--json`` command prints (the key lists are those of the documents before they were typed)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

import evalgate
from evalgate.splits import SplitManager, write_split
from evalgate.views.audit import AuditSummary, ChainCheck, ContaminationBudget, ReadBudget
from evalgate.views.samples import ChangedSample, Comparison, RunSide, Sample, Samples
from tests.helpers.cli import cli
from tests.test_samples import ITEMS, add_run

SAMPLES_KEYS = ["run_id", "split", "tier", "protocol", "checkpoint_path", "counts", "total", "shown", "samples"]
SAMPLE_KEYS = ["item_id", "sample_index", "status", "score", "extracted", "detail", "prompt", "completion",
               "finish_reason", "completion_tokens", "cached"]
COMPARE_KEYS = ["a", "b", "split", "tier", "protocol", "pairs", "unpaired", "both_correct", "both_not_correct",
                "a_only_correct", "b_only_correct", "changed", "transitions", "mcnemar_p", "rows"]
ENTRY_KEYS = ["tier", "reads", "cached_reads", "overrides", "refusals", "judge_reads", "by_actor", "by_purpose",
              "by_day", "refusals_by_actor", "ci_reads", "first_read", "last_read", "tiers_seen", "manifest"]


@pytest.fixture
def ws(home: Path) -> evalgate.Workspace:
    """A workspace on the test's isolated home (the CLI, which reads the same variables, sees the same store)."""
    return evalgate.Workspace.from_env(actor="alice")


def cli_json(*args: str) -> dict:
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.usefixtures("memory_store")
def test_samples_are_typed_and_as_dict_is_the_json_document(ws: evalgate.Workspace) -> None:
    write_split("fx-dev", "dev", ITEMS[:4], {"source": "test"}, env=ws.env)
    add_run(ws.store, "r1", "fx-dev", ["correct", "wrong", "truncated", "wrong"])

    got = ws.samples("r1", status="wrong")
    assert isinstance(got, Samples) and isinstance(got, evalgate.Samples)
    assert (got.run_id, got.split, got.tier, got.protocol, got.checkpoint_path) == (
        "r1", "fx-dev", "dev", "fx@1", "/ck/r1")
    assert got.counts == {"correct": 1, "wrong": 2, "truncated": 1} and (got.total, got.shown) == (2, 2)
    # add_run stores no prompt or completion; extracted is the item's index, score 1 only for correct
    assert got.samples == [
        Sample(item_id=i, sample_index=0, status="wrong", score=0.0, extracted=e, detail=None, prompt=None,
               completion=None, finish_reason=None, completion_tokens=None, cached=False)
        for i, e in (("q1", "1"), ("q3", "3"))]
    assert ws.samples("r1", limit=1).model_dump(include={"total", "shown"}) == {"total": 4, "shown": 1}

    doc = got.as_dict()
    assert list(doc) == SAMPLES_KEYS and list(doc["samples"][0]) == SAMPLE_KEYS
    assert cli_json("samples", "r1", "--status", "wrong") == json.loads(json.dumps(doc))
    with pytest.raises(Exception, match="frozen"):
        got.total = 3  # type: ignore[misc]


@pytest.mark.usefixtures("memory_store")
def test_a_comparison_is_typed_and_as_dict_is_the_json_document(ws: evalgate.Workspace) -> None:
    write_split("fx-dev", "dev", ITEMS[:4], {"source": "test"}, env=ws.env)
    add_run(ws.store, "a", "fx-dev", ["correct", "wrong", "wrong", "truncated"], step=10)
    add_run(ws.store, "b", "fx-dev", ["wrong", "correct", "correct", "wrong"], step=20)

    got = ws.compare("a", "b")
    assert isinstance(got, Comparison)
    assert got.a == RunSide(run_id="a", checkpoint_path="/ck/a", train_run="fx-run", train_seed=1, step=10,
                            metrics={})
    assert got.b.step == 20
    # q0 correct -> wrong; q1, q2 wrong -> correct; q3 truncated -> wrong (both not correct)
    assert (got.pairs, got.unpaired, got.both_correct, got.both_not_correct) == (4, 0, 0, 1)
    assert (got.a_only_correct, got.b_only_correct, got.changed) == (1, 2, 4)
    assert got.transitions == {"wrong -> correct": 2, "correct -> wrong": 1, "truncated -> wrong": 1}
    assert got.mcnemar_p == pytest.approx(1.0)  # b=1, c=2: 2 * P(X <= 1), X ~ Bin(3, 1/2) = 2 * 4/8, capped at 1
    assert got.rows[0] == ChangedSample(item_id="q0", sample_index=0, a_status="correct", b_status="wrong",
                                        a_score=1.0, b_score=0.0)
    assert [r.item_id for r in got.rows] == ["q0", "q1", "q2", "q3"]

    doc = got.as_dict()
    assert list(doc) == COMPARE_KEYS
    assert list(doc["a"]) == ["run_id", "checkpoint_path", "train_run", "train_seed", "step", "metrics"]
    assert list(doc["rows"][0]) == ["item_id", "sample_index", "a_status", "b_status", "a_score", "b_score"]
    assert cli_json("compare", "a", "b") == json.loads(json.dumps(doc))


@pytest.mark.usefixtures("memory_store")
def test_an_audit_summary_is_typed_and_leaves_out_the_parts_a_split_does_not_have(ws: evalgate.Workspace) -> None:
    write_split("pub", "public", ITEMS[:2], {"source": "test"}, env=ws.env)
    write_split("dev", "dev", ITEMS[2:4], {"source": "test"}, env=ws.env)
    write_split("priv", "private", ITEMS[4:6], {"source": "test"}, env=ws.env)
    manager = SplitManager(ws.store)
    for who in ("alice", "bob", "bob"):
        manager.open("pub", "evaluation", who)

    got = ws.audit()
    assert isinstance(got, AuditSummary) and list(got.splits) == ["dev", "priv", "pub"]
    pub, dev, priv = got.splits["pub"], got.splits["dev"], got.splits["priv"]
    assert (pub.tier, pub.reads, pub.cached_reads, pub.refusals, pub.judge_reads) == ("public", 3, 0, 0, 0)
    assert pub.by_actor == {"alice": 1, "bob": 2} and pub.by_purpose == {"evaluation": 3}
    # the public tier's default: a soft 20 reads per 30 days (splits.DEFAULT_POLICIES)
    assert pub.budget == ReadBudget(max_reads=20, window_days=30, hard=False, used=3, left=17)
    assert pub.contamination_budget is None and pub.content_names == ["pub"] and pub.same_content_as is None
    assert dev.budget is None and dev.reads == 0 and dev.first_read is None
    # the private tier's defaults: 4 hard reads and 4 contamination checks per 30 days
    assert priv.budget == ReadBudget(max_reads=4, window_days=30, hard=True, used=0, left=4)
    assert priv.contamination_budget == ContaminationBudget(max_checks=4, window_days=30, used=0, left=4)
    assert got.broken_manifests == [] and got.since is None
    # the chain is typed: three reads logged and signed as they were appended, the head the last of them
    chain = got.chain
    assert isinstance(chain, ChainCheck) and (chain.ok, chain.first_bad_seq, chain.reason) == (True, None, None)
    assert chain.head.seq == chain.rows >= 3 and chain.signature.ok and chain.signature.checked
    with pytest.deprecated_call(match=r"ChainCheck\['ok'\] is deprecated"):
        assert got.chain["ok"] is True  # read by key as the dict it was, for one release

    doc = got.as_dict()
    assert list(doc) == ["generated_at", "since", "splits_dir", "splits", "chain", "broken_manifests"]
    assert list(doc["splits"]["dev"]) == [*ENTRY_KEYS, "content_names", "same_content_as"]  # no budget key at all
    assert list(doc["splits"]["pub"]) == [*ENTRY_KEYS, "content_names", "same_content_as", "budget"]
    assert list(doc["splits"]["pub"]["budget"]) == ["max_reads", "window_days", "hard", "used", "left"]
    assert list(doc["splits"]["priv"])[-2:] == ["budget", "contamination_budget"]
    assert list(doc["chain"]) == ["ok", "rows", "first_bad_seq", "reason", "head", "signature"]
    assert list(doc["chain"]["signature"]) == ["ok", "checked", "seq", "reason", "public_key", "first_bad_seq"]
    shown = cli_json("audit")
    assert {k: v for k, v in shown.items() if k != "generated_at"} == json.loads(json.dumps(
        {k: v for k, v in doc.items() if k != "generated_at"}))
    assert list(ws.audit(tier="private").splits) == ["priv"]


def test_a_split_only_in_the_log_has_no_content_fields_and_a_broken_chain_no_count(ws: evalgate.Workspace) -> None:
    write_split("pub", "public", ITEMS[:2], {"source": "test"}, env=ws.env)
    SplitManager(ws.store).open("pub", "evaluation", "alice")
    (ws.splits / "pub.yaml").unlink()  # its rows stay; its budget is now unknown, not absent
    entry = ws.audit().splits["pub"]
    assert (entry.manifest, entry.tier, entry.reads) == (False, "public", 1)
    assert list(entry.as_dict()) == ENTRY_KEYS

    write_split("pub", "public", ITEMS[:2], {"source": "test"}, env=ws.env)
    con = duckdb.connect(str(ws.store.path))  # an edited row: the chain no longer verifies from it on
    con.execute("UPDATE access_log SET actor = 'mallory' WHERE seq = 1")
    con.close()
    budget = ws.audit().splits["pub"].budget
    assert budget is not None and (budget.used, budget.left) == (None, None)
    assert budget.unknown is not None and budget.unknown.startswith("chain broken at row ")
    assert list(budget.as_dict()) == ["max_reads", "window_days", "hard", "used", "left", "unknown"]
