"""The length-controlled win rate (evalgate/rlhf/lc_winrate.py) against AlpacaEval's own
``get_length_controlled_winrate`` (alpaca-eval 0.6.6, run by tools/alpacaeval_lc_reference.py in its own environment;
its numbers are committed in tests/rlhf/alpacaeval_data/alpacaeval_lc_reference.json, `make alpacaeval-reference`
rewrites them) on six tables, two of them AlpacaEval's own annotations; and by hand where the fit has a closed form."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalgate.rlhf.lc_winrate import is_extreme_change, length_controlled_win_rate

DATA = Path(__file__).parent / "alpacaeval_data"
TABLES = json.loads((DATA / "tables.json").read_text(encoding="utf-8"))["tables"]
REFERENCE = json.loads((DATA / "alpacaeval_lc_reference.json").read_text(encoding="utf-8"))


def _evalgate_side(table: dict) -> tuple[list[float], list[int]]:
    """AlpacaEval's encoding (1 baseline, 2 model, 0 or 1.5 tie) as evalgate's preference for the model in [0, 1];
    the length difference model minus baseline."""
    prefs = [0.5 if q == 0 else q - 1 for q in table["preference"]]
    return prefs, [m - b for m, b in zip(table["len_model"], table["len_baseline"], strict=True)]


def test_reference_covers_alpacaeval_annotations_and_both_fits():
    assert REFERENCE["alpaca_eval"] == "0.6.6"
    assert REFERENCE["formula"] == "np.tanh(std_delta_len) + not_gamed_baseline.astype(float) - 1"
    assert set(REFERENCE["tables"]) == set(TABLES)
    assert sum(1 for name in TABLES if name.startswith("alpacaeval_")) == 2
    assert {r["n_splits"] for r in REFERENCE["tables"].values()} == {0, 5}  # the no-CV fit (4 items) and 5-fold CV


@pytest.mark.parametrize("name", sorted(TABLES))
def test_lc_win_rate_equals_alpacaeval(name):
    ref = REFERENCE["tables"][name]
    prefs, diffs = _evalgate_side(TABLES[name])
    out = length_controlled_win_rate(prefs, diffs, resamples=20)
    assert out["lc_win_rate"] == pytest.approx(ref["length_controlled_winrate"] / 100, abs=1e-3)
    assert out["raw_win_rate"] == pytest.approx(ref["win_rate"] / 100, abs=1e-9)
    # the coefficients: the baseline column, and the length term with AlpacaEval's sign (its difference is
    # baseline minus model)
    assert out["theta"] == pytest.approx(ref["weights"]["not_gamed_baseline.astype(float)"], abs=1e-3)
    assert out["phi"] == pytest.approx(-ref["weights"]["np.tanh(std_delta_len)"], abs=1e-3)
    assert out["lc_standard_error_alpacaeval"] == pytest.approx(ref["lc_standard_error"] / 100, abs=1e-9)
    assert out["cv"] is (ref["n_splits"] == 5)
    # AlpacaEval's warning and evalgate's flag agree
    assert out["extreme_change"] is ref["extreme_change"] is bool(ref["warnings"])
    assert (out["note"] is not None and "very different" in out["note"]) is ref["extreme_change"]


def test_the_issue_table_is_now_flagged():
    """Issue 46: raw 0.625 fell to an LC rate near 0.16-0.17 silently; the hand8 table (raw 0.625) falls to 0.376
    under AlpacaEval's fit and is flagged."""
    out = length_controlled_win_rate(*_evalgate_side(TABLES["hand8"]), resamples=50)
    assert out["raw_win_rate"] == 0.625 and out["lc_win_rate"] < 0.625 - 0.625 / 4 and out["extreme_change"]
    assert out["lc_standard_error"] is not None and 0 < out["lc_standard_error"] < 0.5


def test_extreme_change_bounds_by_hand():
    # AlpacaEval's docstring example: from 20% a warning below min(20 - 20/4, 20 - 10) = 10 or above
    # max(20 + 80/4, 20 + 10) = 40; from 50% below 37.5 or above 62.5
    assert is_extreme_change(0.20, 0.099) and not is_extreme_change(0.20, 0.101)
    assert is_extreme_change(0.20, 0.401) and not is_extreme_change(0.20, 0.399)
    assert is_extreme_change(0.50, 0.374) and not is_extreme_change(0.50, 0.376)
    assert is_extreme_change(0.50, 0.626) and not is_extreme_change(0.50, 0.624)


@pytest.mark.parametrize("prefs,expected", [
    # 4 items (C = 100, no CV): liblinear minimises |theta| + C * soft log loss summed over items, whose optimum
    # with no length term is sigmoid(theta) = mean - sign(theta) / (C n)
    ([1, 0.75, 0.5, 1], 0.8125 - 1 / 400),
    ([0, 0.25, 0.5, 0.25], 0.25 + 1 / 400),
])
def test_equal_lengths_is_the_penalised_intercept_by_hand(prefs, expected):
    out = length_controlled_win_rate(prefs, [30] * len(prefs), resamples=0)
    assert out["C"] == 100 and not out["cv"] and out["phi"] == 0
    assert out["lc_win_rate"] == pytest.approx(expected, abs=1e-4)
    assert "no length term" in out["note"] and out["lc_standard_error"] is None


def test_equal_lengths_under_cross_validation_by_hand():
    prefs = [1, 0.75, 0.5, 0, 1, 1, 0.75, 0.25, 1, 0.5]  # mean 0.675
    out = length_controlled_win_rate(prefs, [12] * 10, resamples=0)
    assert out["cv"] and out["C"] in set(np.logspace(-4, 4, 10))
    # the same closed form at the C the cross-validation picked; 0.5 when 1 / (C n) exceeds the gap to 0.5
    expected = max(0.5, 0.675 - 1 / (out["C"] * 10))
    assert out["lc_win_rate"] == pytest.approx(expected, abs=1e-4)


def test_separated_by_length_stays_finite():
    out = length_controlled_win_rate([1, 1, 1, 0, 0, 0], [100, 200, 300, -100, -200, -300], resamples=0)
    assert math.isfinite(out["phi"]) and out["phi"] > 0 and out["lc_win_rate"] == pytest.approx(0.5, abs=1e-3)


def test_all_wins_reports_raw_with_note():
    out = length_controlled_win_rate([1, 1, 1], [10, -5, 3])
    assert out["lc_win_rate"] == 1.0 and out["theta"] is None and "no finite fit" in out["note"]


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="outside"):
        length_controlled_win_rate([1.5, 0], [1, 2])
    with pytest.raises(ValueError, match="same non-empty"):
        length_controlled_win_rate([1, 0], [1])
