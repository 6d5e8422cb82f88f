"""The human-audit tier: export items or a run's samples for human scoring, import the scores, logged reads."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.human.audit_io import export_audit, import_audit
from evalgate.splits import write_split
from evalgate.store import Store

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

ITEMS = [{"id": f"q{i}", "question": f"is {i} even?"} for i in range(3)]


def add_run(store: Store, run_id: str, split: str, scores: dict[str, float]) -> None:
    """A completed run with one sample per item, written through the store API as 'evalgate run' writes it (its
    protocol ``p@1`` recorded as freezing it records it: the prompt renders the item's ``question``)."""
    store.record_protocol("p", "1", "h", {"prompt": {"template": "Q: {{ question }}", "response_prefix": None}})
    store.create_run({"run_id": run_id, "protocol_name": "p", "protocol_version": "1", "protocol_hash": "h",
                      "checkpoint_digest": "ck", "checkpoint_path": "/ck", "split": split, "tier": "human-audit",
                      "split_sha256": "x", "sampling_seed": 1, "backend": "hf"})
    store.put_generations("ck", "h", [{"item_id": i, "sample_index": 0, "seed": 7, "prompt_sha256": "ps",
                                       "text": f"answer to {i}", "prompt_tokens": 3, "completion_tokens": 2,
                                       "finish_reason": "stop"} for i in scores], {"ps": "prompt"})
    store.finish_run({"run_id": run_id, "metrics": {}, "counts": {}, "wall_s": 1.0},
                     [{"item_id": i, "sample_index": 0, "seed": 7, "score": s, "status": "scored", "cached": False}
                      for i, s in scores.items()])


def fill(path: Path, scores: dict[str, float | None], rater: str | None = None) -> None:
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    for r in recs:
        r["human_score"] = scores[r["item_id"]]
        if rater:
            r["rater"] = rater
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_export_samples_import_scores_and_agreement(tmp_path: Path) -> None:
    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    add_run(store, "run1", "ha", {"q0": 1.0, "q1": 0.0, "q2": 1.0})
    out = tmp_path / "audit.jsonl"
    r = CliRunner().invoke(main, ["splits", "export-audit", "ha", "--run", "run1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["item_id"], x["completion"], x["human_score"], x["scale"]) for x in recs] == [
        ("q0", "answer to q0", None, [0, 1]), ("q1", "answer to q1", None, [0, 1]),
        ("q2", "answer to q2", None, [0, 1])]
    assert recs[0]["item"] == {"id": "q0", "question": "is 0 even?"}
    # blind (issue 46, item 4): neither the run nor the automatic score is in the file the raters see
    assert all("auto_score" not in x and "run_id" not in x for x in recs) and "run1" not in out.read_text()
    fill(out, {"q0": 1.0, "q1": 1.0, "q2": 1.0}, rater="carol")
    r = CliRunner().invoke(main, ["splits", "import-audit", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    # human 1, 1, 1 vs auto 1, 0, 1: means 1 and 2/3, mean |diff| 1/3, exact agreement 2/3.
    assert doc["imported"] == 3 and doc["agreement"]["n"] == 3
    assert doc["agreement"]["mean_human"] == 1.0
    assert doc["agreement"]["mean_auto"] == pytest.approx(2 / 3)
    assert doc["agreement"]["mean_abs_diff"] == pytest.approx(1 / 3)
    assert doc["agreement"]["exact_agreement"] == pytest.approx(2 / 3)
    rows = store.human_scores("ha", "run1")
    assert [(x.item_id, x.rater, x.score, x.auto_score) for x in rows] == [
        ("q0", "carol", 1.0, 1.0), ("q1", "carol", 1.0, 0.0), ("q2", "carol", 1.0, 1.0)]
    (batch,) = store.batches()  # the scores are that batch's ratings by carol, as if rated in 'evalgate serve'
    assert (batch.run_id, batch.scale_min, batch.scale_max) == ("run1", 0, 1)
    assert [(x.rater, x.item_id, x.score) for x in store.ratings(batch.batch_id)] == [
        ("carol", "q0", 1.0), ("carol", "q1", 1.0), ("carol", "q2", 1.0)]
    assert doc["batches"] == {batch.batch_id: 3}
    assert [(x.purpose, x.outcome) for x in store.access_rows("ha")] == [
        ("human-audit-export", "read"), ("human-audit-import", "read")]


def test_item_export_reimport_replaces_and_unscored_are_skipped(tmp_path: Path) -> None:
    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    out = tmp_path / "items.jsonl"
    assert export_audit("ha", out, store=store)["records"] == 3
    fill(out, {"q0": 4.0, "q1": None, "q2": 2.0})
    res = import_audit(out, rater="dan", store=store)
    assert (res["imported"], res["skipped_unscored"], res["agreement"]["n"]) == (2, 1, 0)
    fill(out, {"q0": 5.0, "q1": None, "q2": 2.0})
    import_audit(out, rater="dan", store=store)
    assert [(x.item_id, x.run_id, x.sample_index, x.score) for x in store.human_scores("ha")] == [
        ("q0", "", -1, 5.0), ("q2", "", -1, 2.0)]


def test_an_empty_or_unscored_file_is_bad_input_and_reads_nothing(tmp_path: Path) -> None:
    # fresh-user finding: both ended 'internal error: InvalidInputException: ... executemany requires a non-empty
    # list' (exit 3), the unscored one after logging a read of the split
    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    out = tmp_path / "items.jsonl"
    export_audit("ha", out, store=store)  # three records, human_score null: exported, not yet scored
    rows = len(store.access_rows("ha"))
    r = CliRunner().invoke(main, ["splits", "import-audit", str(out)])
    assert r.exit_code == 2, r.output
    assert r.stderr == (f"error: {out}: no record has a human_score (3 record(s), all unscored): fill in human_score "
                        "for the items you scored, then import again\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    r = CliRunner().invoke(main, ["splits", "import-audit", str(empty)])
    assert r.exit_code == 2 and f"{empty} holds no records" in r.stderr, r.output
    assert len(store.access_rows("ha")) == rows and store.human_scores("ha") == []
    store.put_human_scores([])  # nothing to store is not an error


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    write_split("devsplit", "dev", ITEMS, {"source": "test"})
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    with pytest.raises(BadInput, match="tier dev; human scoring works on human-audit splits"):
        export_audit("devsplit", tmp_path / "x.jsonl", store=Store())
    with pytest.raises(BadInput, match="run nope is not a run on split ha"):
        export_audit("ha", tmp_path / "x.jsonl", run_id="nope", store=Store())
    f = tmp_path / "scored.jsonl"
    f.write_text(json.dumps({"split": "ha", "item_id": "q0", "human_score": 1}) + "\n"
                 + json.dumps({"split": "ha", "item_id": "q1", "human_score": 1, "scroe": 2}) + "\n")
    with pytest.raises(BadInput, match=r"scored.jsonl:2: scroe: Extra inputs are not permitted"):
        import_audit(f, store=Store())
    f.write_text(json.dumps({"split": "ha", "item_id": "q9", "human_score": 1}) + "\n")
    with pytest.raises(BadInput, match=r"scored.jsonl:1: item 'q9' is not in split ha"):
        import_audit(f, store=Store())


def test_exporting_a_private_split_is_refused_and_logged(home: Path, tmp_path: Path) -> None:
    write_split("priv", "private", ITEMS, {"source": "test"})
    r = CliRunner().invoke(main, ["splits", "export-audit", "priv", "--out", str(tmp_path / "o.jsonl"),
                                  "--actor", "mallory"])
    assert r.exit_code == 2 and "tier private" in r.output
    assert not (tmp_path / "o.jsonl").exists()
    rows = Store().access_rows("priv")
    assert [(x.actor, x.purpose, x.outcome, x.tier) for x in rows] == \
        [("mallory", "human-audit-export", "refused", "private")]
    assert "human scoring works on human-audit splits" in rows[0].detail


def test_a_runs_export_shows_the_gold_answer_only_with_show_gold(tmp_path: Path) -> None:
    """As on the rating page: the fields the run's protocol renders ('question'), and the rest ('answer') only when
    asked for; the file imports either way."""
    store = Store()
    write_split("hg", "human-audit", [{"id": "q0", "question": "1 + 1?", "answer": "2"}], {"source": "test"})
    add_run(store, "rg", "hg", {"q0": 1.0})
    for flags, gold in (([], None), (["--show-gold"], {"answer": "2"})):
        out = tmp_path / f"audit{len(flags)}.jsonl"
        r = CliRunner().invoke(main, ["splits", "export-audit", "hg", "--run", "rg", "--out", str(out), *flags])
        assert r.exit_code == 0, r.output
        (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
        assert (rec["item"], rec["gold"]) == ({"id": "q0", "question": "1 + 1?"}, gold)
        fill(out, {"q0": 1.0}, rater="dan")
        assert CliRunner().invoke(main, ["splits", "import-audit", str(out)]).exit_code == 0
    r = CliRunner().invoke(main, ["splits", "export-audit", "hg", "--out", str(tmp_path / "x.jsonl"), "--show-gold"])
    assert r.exit_code == 2 and "--show-gold needs --run" in r.output


def test_imported_scores_calibrate_a_proxy_like_rated_batches(tmp_path: Path) -> None:
    """The whole route through the CLI (issue 46, item 4): export a reward model's human-audit run blind, fill in
    ``human_score`` on a 1-5 scale, import; the gate's calibration then finds the rated samples. Before, it said
    "not calibrated: no human-rated sample" (it read rating batches only). Scores as in
    tests/rlhf/test_calibration.py: human 1, 3, 1, 2, 5 -> 0, 0.5, 0, 0.25, 1 vs auto 1, 1, 0, 0, 1: rho 0.444."""
    from evalgate.rlhf.calibration import audit_agreement

    store = Store()
    items = [{"id": f"q{i}", "question": f"{i}?"} for i in range(5)]
    write_split("ha", "human-audit", items, {"source": "test"})
    add_run(store, "rm-run", "ha", {"q0": 1.0, "q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 1.0})
    assert audit_agreement(store, "p@1")["n_samples"] == 0
    out = tmp_path / "blind.jsonl"
    r = CliRunner().invoke(main, ["splits", "export-audit", "ha", "--run", "rm-run", "--scale", "1-5", "--out",
                                  str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "rm-run" not in text and "auto_score" not in text and "run_id" not in text
    fill(out, {"q0": 1, "q1": 3, "q2": 1, "q3": 2, "q4": 5}, rater="ann")
    r = CliRunner().invoke(main, ["splits", "import-audit", str(out)])
    assert r.exit_code == 0, r.output
    found = audit_agreement(store, "p@1")
    assert (found["runs"], found["n_samples"]) == (["rm-run"], 5)
    # ranks: auto (4, 4, 1.5, 1.5, 4), human (1.5, 4, 1.5, 3, 5); centred cross products sum 3.75, sums of
    # squares 7.5 and 9.5: rho = 3.75 / sqrt(71.25) = 0.444
    assert found["spearman"]["rho"] == pytest.approx(3.75 / 71.25 ** 0.5)
    # a score off the batch's scale, or an edited sample key, is refused naming the line; nothing more is stored
    fill(out, {"q0": 7, "q1": 3, "q2": 1, "q3": 2, "q4": 5})
    r = CliRunner().invoke(main, ["splits", "import-audit", str(out)])
    assert r.exit_code == 2 and ":1: human_score 7 is not a whole number on this batch's scale 1..5" in r.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    recs[0].update(human_score=2, sample_key="forged")
    out.write_text("".join(json.dumps(x) + "\n" for x in recs))
    r = CliRunner().invoke(main, ["splits", "import-audit", str(out)])
    assert r.exit_code == 2 and "sample_key 'forged' is not item 'q0'" in r.output
    assert len(store.ratings()) == 5


def test_a_file_that_scores_one_sample_twice_by_one_rater_is_refused_naming_both_lines(tmp_path: Path) -> None:
    """Adversary round: a blind export's record copied with another score (line 4 rates q0 again, 0 after 1) was
    imported, the later line silently replacing the earlier; an item-level file the same. Now one clear error
    naming both lines, nothing stored and nothing read. Two raters scoring the same sample stay two ratings."""
    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    add_run(store, "run1", "ha", {"q0": 1.0, "q1": 0.0, "q2": 1.0})
    out = tmp_path / "audit.jsonl"
    export_audit("ha", out, "run1", store=store)
    fill(out, {"q0": 1.0, "q1": 1.0, "q2": 1.0}, rater="carol")
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(json.dumps(r) + "\n" for r in [*recs, {**recs[0], "human_score": 0.0}]))
    rows = len(store.access_rows("ha"))
    with pytest.raises(BadInput, match=r"twice.jsonl:4: rater 'carol' already scored this sample on line 1 "
                                       r"\(item 'q0'\)"):
        import_audit(twice, store=store)
    assert store.ratings(store.batches()[0].batch_id) == [] and store.human_scores("ha", "run1") == []
    assert len(store.access_rows("ha")) == rows  # refused before the split is read
    items = tmp_path / "items.jsonl"
    export_audit("ha", items, store=store)
    fill(items, {"q0": 1.0, "q1": None, "q2": 0.0})
    lines = items.read_text().splitlines()
    items.write_text("\n".join([*lines, lines[2]]) + "\n")
    with pytest.raises(BadInput, match=r"items.jsonl:4: .* already scored this sample on line 3 \(item 'q2'\)"):
        import_audit(items, store=store)
    # the same sample by two raters: two ratings, as two raters rating it in 'evalgate serve'
    both = tmp_path / "both.jsonl"
    both.write_text("".join(json.dumps(r) + "\n" for r in [*recs, {**recs[0], "rater": "dan"}]))
    assert import_audit(both, store=store)["imported"] == 4
    assert sorted((x.rater, x.item_id) for x in store.ratings(store.batches()[0].batch_id)) == [
        ("carol", "q0"), ("carol", "q1"), ("carol", "q2"), ("dan", "q0")]


@pytest.mark.parametrize("alias", [
    "Carol", " carol ", "CAROL", "\uff43\uff41\uff52\uff4f\uff4c",  # case, white space, fullwidth
    "c\u0430rol", "\u0441arol", "car\u043el",  # Cyrillic a, es, o: 'carol' to a reader
    "ca\u200brol",  # a zero-width space inside
    "ca\u034frol", "carol\ufe0f", "carol\u3164",  # session 18: combining grapheme joiner, variation selector,
    # and a trailing Hangul filler (drawn blank): a reader sees 'carol'
])
def test_one_rater_written_two_ways_is_one_rater(tmp_path: Path, alias: str) -> None:
    """Session 16's adversary: rater names were taken as written, so one person importing as 'carol' and as
    'c\u0430rol' (a Cyrillic a) counted as two raters (the raters count and the agreement between raters). A name
    that reads as one the store or an earlier line holds is stored as that one; so the second file's score of q0
    is carol's second score of it (refused), and of q1 carol's own (one rater, two samples)."""
    from evalgate.human.agreement import run_agreement

    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    add_run(store, "run1", "ha", {"q0": 1.0, "q1": 0.0, "q2": 1.0})
    out = tmp_path / "audit.jsonl"
    export_audit("ha", out, "run1", store=store)
    fill(out, {"q0": 1.0, "q1": None, "q2": None}, rater="carol")
    import_audit(out, store=store)
    again = tmp_path / "again.jsonl"
    fill(out, {"q0": 0.0, "q1": None, "q2": None}, rater=alias)
    again.write_text(out.read_text())
    import_audit(again, store=store)  # a re-import replaces that rater's earlier score: still one rating of q0
    fill(out, {"q0": None, "q1": 1.0, "q2": None}, rater=alias)
    import_audit(out, store=store)
    ratings = store.ratings(store.batches()[0].batch_id)
    assert sorted((x.rater, x.item_id, x.score) for x in ratings) == [("carol", "q0", 0.0),
                                                                               ("carol", "q1", 1.0)]
    assert run_agreement(store, "run1")["raters"] == ["carol"]
    # within one file: the two spellings score q0 twice as one rater, refused naming both lines
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    two = tmp_path / "two.jsonl"
    two.write_text("".join(json.dumps(r) + "\n" for r in [{**recs[2], "human_score": 1.0, "rater": "carol"},
                                                          {**recs[2], "human_score": 0.0, "rater": alias}]))
    with pytest.raises(BadInput, match=r"two.jsonl:2: rater 'carol' already scored this sample on line 1"):
        import_audit(two, store=store)


def test_a_rater_name_that_is_no_name_is_refused(tmp_path: Path) -> None:
    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    out = tmp_path / "items.jsonl"
    export_audit("ha", out, store=store)
    for bad in ("   ", "\u200b", "ann\x07"):
        fill(out, {"q0": 1.0, "q1": None, "q2": None}, rater=bad)
        with pytest.raises(BadInput, match=r"items.jsonl:1: rater .* is no name"):
            import_audit(out, store=store)
    fill(out, {"q0": 1.0, "q1": None, "q2": None}, rater="  Ann   Lee ")
    import_audit(out, store=store)
    assert [x.rater for x in store.human_scores("ha")] == ["Ann Lee"]


def test_add_rater_refuses_a_name_that_reads_as_another_raters() -> None:
    from evalgate.human.rating import add_rater

    store = Store()
    add_rater("carol", store=store)
    for alias in ("Carol", "c\u0430rol", "\uff43arol"):
        with pytest.raises(BadInput, match=r"reads as the existing rater 'carol'"):
            add_rater(alias, store=store)
    assert add_rater("carol", store=store)["replaced"] is True  # the same name: a new token
    assert add_rater("carl", store=store)["replaced"] is False
