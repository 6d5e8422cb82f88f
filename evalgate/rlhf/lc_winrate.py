"""Length-controlled win rate as AlpacaEval 2 computes it by default (Dubois et al. 2024, "Length-Controlled
AlpacaEval: A Simple Way to Debias Automatic Evaluators", arXiv:2404.04475), fitted with scikit-learn.

The model, penalty and cross-validation follow tatsu-lab/alpaca_eval ``metrics/glm_winrate.py``
(``get_length_controlled_winrate``, ``fit_LogisticRegressionCV``); what is left out and why is in docs/RLHF.md.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

CV_SPLITS = 5
"""Folds of the cross-validation that picks C (AlpacaEval's ``GLM_INFO[...]["kwargs"]["n_splits"]``)."""
CS = 10
"""Candidate Cs: scikit-learn's ``LogisticRegressionCV`` default, ``np.logspace(-4, 4, 10)``, as AlpacaEval uses."""
NO_CV_C = 100.0
"""C of AlpacaEval's fit without cross-validation (``fit_LogisticRegressionCV(n_splits=0)``); used here only when
there are fewer items than folds."""
RANDOM_STATE = 123
"""liblinear's seed in AlpacaEval's fit."""
LC_RESAMPLES = 200
"""Item bootstrap resamples for evalgate's standard error of the LC win rate."""
MAX_ITER, TOL = 100, 1e-4
"""``LogisticRegression``'s ``max_iter`` and ``tol`` defaults, which AlpacaEval's fit keeps."""
L1R_LR = 6
"""liblinear's solver number of L1-regularised logistic regression (``L1R_LR`` in liblinear's ``linear.h``)."""
EXTREME_ABS, EXTREME_REL = 0.10, 4
"""AlpacaEval's ``get_is_extreme_changes`` defaults (``abs_diff=10`` percentage points, ``rel_diff=4``)."""


def is_extreme_change(raw: float, lc: float, abs_diff: float = EXTREME_ABS, rel_diff: float = EXTREME_REL) -> bool:
    """AlpacaEval's ``get_is_extreme_changes`` on rates in [0, 1]: the LC rate is below
    ``min(raw - raw / rel_diff, raw - abs_diff)`` or above ``max(raw + (1 - raw) / rel_diff, raw + abs_diff)``
    (AlpacaEval warns "This might be a sign of failure of the GLM")."""
    too_small = lc < min(raw - raw / rel_diff, raw - abs_diff)
    too_large = lc > max(raw + (1 - raw) / rel_diff, raw + abs_diff)
    return bool(too_small or too_large)


def _l1(cv: bool) -> dict[str, Any]:
    """The L1 penalty in the spelling of the installed scikit-learn (``penalty="l1"`` is deprecated from 1.8)."""
    import sklearn

    if tuple(int(v) for v in sklearn.__version__.split(".")[:2]) >= (1, 8):
        return {"l1_ratios": (1.0,), "use_legacy_attributes": False} if cv else {"l1_ratio": 1.0}
    return {"penalty": "l1"}


def _checked_inputs() -> AbstractContextManager[None]:
    """scikit-learn told that the fits' inputs are finite and their parameters valid (both checked above or fixed
    here): its per-fit checks were ~45 % of a bootstrap of small fits (bench/lc_winrate.py); the fits are the same."""
    import sklearn

    return sklearn.config_context(assume_finite=True, skip_parameter_validation=True)


def _soft_log_loss(y: np.ndarray, q: np.ndarray, true_prob: np.ndarray) -> float:
    """Mean log loss of predicted P(model preferred) ``q`` against the item's preference, read back from the
    duplicated rows (a label-1 row carries p, a label-0 row 1 - p), as AlpacaEval's ``logloss_continuous``."""
    p = np.where(y == 1, true_prob, 1 - true_prob)
    q = np.clip(q, 1e-15, 1 - 1e-15)
    return float(-np.mean(p * np.log(q) + (1 - p) * np.log(1 - q)))


def _duplicated(x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Soft labels as weights: each item once with label 1 weighted p, once with label 0 weighted 1 - p."""
    design = np.column_stack([x, np.ones_like(x)])  # [tanh(std_delta_len), baseline column]
    return np.vstack([design, design]), np.r_[np.ones(len(p)), np.zeros(len(p))], np.r_[p, 1 - p]


def _fit(x: np.ndarray, p: np.ndarray, c: float) -> tuple[float, float]:
    """L1 (liblinear) logistic regression at ``c``, no free intercept; returns (phi, theta)."""
    liblinear = _liblinear()
    if liblinear is None:
        return _fit_sklearn(x, p, c)
    phi, theta = _train(liblinear, *_duplicated(x, p), c, _seeds(1)[0])
    return float(phi), float(theta)


def _fit_sklearn(x: np.ndarray, p: np.ndarray, c: float) -> tuple[float, float]:
    """``_fit`` through ``LogisticRegression``, scikit-learn's public API."""
    from sklearn.linear_model import LogisticRegression

    design, y, w = _duplicated(x, p)
    model = LogisticRegression(C=c, solver="liblinear", fit_intercept=False, random_state=RANDOM_STATE, **_l1(False))
    model.fit(design, y, sample_weight=w)
    return float(model.coef_[0][0]), float(model.coef_[0][1])


def _cv_c(x: np.ndarray, p: np.ndarray) -> float:
    """C picked by ``LogisticRegressionCV`` over ``CS`` values, ``GroupKFold(CV_SPLITS)`` keeping an item's two
    rows in one fold, scored by the soft log loss: the fits, scores and pick of ``LogisticRegressionCV.fit``
    (``_log_reg_scoring_path`` per fold, the C of the highest score summed over folds, the first on a tie) with
    liblinear called directly (``_liblinear``)."""
    liblinear = _liblinear()
    return _cv_c_sklearn(x, p) if liblinear is None else _cv_c_with(liblinear, x, p)


def _cv_c_with(liblinear: Any, x: np.ndarray, p: np.ndarray) -> float:
    from scipy.special import expit
    from sklearn.model_selection import GroupKFold

    design, y, w = _duplicated(x, p)
    groups = np.r_[np.arange(len(p)), np.arange(len(p))]
    true_prob = np.r_[p, 1 - p]
    cs, seeds = np.logspace(-4, 4, CS), _seeds(CS)  # each fold's path draws its Cs' seeds from one RandomState
    scores = []
    for fit_rows, test_rows in GroupKFold(n_splits=CV_SPLITS).split(design, y, groups):
        fold = design[fit_rows], y[fit_rows], w[fit_rows]
        test = design[test_rows]
        scores.append([-_soft_log_loss(y[test_rows], expit(test @ _train(liblinear, *fold, c, seed) + 0.0),
                                       true_prob[test_rows]) for c, seed in zip(cs, seeds, strict=True)])
    return float(cs[int(np.argmax(np.asarray(scores).sum(axis=0)))])


def _cv_c_sklearn(x: np.ndarray, p: np.ndarray) -> float:
    """``_cv_c`` through ``LogisticRegressionCV``, scikit-learn's public API."""
    import sklearn
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    design, y, w = _duplicated(x, p)
    groups = np.r_[np.arange(len(p)), np.arange(len(p))]
    true_prob = np.r_[p, 1 - p]
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_scorer(_soft_log_loss, response_method="predict_proba",
                             greater_is_better=False).set_score_request(true_prob=True)
        model = LogisticRegressionCV(Cs=CS, cv=GroupKFold(n_splits=CV_SPLITS), scoring=scorer, solver="liblinear",
                                     fit_intercept=False, random_state=RANDOM_STATE, **_l1(True))
        model.set_fit_request(sample_weight=True)
        model.fit(design, y, sample_weight=w, groups=groups, true_prob=true_prob)
    return float(np.ravel(model.C_)[0])


@functools.cache
def _seeds(k: int) -> tuple[int, ...]:
    """The seeds scikit-learn's ``_fit_liblinear`` hands liblinear: ``randint(INT_MAX)`` drawn from
    ``check_random_state(RANDOM_STATE)``, one draw per fit (``LogisticRegression`` makes the state afresh for each
    fit, ``LogisticRegressionCV`` once per fold for its ``k`` Cs)."""
    state = np.random.RandomState(RANDOM_STATE)
    return tuple(int(state.randint(np.iinfo("i").max)) for _ in range(k))


def _train(liblinear: Any, design: np.ndarray, y: np.ndarray, w: np.ndarray, c: float,
           seed: int) -> np.ndarray:
    """liblinear's L1 logistic regression on C-contiguous float64 ``design`` ``(m, 2)``, labels ``y`` in {0, 1}
    and weights ``w`` ``(m,)``, with the arguments ``_fit_liblinear`` passes for ``LogisticRegression(C=c,
    solver="liblinear", fit_intercept=False)``; returns the coefficients ``(2,)``; warns as it does when
    liblinear stops at ``MAX_ITER``."""
    from sklearn.exceptions import ConvergenceWarning

    liblinear.set_verbosity_wrap(0)
    coef, n_iter = liblinear.train_wrap(design, y, False, L1R_LR, TOL, -1.0, c, np.ones(2), MAX_ITER, seed, 0.1, w)
    if max(n_iter) >= MAX_ITER:
        warnings.warn("Liblinear failed to converge, increase the number of iterations.", ConvergenceWarning,
                      stacklevel=2)
    return np.asarray(coef[0])


@functools.cache
def _liblinear() -> Any | None:
    """scikit-learn's own liblinear wrapper (``sklearn.svm._liblinear``, private: ``train_wrap``), when on a
    check table its fit and cross-validated C equal ``LogisticRegression``'s and ``LogisticRegressionCV``'s
    exactly; None otherwise, and the public estimators run. ``LogisticRegression.fit`` costs ~0.8 ms a call on a
    few dozen rows, ~30 times liblinear's own work (bench/lc_winrate.py)."""
    try:
        from sklearn.svm import _liblinear as liblinear

        p = np.array([1, 0.5, 0, 1, 0.75, 1, 0, 0.25, 1, 1, 0.5, 0])
        x = np.tanh(np.array([1.2, 0.3, -0.8, 2.0, -0.1, 0.9, -1.5, 0.2, 0.4, 1.1, -0.6, -0.3]))
        design, y, w = _duplicated(x, p)
        with _checked_inputs(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same_fit = all(tuple(_train(liblinear, design, y, w, c, _seeds(1)[0])) == _fit_sklearn(x, p, c)
                           for c in (0.01, 1.0, 100.0))
            same_cv = same_fit and _cv_c_with(liblinear, x, p) == _cv_c_sklearn(x, p)
    except Exception:  # noqa: BLE001 - any change of the private entry point means: use the public API
        return None
    return liblinear if same_cv else None


def length_controlled_win_rate(preferences: Sequence[float], len_diff: Sequence[float],
                               resamples: int = LC_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """AlpacaEval 2's length-controlled win rate of one model against one baseline.

    The GLM is AlpacaEval's ``np.tanh(std_delta_len) + not_gamed_baseline - 1``: ``P(model preferred) =
    sigmoid(phi * tanh(d_i / sd(d)) + theta)``, ``d_i`` the length difference in characters and ``sd`` its sample
    standard deviation (ddof=1), fitted to the preferences as soft labels (each item twice, label 1 weighted p and
    label 0 weighted 1 - p) by L1-penalised logistic regression (liblinear, ``random_state=123``) with no free
    intercept, so ``theta`` (the baseline column) is penalised like ``phi``; C is picked from
    ``np.logspace(-4, 4, 10)`` by 5-fold ``GroupKFold`` cross-validation on the soft log loss
    (``LogisticRegressionCV``), with fewer than 5 items C = 100 without cross-validation (AlpacaEval's
    ``n_splits=0`` fit). The LC win rate is the prediction with the length term zero: ``sigmoid(theta)``.
    AlpacaEval's per-instruction difficulty term needs its 805 instructions' difficulties, so its default
    ``length_controlled_v1`` reduces to its ``length_controlled_minimal`` formula here.

    Args:
        preferences: shape ``(n,)``, each item's preference for the model in [0, 1] (AlpacaEval's preference - 1).
        len_diff: shape ``(n,)``, model length minus baseline length per item, in characters (the sign is
            AlpacaEval's reversed: its ``std_delta_len`` is baseline minus model, so ``phi`` has the opposite sign
            and the LC rate is the same).
        resamples: item bootstrap resamples for ``lc_standard_error`` (0: none).
        seed: numpy ``default_rng`` seed of the bootstrap.

    Returns:
        ``lc_win_rate`` in [0, 1]; ``theta``, ``phi`` (the fitted coefficients); ``C`` and ``cv`` (whether C came
        from cross-validation); ``lc_standard_error``: evalgate's, the standard deviation (ddof=1) of the LC rate
        over ``resamples`` item bootstrap resamples refitted at the same C (None without resamples or with under
        two items); ``lc_standard_error_alpacaeval``: AlpacaEval's ``lc_standard_error``, the standard error of
        the mean of the per-item predicted preferences, which without per-instruction terms is 0 (every item's
        prediction is ``sigmoid(theta)``); ``raw_win_rate``; ``extreme_change``: AlpacaEval's
        ``get_is_extreme_changes(raw, lc)``; ``note``: why the length term is absent, or the warning
        AlpacaEval logs for an extreme change. Where every preference is 0 or every one is 1 nothing is fitted
        and the raw rate is reported with a note (AlpacaEval's liblinear fit then sees one class: it drops the
        zero-weight rows and returns 0.99997 for all wins).

    Raises:
        ValueError: no items, shapes differ, or a preference outside [0, 1].
    """
    from scipy.special import expit

    p = np.asarray(preferences, dtype=float)
    d = np.asarray(len_diff, dtype=float)
    if p.shape != d.shape or p.ndim != 1 or len(p) == 0:
        raise ValueError(f"preferences {p.shape} and length differences {d.shape} must be the same non-empty 1-D shape")
    if ((p < 0) | (p > 1)).any() or np.isnan(p).any():
        raise ValueError("a preference is outside [0, 1]")
    raw = float(p.mean())
    if raw in (0.0, 1.0):
        return {"lc_win_rate": raw, "theta": None, "phi": None, "C": None, "cv": False, "lc_standard_error": None,
                "lc_standard_error_alpacaeval": None, "raw_win_rate": raw, "extreme_change": False,
                "note": f"every preference is {raw:g}: no finite fit, the raw win rate is reported"}
    sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    x = np.tanh(d / sd) if sd > 0 else np.zeros_like(d)
    cv = len(p) >= CV_SPLITS
    with _checked_inputs():
        c = _cv_c(x, p) if cv else NO_CV_C
        phi, theta = _fit(x, p, c)
        se = _bootstrap_se(x, p, c, resamples, seed) if resamples and len(p) > 1 else None
    lc = float(expit(theta))
    predicted = expit(np.full(len(p), theta))  # each item's prediction with its length term zero
    se_alpaca = float(np.std(predicted, ddof=1) / math.sqrt(len(p))) if len(p) > 1 else None
    extreme = is_extreme_change(raw, lc)
    note = None if sd > 0 else "every length difference is the same: no length term"
    if extreme:
        note = (f"LC win rate {lc:.3f} is very different from the raw {raw:.3f} (AlpacaEval's extreme-change "
                "warning: this might be a sign of failure of the GLM)")
    return {"lc_win_rate": lc, "theta": theta, "phi": phi, "C": c, "cv": cv, "lc_standard_error": se,
            "lc_standard_error_alpacaeval": se_alpaca, "raw_win_rate": raw, "extreme_change": extreme, "note": note}


def _bootstrap_se(x: np.ndarray, p: np.ndarray, c: float, resamples: int, seed: int) -> float:
    """Standard deviation of ``sigmoid(theta)`` over item bootstrap resamples, each refitted at ``c`` on the full
    table's length feature (a resample of one class counts its raw rate, as the full table would)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(seed)
    rates = []
    with warnings.catch_warnings():  # a resample liblinear leaves at max_iter is still a draw of the estimator
        warnings.simplefilter("ignore", ConvergenceWarning)
        rates += [_resample_rate(x, p, c, rng.integers(0, len(p), len(p))) for _ in range(resamples)]
    return float(np.std(rates, ddof=1))


def _resample_rate(x: np.ndarray, p: np.ndarray, c: float, idx: np.ndarray) -> float:
    mean = float(p[idx].mean())
    if mean in (0.0, 1.0):  # one class only: the rate as the full table reports it (above)
        return mean
    _, theta = _fit(x[idx], p[idx], c)
    return 1 / (1 + math.exp(-theta))

