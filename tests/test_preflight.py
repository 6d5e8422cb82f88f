"""``evalgate preflight``: the reward histogram, zero-variance shares, trivial baselines and the chapter's verdicts
(expected values computed by hand in the comments), and one real run through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.training.preflight import histogram, score_baselines, verdicts
from tests.conftest import REPO

ADDITION = REPO / "protocols" / "addition.yaml"


def _by_name(vs: list) -> dict:
    return {v.name: v.status for v in vs}


def test_histogram_counts_prompts_per_pass_rate() -> None:
    # K=4: rates 0, 1/4, 1, 1 -> one prompt at 0 and 0.25, none at 0.5 and 0.75, two at 1
    assert histogram([0.0, 0.25, 1.0, 1.0], 4, binary=True) == [(0.0, 1), (0.25, 1), (0.5, 0), (0.75, 0), (1.0, 2)]
    # not 0/1 scores: ten bins, 1.0 in the last
    h = histogram([0.05, 0.95, 1.0], 4, binary=False)
    assert h[0] == (0.0, 1) and h[9] == (0.9, 2) and sum(c for _, c in h) == 3


def test_too_sparse_and_too_lenient() -> None:
    sparse = [0.0] * 96 + [1.0] * 4  # 96% zeros >= 95%
    assert _by_name(verdicts(sparse, {"empty": 0.0})) == {
        "too_sparse": "fired", "too_lenient": "ok", "heavy_tail": "not_checkable", "sign_confusion": "ok"}
    lenient = [1.0] * 19 + [0.0]  # 95% ones
    assert _by_name(verdicts(lenient, {}))["too_lenient"] == "fired"
    assert _by_name(verdicts([0.0] * 94 + [1.0] * 6, {}))["too_sparse"] == "ok"  # 94% < 95%


def test_heavy_tail() -> None:
    # 97 x 0, 0.01, 0.02, 1.0: mean 0.0103; the 1.0 sample's squared deviation 0.9794 is ~99% of the total
    tail = [0.0] * 97 + [0.01, 0.02, 1.0]
    assert _by_name(verdicts(tail, {}))["heavy_tail"] == "fired"
    # 0, 0.5, 1 in equal thirds: the top sample holds 0.25 of 16.5 (1.5%)
    assert _by_name(verdicts([0.0, 0.5, 1.0] * 33, {}))["heavy_tail"] == "ok"


def test_sign_confusion() -> None:
    scores = [0.0] * 24 + [1.0]  # policy mean 0.04
    assert _by_name(verdicts(scores, {"constant": 0.05}))["sign_confusion"] == "fired"  # "0" is no item's sum
    assert _by_name(verdicts(scores, {"constant": 0.0}))["sign_confusion"] == "ok"
    # the most common gold answer earns exactly its share of the items (1 of 16): nothing wrong with the scorer
    assert _by_name(verdicts(scores, {"most_common_gold": 1 / 16}, {"most_common_gold": 1 / 16}))[
        "sign_confusion"] == "ok"
    assert _by_name(verdicts([-1.0, 1.0, 0.5], {}))["sign_confusion"] == "fired"  # both signs


def test_trivial_baselines_scored_by_the_protocols_scorer() -> None:
    items = [{"id": "a", "answer": "5"}, {"id": "b", "answer": "5"}, {"id": "c", "answer": "7"}]
    # empty: no number (0); constant "0": no sum is 0; most common gold "5": right on 2 of 3, and deserves 2 of 3
    scores, deserved = score_baselines(ADDITION, items)
    assert scores == pytest.approx({"empty": 0.0, "constant": 0.0, "most_common_gold": 2 / 3})
    assert deserved == pytest.approx({"empty": 0.0, "constant": 0.0, "most_common_gold": 2 / 3})


def test_preflight_cli_on_a_real_checkpoint(tmp_path: Path, tiny_checkpoint: Path) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.demo.train import addition_items
    from evalgate.splits import write_split
    from evalgate.store import Store

    write_split("addition-train", "smoke", addition_items("train", 2), {"source": "evalgate.demo.train"})
    report = tmp_path / "preflight.html"
    args = ["preflight", "--protocol", str(ADDITION), "--checkpoint", str(tiny_checkpoint), "--split", "addition-train",
            "--samples", "4", "--report", str(report), "--json"]
    res = CliRunner().invoke(main, args)
    # a greedy protocol: one sample per prompt, each prompt all-correct or all-wrong -> 100% zero-variance > 0.5
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["samples"] == 1 and doc["prompts"] == 2 and doc["zero_variance"] == 1.0
    assert doc["all_correct"] + doc["all_wrong"] == 1.0
    assert "greedily" in doc["notes"][0]
    assert doc["verdicts"][0]["name"] == "truncation" and 0.0 <= doc["truncated"] <= 1.0  # finish reasons read
    assert "<svg" in report.read_text()
    reads = [r for r in Store().access_rows("addition-train") if r.outcome == "read"]
    assert [r.purpose for r in reads] == ["preflight"]
    res = CliRunner().invoke(main, [*args, "--max-zero-variance", "1.0"])
    assert res.exit_code == 0, res.output


def test_truncation_comes_first() -> None:
    """Issue 28, item 13: 96 of 128 addition samples (75 %) were cut at max_tokens and the verdict advised
    intermediate rewards and a curriculum. Zeros that are mostly truncations say so first."""
    scores = [0.0] * 96 + [0.0] * 28 + [1.0] * 4  # 124 zeros (96.9 % >= 95 %: too sparse), 96 of them cut
    finish = ["length"] * 96 + ["stop"] * 32
    vs = verdicts(scores, {"empty": 0.0}, None, finish)
    assert vs[0].name == "truncation" and vs[0].status == "fired"
    assert "96 of 128 samples (75%)" in vs[0].message and "max_tokens" in vs[0].message
    sparse = next(v for v in vs if v.name == "too_sparse")
    assert sparse.status == "fired" and "intermediate rewards" not in sparse.message
    assert "truncation" in sparse.message
    # GSM8K: 25 of 64 (39 %) cut, 25 of the 45 zeros: fired (> 20 % of samples)
    g = verdicts([0.0] * 45 + [1.0] * 19, {}, None, ["length"] * 25 + ["stop"] * 39)
    assert (g[0].name, g[0].status) == ("truncation", "fired")
    # neighbours: 10 of 128 cut (7.8 %) and 10 of 100 zeros: ok, and the sparse remedy stays the chapter's
    ok = verdicts([0.0] * 100 + [1.0] * 28, {}, None, ["length"] * 10 + ["stop"] * 118)
    assert ok[0].status == "ok"
    # few cuts, but they are most of the zeros (6 of 10 zeros, 6 of 100 samples): fired
    few = verdicts([0.0] * 10 + [1.0] * 90, {}, None, ["length"] * 6 + ["stop"] * 94)
    assert few[0].status == "fired"
    very = verdicts([0.0] * 99 + [1.0], {}, None, ["stop"] * 100)
    assert "intermediate rewards" in next(v for v in very if v.name == "too_sparse").message


def test_after_truncation_fired_a_shape_that_did_not_fire_is_not_judged() -> None:
    """Issue 44, item 9: ``too_sparse: ok: 87.5% of samples score 0`` was printed after truncation fired. 112 of
    128 samples score 0 (87.5 % < 95 %), 96 of them cut at max_tokens: truncation fires, and too_sparse, too_lenient
    (4 of 128 score 1) are not judged; sign confusion (trivial answers) still is; without finish reasons, as before."""
    scores = [0.0] * 112 + [1.0] * 16
    vs = {v.name: v for v in verdicts(scores, {"empty": 0.0}, None, ["length"] * 96 + ["stop"] * 32)}
    assert vs["truncation"].status == "fired"
    for name in ("too_sparse", "too_lenient"):
        assert vs[name].status == "not_judged" and vs[name].message.startswith("not judged: ")
    assert "87.5% of samples score 0" in vs["too_sparse"].message
    assert vs["heavy_tail"].status == "not_checkable" and vs["sign_confusion"].status == "ok"
    assert _by_name(verdicts(scores, {"empty": 0.0}, None, ["stop"] * 128))["too_sparse"] == "ok"
    tail = verdicts([0.0] * 90 + [0.5] * 37 + [1.0], {}, None, ["length"] * 90 + ["stop"] * 38)
    assert _by_name(tail)["heavy_tail"] == "not_judged"
