"""Bradley-Terry ratings over more than two checkpoints (issue 46, item 3): expected values by hand on tables whose
maximum-likelihood ratings have a closed form, and Arena-Hard's own ``compute_mle_elo`` on a round robin."""

from __future__ import annotations

import math

import numpy as np
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
    """A lost 3 of its 20 games: a resample of the 20 games draws none of them with probability (17/20)^20 = 3.9%,
    and then A won every game it played (unbounded above), more often than the 2.5% the upper end leaves out: A's
    interval is open above. B lost 7 and won 5: (15/20)^20 = 0.3% and (13/20)^20 = 0.02%, so both ends are finite."""
    out = ratings(games, anchor="base", resamples=1000, seed=1)
    by = {r["player"]: r for r in out["players"]}
    assert by["A"]["low"] < by["A"]["rating"] and by["A"]["high"] is None
    assert by["B"]["low"] < by["B"]["rating"] < by["B"]["high"]
    assert (by["base"]["rating"], by["base"]["low"], by["base"]["high"]) == (1000.0, 1000.0, 1000.0)
    assert [r["player"] for r in out["players"]] == ["A", "B", "base"]  # highest first
    assert (by["A"]["games"], by["B"]["games"], by["base"]["games"], out["games"]) == (12, 12, 16, 20)
    assert ratings(games, anchor="base", resamples=50, seed=1) == ratings(games, anchor="base", resamples=50, seed=1)


W = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}


def _battles(rows: list[tuple[str, str, str, int]]) -> list[tuple[str, str, float]]:
    """Arena-Hard's battle rows ``(model_a, model_b, winner, how many)`` as games."""
    return [(a, b, W[w]) for a, b, w, n in rows for _ in range(n)]


# A round robin of four players with ties and unequal counts. Expected ratings: arena-hard-auto v0.1's own
# compute_mle_elo (lmarena/arena-hard-auto show_result.py at b4cbc3e, 2024-08-31: LogisticRegression(
# fit_intercept=False, penalty=None, tol=1e-8) on the battles duplicated, a tie one win each way; SCALE 400, BASE 10,
# INIT_RATING 1000, the baseline moved to 1000), run in a scratch environment (scikit-learn 1.9.1, pandas 3.1.1) on
# exactly these battles, printed to 6 decimals.
ROUND_ROBIN = [("base", "A", "model_b", 5), ("base", "A", "model_a", 2), ("base", "A", "tie", 3),
               ("base", "B", "model_b", 3), ("base", "B", "model_a", 4), ("base", "B", "tie", 1),
               ("A", "B", "model_a", 4), ("A", "B", "model_b", 2), ("A", "B", "tie", 2),
               ("C", "base", "model_a", 1), ("C", "base", "model_b", 6), ("C", "A", "model_b", 3),
               ("C", "A", "model_a", 1), ("C", "B", "tie", 2), ("C", "B", "model_b", 1)]
ARENA_HARD_ROUND_ROBIN = {"A": 1066.035325, "base": 1000.0, "B": 957.356798, "C": 781.495357}


def test_the_ratings_equal_arena_hards_compute_mle_elo_on_a_round_robin() -> None:
    out = ratings(_battles(ROUND_ROBIN), anchor="base", resamples=0)
    got = {r["player"]: r["rating"] for r in out["players"]}
    assert got == pytest.approx(ARENA_HARD_ROUND_ROBIN, abs=1e-5)
    assert [r["player"] for r in out["players"]] == ["A", "base", "B", "C"]
    assert (out["anchor_rating"], out["scale"], out["base"]) == (1000.0, 400.0, 10.0)


def test_a_star_of_checkpoints_against_the_baseline_has_ratings_by_hand() -> None:
    """Arena-Hard's design: every checkpoint judged against the baseline only. The likelihood splits per checkpoint,
    so each rating puts the fitted win rate at the observed share (ties half): s1 won 6, tied 2, lost 2 of 10 ->
    0.7 -> 1000 + 400 log10(0.7 / 0.3) = 1147.19; s2 (3 + 1) / 10 = 0.4 -> 1000 + 400 log10(0.4 / 0.6) = 929.56;
    s3 won 1, tied 4, lost 1 -> 0.5 -> 1000. Arena-Hard's compute_mle_elo gave 1147.190712, 929.563497, 1000.000001
    on the same battles (scratch run as above)."""
    star = [("base", "s1", "model_b", 6), ("base", "s1", "model_a", 2), ("base", "s1", "tie", 2),
            ("base", "s2", "model_b", 3), ("base", "s2", "model_a", 5), ("base", "s2", "tie", 2),
            ("base", "s3", "tie", 4), ("base", "s3", "model_b", 1), ("base", "s3", "model_a", 1)]
    by = {r["player"]: r for r in ratings(_battles(star), anchor="base", resamples=0)["players"]}
    assert by["s1"]["rating"] == pytest.approx(1000 + 400 * math.log10(0.7 / 0.3), abs=1e-6)
    assert by["s2"]["rating"] == pytest.approx(1000 + 400 * math.log10(0.4 / 0.6), abs=1e-6)
    assert by["s3"]["rating"] == pytest.approx(1000.0, abs=1e-6)
    assert (by["s1"]["win_rate_vs_anchor"], by["s2"]["win_rate_vs_anchor"]) == pytest.approx((0.7, 0.4))


