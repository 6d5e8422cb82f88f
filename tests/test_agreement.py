"""A proxy scorer's agreement with people (``agreement.proxy_agreement``, ``agreement.kappa``): every value against
the field's libraries (scipy's Spearman, scikit-learn's Cohen's kappa, the krippendorff package) or by hand, on a
small hand-made table."""

from __future__ import annotations

import numpy as np
import pytest

from evalgate.human.agreement import kappa, proxy_agreement

# eight samples on a 1-5 rating scale, both sides mapped to [0, 1]: a judge's score and the raters' mean
AUTO = [0.0, 0.25, 0.5, 0.75, 1.0, 0.25, 0.75, 0.5]
HUMAN = [0.0, 0.5, 0.5, 0.75, 1.0, 0.0, 0.5, 0.875]  # 0.875: two raters gave 4 and 5 (3.5 of 4 points)
# the same on the scale's points (x * 4, the nearest point; numpy rounds 3.5 to the even 4)
AUTO_POINTS = [0, 1, 2, 3, 4, 1, 3, 2]
HUMAN_POINTS = [0, 2, 2, 3, 4, 0, 2, 4]


def test_kappa_matches_scikit_learn() -> None:
    from sklearn.metrics import cohen_kappa_score  # imported here: scikit-learn takes seconds to import

    x, y = [0, 1, 2, 2, 3, 4, 4, 1], [0, 2, 2, 1, 3, 4, 3, 1]
    for weights in (None, "linear", "quadratic"):
        assert kappa(x, y, 5, weights) == pytest.approx(cohen_kappa_score(x, y, labels=range(5), weights=weights))
    # by hand: binary 0,0,1,1 vs 0,1,1,1: p_o = 3/4, p_e = 1/2, kappa = 0.5
    assert kappa([0, 0, 1, 1], [0, 1, 1, 1], 2) == pytest.approx(0.5)
    assert kappa([1, 1], [1, 1], 2) is None and kappa([], [], 2) is None  # chance predicts no disagreement


def test_proxy_agreement_on_a_hand_made_table() -> None:
    import krippendorff
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    got = proxy_agreement(AUTO, HUMAN, levels=5, resamples=500)
    assert got["n"] == 8 and got["levels"] == 5
    assert got["spearman"]["rho"] == pytest.approx(spearmanr(AUTO, HUMAN).statistic)
    binary = (np.array(AUTO) >= 0.5).astype(int), (np.array(HUMAN) >= 0.5).astype(int)
    # by hand: auto 0,0,1,1,1,0,1,1 vs human 0,1,1,1,1,0,1,1: p_o = 7/8, p_e = (3*2 + 5*6) / 64 = 36/64
    assert got["kappa"]["value"] == pytest.approx((7 / 8 - 36 / 64) / (1 - 36 / 64))
    assert got["kappa"]["value"] == pytest.approx(cohen_kappa_score(*binary))
    assert got["weighted_kappa"]["value"] == pytest.approx(
        cohen_kappa_score(AUTO_POINTS, HUMAN_POINTS, labels=range(5), weights="quadratic"))
    assert got["alpha"]["value"] == pytest.approx(krippendorff.alpha(
        reliability_data=[AUTO_POINTS, HUMAN_POINTS], level_of_measurement="ordinal", value_domain=range(5)))
    for key in ("kappa", "weighted_kappa", "alpha"):
        low, high = got[key]["ci"]
        assert -1 <= low <= got[key]["value"] <= high <= 1, key
    low, high = got["spearman"]["ci"]
    assert low <= got["spearman"]["rho"] <= high


def test_a_proxy_that_agrees_exactly_and_one_that_cannot_be_measured() -> None:
    same = proxy_agreement(HUMAN, HUMAN, levels=5, resamples=200)
    for key in ("kappa", "weighted_kappa", "alpha"):  # every resample agrees exactly too
        assert same[key]["value"] == pytest.approx(1.0) and same[key]["ci"] == pytest.approx([1.0, 1.0]), key
    constant = proxy_agreement([0.5] * 4, [0.5] * 4, levels=5, resamples=50)
    assert constant["spearman"]["rho"] is None
    assert all(constant[k] == {"value": None, "ci": None} for k in ("kappa", "weighted_kappa", "alpha"))
    empty = proxy_agreement([], [], levels=5)
    assert empty["n"] == 0 and empty["alpha"] == {"value": None, "ci": None}


def test_the_bootstrap_intervals_are_those_of_every_resample_computed_afresh() -> None:
    """The CIs against a plain loop over every resample (the same seeded draw of rows), each statistic from
    scikit-learn and the krippendorff package: computing each distinct set of rows once (6 samples: 150 draws hold
    repeats) changes no bound."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    n, resamples = 6, 150
    auto, human = np.array([0, 1, 2, 2, 3, 4]) / 4, np.array([0, 3, 4, 2, 6, 8]) / 8  # a judge's 1-5, raters' mean
    got = proxy_agreement(auto, human, levels=5, resamples=resamples, seed=3)
    idx = np.random.default_rng(3).integers(0, n, size=(resamples, n))
    pts = lambda x: np.rint(x * 4).astype(int)  # noqa: E731 - the scale's points, as on_levels reads them

    def binary(x: np.ndarray, y: np.ndarray) -> float | None:
        bx, by = (x >= 0.5).astype(int), (y >= 0.5).astype(int)
        return None if len(set(bx) | set(by)) < 2 else cohen_kappa_score(bx, by, labels=[0, 1])

    def weighted(x: np.ndarray, y: np.ndarray) -> float | None:
        px, py = pts(x), pts(y)
        return None if len(set(px) | set(py)) < 2 else cohen_kappa_score(px, py, labels=range(5),
                                                                           weights="quadratic")

    def alpha(x: np.ndarray, y: np.ndarray) -> float | None:
        data = np.vstack([pts(x), pts(y)]).astype(float)
        return None if len(np.unique(data)) < 2 else krippendorff.alpha(
            reliability_data=data, level_of_measurement="ordinal", value_domain=range(5))

    assert len({tuple(sorted(i)) for i in idx}) < resamples  # some draws repeat a set of rows
    for key, stat in (("kappa", binary), ("weighted_kappa", weighted), ("alpha", alpha)):
        draws = [v for v in (stat(auto[i], human[i]) for i in idx) if v is not None and np.isfinite(v)]
        assert len(set(draws)) > 2, key  # the statistic varies across resamples
        want = [np.quantile(draws, 0.025), np.quantile(draws, 0.975)]
        assert got[key]["ci"] == pytest.approx(want, rel=1e-9, abs=1e-12), key
