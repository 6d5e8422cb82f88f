"""``evalgate samples`` (a run's samples, a logged read; refused for private and human-audit splits) and
``evalgate compare`` (status changes between two runs with an exact McNemar test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.demo.train import addition_items
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import load_manifest, write_split
from evalgate.store import Store
from evalgate.views.samples import compare_runs, mcnemar_exact, run_samples
from tests.helpers.cli import cli_parts
from tests.runner.test_record import addition_protocol

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

ITEMS = [{"id": f"q{i}", "question": f"{i}+{i}", "answer": str(2 * i)} for i in range(8)]


def add_run(store: Store, run_id: str, split: str, statuses: list[str], protocol_hash: str = "ab" * 32,
            step: int | None = None, metrics: dict[str, float] | None = None) -> None:
    """A complete run whose samples (one per item q0..) have the given statuses; score 1 for ``correct``;
    ``metrics`` as stored (default none)."""
    m = load_manifest(split)
    store.create_run({
        "run_id": run_id, "protocol_name": "fx", "protocol_version": "1", "protocol_hash": protocol_hash,
        "checkpoint_digest": f"digest-{run_id}", "checkpoint_path": f"/ck/{run_id}", "train_run": "fx-run",
        "train_seed": 1, "step": step, "split": split, "tier": m.tier, "split_sha256": m.content_sha256,
        "sampling_seed": 0, "backend": "hf", "backend_info": {}, "effective_params": {}, "actor": "t",
        "purpose": "evaluation"})
    samples = [{"item_id": f"q{i}", "sample_index": 0, "seed": 1, "score": float(s == "correct"), "status": s,
                "extracted": str(i), "detail": None, "cached": False, "behavior": {}} for i, s in enumerate(statuses)]
    store.finish_run({"run_id": run_id, "metrics": metrics or {},
                      "counts": {"items": len(samples), "samples": len(samples)}}, samples)


def rows(store: Store) -> list[tuple[str, str, str, str | None]]:
    return [(r.split, r.purpose, r.outcome, r.run_id) for r in store.access_rows()]


def test_samples_filter_by_status_item_and_limit_and_each_view_is_a_logged_read(home: Path) -> None:
    write_split("fx-dev", "dev", ITEMS[:4], {"source": "test"})
    store = Store()
    add_run(store, "r1", "fx-dev", ["correct", "wrong", "truncated", "wrong"])
    before = len(store.access_rows())

    code, out, _ = cli_parts("samples", "r1", "--status", "wrong", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert [(s["item_id"], s["status"]) for s in doc["samples"]] == [("q1", "wrong"), ("q3", "wrong")]
    assert doc["counts"] == {"correct": 1, "wrong": 2, "truncated": 1} and doc["total"] == 2
    assert doc["samples"][0]["extracted"] == "1" and doc["samples"][0]["score"] == 0.0
    assert [s.item_id for s in run_samples("r1", limit=3, store=store).samples] == ["q0", "q1", "q2"]
    assert [s.item_id for s in run_samples("r1", item="q2", store=store).samples] == ["q2"]
    code, out, _ = cli_parts("samples", "r1", "--item", "q2")
    assert code == 0 and "q2#0  truncated  score 0" in out and "statuses: correct 1, truncated 1, wrong 2" in out
    # four views, four cached reads of the split, each naming the run
    assert rows(store)[before:] == [("fx-dev", "inspect-samples", "read", "r1")] * 4
    assert all(r.cached for r in store.access_rows()[before:])

    for bad in (["--status", "incorrect"], ["--item", "q9"]):
        code, _, err = cli_parts("samples", "r1", *bad)
        assert code == 2, err
    assert "known: correct, wrong, truncated" in cli_parts("samples", "r1", "--status", "incorrect")[2]
    assert cli_parts("samples", "nope")[0] == 2


@pytest.mark.parametrize("tier", ["private", "human-audit"])
def test_samples_of_a_private_or_human_audit_run_are_refused_and_the_refusal_logged(home: Path, tier: str) -> None:
    write_split("fx-guarded", tier, ITEMS[:2], {"source": "test"})
    store = Store()
    add_run(store, "g1", "fx-guarded", ["correct", "wrong"])
    before = len(store.access_rows())
    code, out, err = cli_parts("samples", "g1", "--json")
    assert code == 2
    assert json.loads(out)["exit_code"] == 2 and "tier " + tier in err
    assert ("export-audit" in err) == (tier == "human-audit")
    new = store.access_rows()[before:]
    assert [(r.split, r.purpose, r.outcome) for r in new] == [("fx-guarded", "inspect-samples", "refused")]
    assert "g1" in new[0].detail
    # compare shows per-item statuses too: refused the same way
    add_run(store, "g2", "fx-guarded", ["wrong", "wrong"])
    assert cli_parts("compare", "g1", "g2")[0] == 2
    assert [r.outcome for r in store.access_rows()[before:]] == ["refused", "refused"]


def test_a_private_runs_samples_are_never_shown_to_any_caller(home: Path) -> None:
    """Issue 27: a grant used to show a private run's per-item samples to any Python caller that minted one; now
    ``run_samples`` takes no grant and the private tier is refused (logged)."""
    write_split("fx-private", "private", ITEMS[:2], {"source": "test"})
    store = Store()
    add_run(store, "p1", "fx-private", ["correct", "wrong"])
    with pytest.raises(RefusedByPolicy, match="per-item outputs of the private tier are never shown"):
        run_samples("p1", store=store)
    assert [(r.purpose, r.outcome) for r in store.access_rows()[-1:]] == [("inspect-samples", "refused")]


def test_exact_mcnemar_matches_the_binomial_tail_by_hand() -> None:
    # b discordant pairs one way out of n = b + c; p = 2 * P(X <= min(b, c)), X ~ Binomial(n, 1/2)
    assert mcnemar_exact(1, 5) == pytest.approx(2 * (1 + 6) / 64)  # 0.21875
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(3, 3) == pytest.approx(1.0)
    assert mcnemar_exact(0, 0) == 1.0


def test_compare_pairs_samples_and_counts_the_changes(home: Path) -> None:
    write_split("fx-dev", "dev", ITEMS, {"source": "test"})
    store = Store()
    a = ["correct", "wrong", "wrong", "wrong", "wrong", "wrong", "correct", "truncated"]
    b = ["wrong", "correct", "correct", "correct", "correct", "correct", "correct", "wrong"]
    # pass@1 2/8 and 6/8; stderr of a mean of 8 0/1 scores: sqrt(8/7 * 0.25 * 0.75 / 8) = 0.16366
    add_run(store, "a", "fx-dev", a, step=10, metrics={"pass@1": 0.25, "pass@1_stderr": 0.16366})
    add_run(store, "b", "fx-dev", b, step=20, metrics={"pass@1": 0.75, "pass@1_stderr": 0.16366})
    code, out, err = cli_parts("compare", "a", "b", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["pairs"], doc["both_correct"], doc["both_not_correct"]) == (8, 1, 1)
    assert (doc["a_only_correct"], doc["b_only_correct"]) == (1, 5)
    assert doc["mcnemar_p"] == pytest.approx(0.21875)
    assert doc["changed"] == 7  # q7: truncated -> wrong changed status, both not correct
    assert doc["transitions"] == {"wrong -> correct": 5, "correct -> wrong": 1, "truncated -> wrong": 1}
    assert [r["item_id"] for r in doc["rows"]] == ["q0", "q1", "q2", "q3", "q4", "q5", "q7"]
    assert [(r.purpose, r.run_id) for r in store.access_rows()[-2:]] == [("compare-runs", "a"),
                                                                              ("compare-runs", "b")]
    code, out, _ = cli_parts("compare", "a", "b")
    assert code == 0 and "p = 0.2188" in out and "q0#0: correct -> wrong" in out
    lines = out.splitlines()  # the two runs' scores, in a table (not only through a second command)
    at = lines.index("run  checkpoint  step  seed  split   pass@1 ± stderr  n")
    assert [ln.split() for ln in lines[at + 2:at + 4]] == [
        ["a", "ck/a", "10", "1", "fx-dev", "0.250", "±", "0.164", "8"],
        ["b", "ck/b", "20", "1", "fx-dev", "0.750", "±", "0.164", "8"]]


def test_compare_refuses_runs_of_different_protocols_or_splits(home: Path) -> None:
    write_split("fx-dev", "dev", ITEMS[:2], {"source": "test"})
    write_split("fx-dev2", "dev", ITEMS[2:4], {"source": "test"})
    store = Store()
    add_run(store, "a", "fx-dev", ["correct", "wrong"])
    add_run(store, "other-proto", "fx-dev", ["correct", "wrong"], protocol_hash="cd" * 32)
    add_run(store, "other-split", "fx-dev2", ["correct", "wrong"])
    before = len(store.access_rows())
    for other, what in (("other-proto", "different protocol hashes"), ("other-split", "different splits")):
        code, _, err = cli_parts("compare", "a", other)
        assert code == 2 and what in err and "not paired" in err
    # said once (it read 'different splits (fx-dev vs fx-dev2; protocols p@1 vs p@1, splits fx-dev vs fx-dev2)')
    assert "have different splits (fx-dev vs fx-dev2): their samples" in cli_parts("compare", "a", "other-split")[2]
    with pytest.raises(Exception, match="two different runs"):
        compare_runs("a", "a", store=store)
    assert len(store.access_rows()) == before  # refused before anything was read


@pytest.mark.not_in_memory("the tiny checkpoint makes it integration, which make test runs on the file; a "
                           "memory id would run in neither lane")
def test_samples_of_a_real_run_show_the_rendered_prompt_and_the_completion(home: Path, tiny_checkpoint: Path) -> None:
    write_split("add-two", "dev", addition_items("dev", 2), {"source": "test"})
    proto = addition_protocol(home, max_tokens=3)
    store = Store()
    doc = evaluate(proto, tiny_checkpoint, "add-two", RunOptions(progress=False), store)
    stored: dict[str, Any] = {s.item_id: s for s in store.samples(doc["run_id"])}
    code, out, err = cli_parts("samples", doc["run_id"], "--json")
    assert code == 0, err
    shown = json.loads(out)["samples"]
    assert len(shown) == 2
    for s, item in zip(shown, addition_items("dev", 2), strict=True):
        assert item["question"] in s["prompt"] and "<|im_start|>user" in s["prompt"]  # the chat template applied
        assert s["completion"] == stored[item["id"]].text and s["finish_reason"] in ("stop", "length")
        assert s["completion_tokens"] <= 3 and s["status"] == stored[item["id"]].status


def test_status_filter_knows_the_agent_loops_tool_violation(home: Path) -> None:
    # an agentic run's sample ended by a violation is stored as 'tool_violation' (docs/AGENTIC.md):
    # filtering on it must reach the run lookup, not be refused as an unknown status
    from evalgate.core.errors import BadInput
    from evalgate.views.samples import run_samples

    with pytest.raises(BadInput, match="no run 'nosuch'"):
        run_samples("nosuch", status="tool_violation", store=Store())
    with pytest.raises(BadInput, match="known: correct, wrong, truncated, no_answer, timeout, error, judged, "
                                       "judge_unparseable, scored, tie, tool_violation"):
        run_samples("nosuch", status="bogus", store=Store())
    with pytest.raises(BadInput, match="no run 'nosuch'"):  # the judge scorer's own status is known too
        run_samples("nosuch", status="judge_unparseable", store=Store())


def test_samples_of_an_unfinished_run_say_so_and_read_nothing(home: Path) -> None:
    write_split("fx-dev", "dev", ITEMS[:2], {"source": "test"})
    store = Store()
    add_run(store, "done", "fx-dev", ["correct", "wrong"])
    store.create_run(_run_row(store, "cut"))
    store.fail_run("cut", "KeyboardInterrupt", status="interrupted")
    before = rows(store)
    code, out, err = cli_parts("samples", "cut")
    assert code == 2 and "run cut is interrupted, not complete" in err and "Rerun" in err
    assert rows(store) == before  # refused before the read: nothing logged


def _run_row(store: Store, run_id: str) -> dict[str, Any]:
    m = load_manifest("fx-dev")
    return {"run_id": run_id, "protocol_name": "fx", "protocol_version": "1", "protocol_hash": "ab" * 32,
            "checkpoint_digest": "digest-cut", "checkpoint_path": "/ck/cut", "train_run": "fx-run", "train_seed": 1,
            "step": None, "split": "fx-dev", "tier": m.tier, "split_sha256": m.content_sha256, "sampling_seed": 0,
            "backend": "hf", "backend_info": {}, "effective_params": {}, "actor": "t", "purpose": "evaluation"}


def _released_private_run(home: Path, tmp_path: Path) -> tuple[Store, str]:
    """A real release-gate run on private split ``p`` (replayed completions, a grant whose read was reserved and
    logged as the gate's decision does), beside a dev split ``d``: (store, run id)."""
    from evalgate.runner.grant import _reserve_release_reads
    from evalgate.splits import SplitManager

    items = addition_items("private", 2)
    write_split("p", "private", items, {"source": "test"})
    write_split("d", "dev", addition_items("dev", 2), {"source": "test"})
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"item_id": it["id"], "turn": 0, "text": f"SECRET-{it['answer']}"}) + "\n"
                              for it in items))
    ckpt = tmp_path / "model"
    ckpt.mkdir()
    import yaml

    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.protocol.freeze import freeze

    proto = tmp_path / "plain.yaml"
    proto.write_text(yaml.safe_dump({"name": "plain", "version": "1", "sampling": {"max_tokens": 8},
                                     "prompt": {"chat_template": "none", "template": "{{ question }}"},
                                     "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
                                     "extraction": {"rule": "raw"}}))
    freeze(proto, Store)
    store = Store()
    grant = _reserve_release_reads("g", SplitManager(store), load_manifest("p"), "t", [{}], "refused")
    doc = evaluate(proto, Checkpoint(path=ckpt, kind="hf", digest="1" * 64, model_dir=ckpt), "p",
                   RunOptions(backend="replay", backend_options={"file": str(replay)}, purpose="release-gate",
                              grant=grant, progress=False), store)
    return store, doc["run_id"]


