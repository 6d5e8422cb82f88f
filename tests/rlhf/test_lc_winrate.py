"""The length-controlled win rate (evalgate/rlhf/lc_winrate.py) against AlpacaEval's own
``get_length_controlled_winrate`` (alpaca-eval 0.6.6, run by tools/alpacaeval_lc_reference.py in its own environment;
its numbers are committed in tests/rlhf/alpacaeval_data/alpacaeval_lc_reference.json, `make alpacaeval-reference`
rewrites them) on six tables, two of them AlpacaEval's own annotations; and by hand where the fit has a closed form."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalgate.rlhf import lc_winrate
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


def _tables(count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random (tanh length feature, preferences) tables of 5-60 items: half on AlpacaEval's preference grid (ties,
    so labels weighted 0), half uniform, one in ten with no length term."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        n = int(rng.integers(5, 61))
        p = rng.choice([0, 0.25, 0.5, 0.75, 1], n) if k % 2 else rng.uniform(0, 1, n)
        d = rng.normal(0, 300, n) * (k % 10 != 0)
        out.append((np.tanh(d / d.std(ddof=1)) if d.any() else np.zeros(n), p))
    return out


def test_direct_liblinear_is_what_runs_with_the_installed_scikit_learn():
    """The fast path passed its check against the public estimators here; a scikit-learn whose private wrapper
    changed would silently run the slow path, and this says so."""
    assert lc_winrate._liblinear() is not None


def test_direct_fits_equal_logistic_regression_exactly():
    """Each fit through liblinear's wrapper is LogisticRegression's fit, coefficient for coefficient (the same
    liblinear call with the same seed), at every C of the grid, on tables with zero-weight rows."""
    with lc_winrate._checked_inputs():
        for x, p in _tables(12, seed=3):
            for c in np.logspace(-4, 4, 10):
                assert lc_winrate._fit(x, p, c) == lc_winrate._fit_sklearn(x, p, c)


def test_direct_cross_validation_picks_logistic_regression_cvs_c():
    with lc_winrate._checked_inputs():
        for x, p in _tables(15, seed=4):
            assert lc_winrate._cv_c(x, p) == lc_winrate._cv_c_sklearn(x, p)


@pytest.mark.parametrize("name", ["alpacaeval_mixtral_concise", "hand8", "small4"])
def test_whole_result_and_bootstrap_error_equal_the_public_estimators(name, monkeypatch):
    """Same seed, same draws: the document (LC rate, C, coefficients, bootstrap standard error) is the one the
    public estimators give."""
    prefs, diffs = _evalgate_side(TABLES[name])
    fast = length_controlled_win_rate(prefs, diffs, resamples=40, seed=5)
    monkeypatch.setattr(lc_winrate, "_liblinear", lambda: None)
    assert length_controlled_win_rate(prefs, diffs, resamples=40, seed=5) == fast


def test_direct_fit_warns_at_max_iter_as_logistic_regression_does(monkeypatch):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    x, p = _tables(1, seed=6)[0]
    design, y, w = lc_winrate._duplicated(x, p)
    with pytest.warns(ConvergenceWarning, match="failed to converge") as public:
        model = LogisticRegression(C=100.0, solver="liblinear", fit_intercept=False, random_state=123, max_iter=1,
                                   **lc_winrate._l1(False)).fit(design, y, sample_weight=w)
    monkeypatch.setattr(lc_winrate, "MAX_ITER", 1)
    with pytest.warns(ConvergenceWarning, match="failed to converge") as direct:
        assert lc_winrate._fit(x, p, 100.0) == tuple(model.coef_[0])
    assert [str(r.message) for r in direct] == [str(r.message) for r in public]


def test_a_changed_private_wrapper_falls_back_to_the_public_estimators(monkeypatch):
    """A scikit-learn whose ``train_wrap`` takes other arguments (or returns other numbers) fails the check and
    the public estimators run: same result, no error."""
    import types

    import sklearn.svm

    def other_arguments(*args):
        raise TypeError("train_wrap() takes exactly 13 positional arguments (12 given)")

    def other_numbers(*args):
        return np.zeros((1, 2)), np.ones(1, dtype=np.int32)

    prefs, diffs = _evalgate_side(TABLES["hand8"])
    expected = length_controlled_win_rate(prefs, diffs, resamples=10)
    for broken in (other_arguments, other_numbers):
        # the package's attribute, which the fast path imports; scikit-learn's estimators keep the real module
        monkeypatch.setattr(sklearn.svm, "_liblinear",
                            types.SimpleNamespace(train_wrap=broken, set_verbosity_wrap=lambda level: None))
        lc_winrate._liblinear.cache_clear()
        try:
            assert lc_winrate._liblinear() is None
            assert length_controlled_win_rate(prefs, diffs, resamples=10) == expected
        finally:
            lc_winrate._liblinear.cache_clear()
    monkeypatch.undo()
    assert lc_winrate._liblinear() is not None
