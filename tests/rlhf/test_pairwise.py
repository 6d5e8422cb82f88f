"""Pairwise judge statistics (evalgate/rlhf/pairwise.py): expected values by hand and the bootstrap interval against
scipy.stats.bootstrap on the same tables (the LC win rate: tests/rlhf/test_lc_winrate.py)."""


from typing import Any

import numpy as np
import pytest

from evalgate.rlhf.pairwise import (
    PairJudgement,
    item_preference,
    per_item_table,
    position_flip,
    win_rate,
)


def _pair(item: str, first: str | None, second: str | None, mlen: int = 100, blen: int = 100) -> PairJudgement:
    return PairJudgement(item, first, second, mlen, blen)


# model_first, baseline_first -> preference by hand: the model's side of each verdict, averaged
HAND = [("A", "B", 1.0, False), ("A", "A", 0.5, True), ("tie", "B", 0.75, True), ("B", "A", 0.0, False),
        ("tie", "tie", 0.5, False), ("B", "tie", 0.25, True)]


@pytest.mark.parametrize("first,second,pref,flip", HAND)
def test_item_preference_and_flip_by_hand(first, second, pref, flip):
    pair = _pair("q", first, second)
    assert item_preference(pair) == pref
    assert position_flip(pair) is flip


def test_an_unparseable_item_is_a_loss_in_every_rate():
    pair = _pair("q", None, "B")
    assert item_preference(pair) is None and position_flip(pair) is None
    out = win_rate([pair, _pair("r", "A", "B")], resamples=200)
    # (0 + 1) / 2: the unparseable item counts as a loss, never left out (issue 42, item 3) and never a tie
    assert out["win_rate"] == 0.5 and out["items"] == 2 and out["parsed_items"] == 1
    assert out["unparseable_items"] == 1 and out["unparseable_as"] == "loss"
    row = per_item_table([pair])[0]
    assert row["status"] == "unparseable" and row["preference"] == 0.0


def test_breaking_the_judge_whenever_losing_does_not_lift_the_win_rate():
    """Issue 42, item 3: the model wins item 1 in both orders and loses items 2-4; an answer that makes the judge's
    output unparseable whenever it is losing lifted the win rate from 1/4 to 1 (items 2-4 left out)."""
    honest = [_pair("1", "A", "B"), *(_pair(str(i), "B", "A") for i in (2, 3, 4))]
    broken = [_pair("1", "A", "B"), _pair("2", None, None), _pair("3", None, "A"), _pair("4", "B", None)]
    for pairs in (honest, broken):
        out = win_rate(pairs, resamples=500)
        # equal lengths: the LC fit is the L1-penalised intercept alone at C = 100 (4 items, no CV), whose optimum
        # by hand is sigmoid(theta) = mean + 1 / (C n) for theta < 0 (tests/rlhf/test_lc_winrate.py)
        assert out["win_rate"] == 0.25 and out["lc_win_rate"] == pytest.approx(0.25 + 1 / 400, abs=1e-4)
        assert out["items"] == 4
    assert win_rate(broken, resamples=500)["unparseable_items"] == 3


def test_win_rate_table_by_hand():
    pairs = [_pair("1", "A", "B"), _pair("2", "A", "A"), _pair("3", "tie", "B"), _pair("4", "B", "A"),
             _pair("5", None, "A")]
    out = win_rate(pairs, resamples=2000)
    assert out["win_rate"] == pytest.approx((1 + 0.5 + 0.75 + 0 + 0) / 5)  # item 5 unparseable: a loss
    assert out["items"] == 5 and out["parsed_items"] == 4 and out["unparseable_items"] == 1
    # flips, over the items parsed in both orders: item 2 (win then loss) and item 3 (tie then win)
    assert out["position_flip_rate"] == pytest.approx(2 / 4)
    # single verdicts from the model's side of the parsed items: 1,1 | 1,0 | .5,1 | 0,0
    assert (out["wins"], out["ties"], out["losses"]) == (4, 1, 3)
    # non-tie verdicts A,B,A,A,B,B,A: four of seven for position A
    assert out["first_position_rate"] == pytest.approx(4 / 7)
    assert out["low"] <= out["win_rate"] <= out["high"]


def test_always_first_position_judge_scores_half_and_flips_everything():
    pairs = [_pair(str(i), "A", "A") for i in range(10)]
    out = win_rate(pairs, resamples=500)
    assert out["win_rate"] == 0.5 and out["position_flip_rate"] == 1.0 and out["first_position_rate"] == 1.0
    assert (out["low"], out["high"]) == (0.5, 0.5)