@pytest.mark.parametrize("edit", ["UPDATE runs SET tier='dev', split='d'", "UPDATE runs SET tier='human-audit'"])
def test_a_private_run_stays_private_when_its_unsigned_run_row_is_edited(home: Path, tmp_path: Path,
                                                                        edit: str) -> None:
    """Adversary, third pass: ``Store.samples`` and ``admit_view`` took a run's tier (and split) from its ``runs``
    row, which no signature covers. Whoever could write the store file (a CI cache) set a private run's row to tier
    dev on a dev split, and the next key holder's 'evalgate samples RUN' (or the dashboard's run page, an admin
    rater's) decrypted and showed the private prompts and completions, logged as a dev read. The signed access log
    recorded the run's read of the private split: that decides, whatever the row says now."""
    store, run_id = _released_private_run(home, tmp_path)
    assert any("SECRET-" in (s.text or "") for s in store._samples(run_id))  # the completions are there
    with store.connect() as con:
        con.execute(f"{edit} WHERE run_id=?", [run_id])
    before = len(store.access_rows())
    with pytest.raises(RefusedByPolicy, match="private"):
        run_samples(run_id, store=store)
    with pytest.raises(RefusedByPolicy, match="private"):
        store.samples(run_id)
    assert [(r.split, r.outcome) for r in store.access_rows()[before:]] == [("p", "refused")]


