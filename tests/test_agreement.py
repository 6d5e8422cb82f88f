"""A proxy scorer's agreement with people (``agreement.proxy_agreement``, ``agreement.kappa``): every value against
the field's libraries (scipy's Spearman, scikit-learn's Cohen's kappa, the krippendorff package) or by hand, on a
small hand-made table."""

from __future__ import annotations

import numpy as np
import pytest

from evalgate.agreement import kappa, proxy_agreement

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