def test_a_checkpoint_that_won_every_game_is_unbounded_not_a_large_number() -> None:
    """No finite maximum exists when a player never lost a point (Ford 1957); the reference fits return whatever
    number the optimiser stopped at. Here s2 won all 4 games against the baseline: rating None, bound above; the
    others keep their finite ratings; a player linked to nobody is unlinked."""
    games = _battles([("base", "s1", "model_b", 3), ("base", "s1", "model_a", 1), ("base", "s2", "model_b", 4),
                      ("x", "y", "model_a", 1)])
    with pytest.raises(ValueError, match="anchor"):
        fit(games, anchor="nobody")
    r = fit(games, anchor="base")
    assert r["s2"] == math.inf and math.isnan(r["x"]) and r["s1"] == pytest.approx(math.log(3), abs=1e-8)
    by = {p["player"]: p for p in ratings(games, anchor="base", resamples=200)["players"]}
    assert (by["s2"]["rating"], by["s2"]["bound"], by["s2"]["high"], by["s2"]["win_rate_vs_anchor"]) == \
        (None, "above", None, 1.0)
    assert by["x"]["bound"] == "unlinked" and by["s1"]["bound"] is None


def test_judge_games_count_each_verdict_weights_and_unparseable_items_as_losses() -> None:
    from evalgate.rlhf.bradley_terry import judge_games
    from evalgate.rlhf.pairwise import PairJudgement, per_item_table, win_rate

    pairs = [PairJudgement("i1", "A", "B", 10, 10, 3, 1), PairJudgement("i2", "tie", "A", 10, 10),
             PairJudgement("i3", None, "B", 10, 10)]
    games = judge_games("m", "base", per_item_table(pairs))
    # i1: model first A>>B (3 wins), baseline first "B" (the model, 1 win); i2: a tie and a loss; i3: two losses
    assert games == [("m", "base", 1.0)] * 4 + [("m", "base", 0.5), ("m", "base", 0.0)] + [("m", "base", 0.0)] * 2
    (row,) = [p for p in ratings(games, "base", resamples=0)["players"] if p["player"] == "m"]
    assert row["win_rate_vs_anchor"] == pytest.approx(win_rate(pairs, resamples=100)["win_rate"])  # 4.5 / 8


def test_bad_games_are_refused() -> None:
    with pytest.raises(ValueError, match="anchor"):
        fit([("A", "B", 1.0)], anchor="C")
    with pytest.raises(ValueError, match="outcome"):
        fit([("A", "B", 2.0)], anchor="B")


def _random_games(seed: int) -> list[tuple[str, str, float]]:
    """Five players, sparse and lopsided: resamples often leave a player unbounded or unlinked."""
    rng = np.random.default_rng(seed)
    players = ["base", "p1", "p2", "p3", "p4"]
    games = []
    for _ in range(40):
        a, b = rng.choice(5, 2, replace=False)
        games.append((players[a], players[b], float(rng.choice([0.0, 0.5, 1.0], p=[0.2, 0.2, 0.6]))))
    return games


@pytest.mark.parametrize("games", [
    _battles(ROUND_ROBIN),
    [("A", "base", 1.0)] * 6 + [("A", "base", 0.0)] * 2 + [("B", "base", 1.0)] * 4 + [("B", "base", 0.0)] * 4
    + [("A", "B", 1.0)] * 3 + [("A", "B", 0.0)],
    _battles([("base", "s1", "model_b", 3), ("base", "s1", "model_a", 1), ("base", "s2", "model_b", 4),
              ("x", "y", "model_a", 1)]),
    _random_games(0), _random_games(1)], ids=["round_robin", "seeded", "unbounded", "random0", "random1"])
def test_all_resamples_at_once_equal_one_fit_per_resample(games) -> None:
    """The bootstrap's fits together (``_fit_many``) against ``_fit_arrays`` on each resample alone: the same
    players unbounded above, below or unlinked, the finite logits equal to 1e-7 (the float64 likelihood stops
    changing within ~3e-8 of its maximum, so two summation orders stop up to that far apart)."""
    from evalgate.rlhf.bradley_terry import _fit_arrays, _fit_many, _table

    players, i, j, y, w = _table(games)
    a = players.index("base")
    counts = np.random.default_rng(2).multinomial(int(w.sum()), w / w.sum(), size=300) * 1.0
    one_by_one = np.array([_fit_arrays(len(players), a, i, j, y, c) for c in counts])
    together = _fit_many(len(players), a, i, j, y, counts)
    assert np.array_equal(np.isnan(together), np.isnan(one_by_one))
    assert np.array_equal(together[np.isinf(together)], one_by_one[np.isinf(one_by_one)])
    finite = np.isfinite(one_by_one)
    assert finite.sum() > 300 and np.abs(together[finite] - one_by_one[finite]).max() < 1e-7