def test_a_private_run_edited_into_a_human_audit_run_gets_no_rating_batch(home: Path, tmp_path: Path) -> None:
    """The same edit towards the raters: the private run's row set to a human-audit split of the same item ids, and
    'audit batch create' refused it (logged) before any batch holds its samples."""
    from evalgate.human import rating

    store, run_id = _released_private_run(home, tmp_path)
    write_split("h", "human-audit", addition_items("private", 2), {"source": "test", "note": "same ids"})
    with store.connect() as con:
        con.execute("UPDATE runs SET tier='human-audit', split='h' WHERE run_id=?", [run_id])
    with pytest.raises(RefusedByPolicy, match="human-audit splits only"):
        rating.create_batch(run_id, samples=2, store=store)
    assert store.batches() == [] and store.access_rows()[-1].outcome == "refused"


@pytest.mark.parametrize("tier", [None, "human-audit"])
def test_a_dev_runs_row_pointed_at_a_private_runs_outputs_shows_none_of_them(home: Path, tmp_path: Path,
                                                                           tier: str | None) -> None:
    """The same store edit by another road: a dev run's own row keeps its tier (the access log says dev too), but its
    checkpoint, protocol and settings are set to the private run's and its run_prompts rows deleted, so the samples
    query joined the private run's sealed generations (same item ids: two files numbered alike) and decrypted them
    for 'evalgate samples DEV_RUN'. A run of an open tier never holds a sealed value: one joined is refused. With the
    row's tier set to human-audit as well (whose outputs are sealed, and shown to raters), the access log still
    logged the run's read as dev: only a run the log puts on human-audit opens sealed values."""
    store, private_run = _released_private_run(home, tmp_path)
    (p,) = store.runs(run_id=private_run)
    items = [{**it, "question": f"dev {it['id']}?"} for it in addition_items("private", 2)]
    write_split("d2", "dev", items, {"source": "test"})
    replay = tmp_path / "dev-replay.jsonl"
    replay.write_text("".join(json.dumps({"item_id": it["id"], "turn": 0, "text": "dev answer"}) + "\n"
                              for it in items))
    from evalgate.checkpoints.resolve import Checkpoint

    ckpt = tmp_path / "dev-model"
    ckpt.mkdir()
    doc = evaluate(tmp_path / "plain.yaml", Checkpoint(path=ckpt, kind="hf", digest="2" * 64, model_dir=ckpt), "d2",
                   RunOptions(backend="replay", backend_options={"file": str(tmp_path / "dev-replay.jsonl")},
                              progress=False), store)
    dev_run = doc["run_id"]
    assert [s.completion for s in run_samples(dev_run, store=store).samples] == ["dev answer"] * 2
    with store.connect() as con:
        con.execute("UPDATE runs SET checkpoint_digest=?, protocol_hash=?, settings_sha256=? WHERE run_id=?",
                    [p.checkpoint_digest, p.protocol_hash, p.settings_sha256, dev_run])
        con.execute("DELETE FROM run_prompts WHERE run_id=?", [dev_run])
        if tier:
            con.execute("UPDATE runs SET tier=? WHERE run_id=?", [tier, dev_run])
    if not tier:  # a human-audit row is refused by admit_view before any read
        with pytest.raises(RefusedByPolicy, match="store was edited"):
            run_samples(dev_run, store=store)
    with pytest.raises(RefusedByPolicy, match="store was edited"):
        store.samples(dev_run)