def test_bootstrap_ci_matches_scipy_percentile_bootstrap():
    from scipy.stats import bootstrap

    prefs = [1, 1, 0.75, 0.5, 0, 1, 0.25, 1, 0.5, 0.75, 0, 1, 1, 0.5, 0.75, 0.25, 1, 0, 1, 0.5]
    verdicts = {1: ("A", "B"), 0.75: ("tie", "B"), 0.5: ("tie", "tie"), 0.25: ("B", "tie"), 0: ("B", "A")}
    pairs = [_pair(str(i), *verdicts[p]) for i, p in enumerate(prefs)]
    out = win_rate(pairs, resamples=20_000)
    ref = bootstrap((np.array(prefs, dtype=float),), np.mean, confidence_level=0.95, n_resamples=20_000,
                    method="percentile", random_state=1).confidence_interval
    assert out["win_rate"] == pytest.approx(np.mean(prefs))
    assert out["low"] == pytest.approx(ref.low, abs=0.015) and out["high"] == pytest.approx(ref.high, abs=0.015)


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="a verdict is one of"):
        _pair("q", "left", "B")
    with pytest.raises(ValueError, match="judged twice"):
        win_rate([_pair("q", "A", "B"), _pair("q", "A", "B")])
    with pytest.raises(ValueError, match="zero pairs"):
        win_rate([])



# Arena-Hard's five-level verdicts (arena-hard-auto's judge prompt: "[[A>>B]]", "[[A>B]]", "[[A=B]]", "[[B>A]]",
# "[[B>>A]]"; show_result.py counts a strong verdict as `weight` = 3 games) as a protocol declares them
ARENA_HARD = {"parse": r"\[\[(A>>B|A>B|A=B|B>A|B>>A)\]\]",
              "verdicts": {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"},
              "verdict_weights": {"A>>B": 3, "B>>A": 3}}


def _arena_options(**kw: Any) -> Any:
    from evalgate.rlhf.judge import JudgeOptions

    return JudgeOptions.model_validate({
        "mode": "pairwise", "judge": {"backend": "hf", "checkpoint": "/j", "digest": "blake3:00"},
        "template": "{question} {rubric} [A] {answer_a} [B] {answer_b}", "rubric": "helpfulness",
        "question_field": "question", "scale": None, "baseline": {"run_id": "r"},
        "sampling": {"temperature": 0.0, "max_tokens": 8, "seed": 0}, **{**ARENA_HARD, **kw}})


def test_a_weighted_verdict_scale_counts_as_arena_hard_counts() -> None:
    """By hand, as show_result.py pools games: q1 model-first A>>B (3 wins) and baseline-first B>A (1 win);
    q2 A=B (0.5) and A>>B for the baseline (3 losses); q3 B>A and A>B, both for the baseline (2 losses):
    (3 + 1 + 0.5) / (4 + 4 + 2) = 0.45. Counted unweighted it would be (1 + 0.25 + 0) / 3 = 0.4167."""
    from evalgate.rlhf.judge import parse_verdict

    o = _arena_options()
    said = {"q1": ("[[A>>B]]", "[[B>A]]"), "q2": ("[[A=B]]", "[[A>>B]]"), "q3": ("[[B>A]]", "[[A>B]]")}
    pairs = []
    for item, (first, second) in said.items():
        a, b = parse_verdict(o, first), parse_verdict(o, second)
        pairs.append(PairJudgement(item, a.value, b.value, 10, 10, a.weight, b.weight))
    assert [(p.model_first_weight, p.baseline_first_weight) for p in pairs] == [(3, 1), (1, 3), (1, 1)]
    assert win_rate(pairs, resamples=500)["win_rate"] == pytest.approx(0.45)
    assert item_preference(pairs[0]) == 1.0 and item_preference(pairs[1]) == pytest.approx(0.5 / 4)
    unweighted = [PairJudgement(p.item_id, p.model_first, p.baseline_first, 10, 10) for p in pairs]
    assert win_rate(unweighted, resamples=500)["win_rate"] == pytest.approx(1.25 / 3)


def test_verdict_weights_name_parsed_groups_of_a_pairwise_judge() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown group"):
        _arena_options(verdict_weights={"A>>>B": 3})
    with pytest.raises(ValidationError, match="whole number of games >= 1"):
        _arena_options(verdict_weights={"A>>B": 0})
