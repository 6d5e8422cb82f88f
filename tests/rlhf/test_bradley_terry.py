"""Bradley-Terry ratings over more than two checkpoints (issue 46, item 3): expected values by hand on tables whose
maximum-likelihood ratings have a closed form."""

from __future__ import annotations

import math

import pytest

from evalgate.rlhf.bradley_terry import fit, ratings


def test_a_tree_of_comparisons_fits_each_pair_exactly() -> None:
    """Comparisons that form a tree (A-B, B-C): the likelihood splits into one term per edge, each maximised where
    the fitted probability equals the observed share: A beat B 3 of 4 -> r_A - r_B = ln 3; B and C won one each
    -> r_B = r_C; C is the anchor (0)."""
    games = [("A", "B", 1.0)] * 3 + [("A", "B", 0.0), ("B", "C", 1.0), ("C", "B", 1.0)]
    r = fit(games, anchor="C")
    assert r["C"] == 0.0
    assert r["B"] == pytest.approx(0.0, abs=1e-4)
    assert r["A"] == pytest.approx(math.log(3), abs=1e-4)


def test_a_tie_counts_half_a_win_each() -> None:
    """A beat B twice and tied twice: 3 of 4 counted wins, r_A = ln 3 over the anchor B."""
    r = fit([("A", "B", 1.0), ("A", "B", 1.0), ("A", "B", 0.5), ("B", "A", 0.5)], anchor="B")
    assert r["A"] == pytest.approx(math.log(3), abs=1e-4)


def test_the_bootstrap_interval_holds_the_rating_and_is_seeded() -> None:
    games = ([("A", "base", 1.0)] * 6 + [("A", "base", 0.0)] * 2 + [("B", "base", 1.0)] * 4 + [("B", "base", 0.0)] * 4
             + [("A", "B", 1.0)] * 3 + [("A", "B", 0.0)])
    out = ratings(games, anchor="base", resamples=300, seed=1)
    for p in ("A", "B"):
        assert out[p]["low"] < out[p]["rating"] < out[p]["high"]
    assert out["base"] == {"rating": 0.0, "low": 0.0, "high": 0.0}
    assert out["A"]["rating"] > out["B"]["rating"]
    assert ratings(games, anchor="base", resamples=300, seed=1) == out


def test_bad_games_are_refused() -> None:
    with pytest.raises(ValueError, match="anchor"):
        fit([("A", "B", 1.0)], anchor="C")
    with pytest.raises(ValueError, match="outcome"):
        fit([("A", "B", 2.0)], anchor="B")
