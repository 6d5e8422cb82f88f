"""Statistics against hand-computed values and scipy's bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalgate.core.stats import mean_stderr, paired_bootstrap_diff, stderr_mean_of_means


def test_stderr_of_unweighted_mean_of_two_subsets() -> None:
    a, b = [1, 0, 1, 1], [0, 0, 1, 0, 1, 0]
    _, se_a = mean_stderr(a)
    _, se_b = mean_stderr(b)
    assert se_a == pytest.approx(math.sqrt(0.25 / 4))  # var(ddof=1) of [1,0,1,1] = 0.25
    assert se_b == pytest.approx(math.sqrt((4 / 15) / 6))  # mean 1/3: (2*(2/3)^2 + 4*(1/3)^2) / 5 = 4/15
    assert stderr_mean_of_means([se_a, se_b]) == pytest.approx(0.5 * math.sqrt(se_a ** 2 + se_b ** 2))


def test_paired_bootstrap_matches_scipy() -> None:
    from scipy import stats as sps

    rng = np.random.default_rng(7)
    base = rng.integers(0, 2, 200).astype(float)
    cand = np.where(rng.random(200) < 0.2, 1.0, base)
    ours = paired_bootstrap_diff(cand, base, 0.95, 20_000, seed=1)
    ref = sps.bootstrap((cand, base), lambda x, y, axis: x.mean(axis) - y.mean(axis), paired=True,
                        vectorized=True, method="percentile", n_resamples=20_000, random_state=2)
    assert ours["diff"] == pytest.approx(cand.mean() - base.mean())
    assert ours["low"] == pytest.approx(ref.confidence_interval.low, abs=0.01)
    assert ours["high"] == pytest.approx(ref.confidence_interval.high, abs=0.01)
    assert ours["stderr"] == pytest.approx(ref.standard_error, rel=0.05)
    assert paired_bootstrap_diff(cand, base, 0.95, 2000, seed=3) == paired_bootstrap_diff(cand, base, 0.95, 2000,
                                                                                          seed=3)


def test_two_stage_bootstrap_constant_and_fixed_baseline() -> None:
    cand = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]])
    # identical seeds and a baseline that differs by exactly 1 on every item: every resample gives the same diff
    r = paired_bootstrap_diff(cand, cand[0] - 1.0, 0.9, 500, seed=0)
    assert (r["diff"], r["low"], r["high"]) == pytest.approx((1.0, 1.0, 1.0))
    r = paired_bootstrap_diff(np.ones(5), 0.25, 0.9, 500)
    assert (r["low"], r["high"]) == pytest.approx((0.75, 0.75))


def test_stderr_functions_by_hand() -> None:
    from evalgate.core.stats import stderr, stderr_items_paired, stderr_over_seeds, stderr_paired_difference

    assert stderr([1, 0, 1, 1]) == pytest.approx(0.25)  # sqrt(0.25 / 4)
    assert math.isnan(stderr([0.5]))
    cand = np.array([[1, 0, 1, 0], [1, 1, 1, 0]], dtype=float)
    # per-item means over seeds [1, .5, 1, 0]: mean .625, squared deviations sum .6875, var .6875 / 3
    assert stderr_items_paired(cand) == pytest.approx(math.sqrt(0.6875 / 3 / 4))
    # seed means .5 and .75: sd .25 / sqrt(2), over sqrt(2) seeds -> .125
    assert stderr_over_seeds(cand) == pytest.approx(0.125)
    # differences from b = [0, 0, 1, 0]: [1, .5, 0, 0], mean .375, squared deviations sum .6875
    assert stderr_paired_difference(cand, np.array([0, 0, 1, 0.0])) == pytest.approx(math.sqrt(0.6875 / 3 / 4))
    assert stderr_paired_difference(cand[0], np.zeros(4)) == pytest.approx(stderr([1, 0, 1, 0]))
