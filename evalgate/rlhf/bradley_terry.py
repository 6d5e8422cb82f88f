"""Bradley-Terry ratings of several checkpoints judged pairwise, with a bootstrap CI (as Chatbot Arena and
Arena-Hard rate more than two models: Chiang et al. 2024, "Chatbot Arena", sec. 5; arena-hard-auto's
``show_result.py``).

P(i beats j) = 1 / (1 + exp(-(r_i - r_j))) (Bradley & Terry 1952, in logits); the ratings maximise the likelihood
of the games, a tie counted as half a win for each side, with the anchor's rating fixed at 0 (the ratings are
defined up to a constant). Fitted with ``scipy.optimize.minimize`` (L-BFGS on the convex negative log-likelihood).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Game = tuple[str, str, float]
"""``(i, j, outcome)``: outcome 1 when i won, 0.5 a tie, 0 when j won."""


def fit(games: Sequence[Game], anchor: str) -> dict[str, float]:
    """Maximum-likelihood Bradley-Terry ratings (logits) of every player in ``games``, ``anchor`` at 0.

    Raises:
        ValueError: no games, the anchor plays none, an outcome outside [0, 1].
    """
    from scipy.optimize import minimize

    players = sorted({p for g in games for p in g[:2]})
    if not games or anchor not in players:
        raise ValueError(f"Bradley-Terry needs games, the anchor {anchor!r} among their players")
    if any(not 0 <= g[2] <= 1 for g in games):
        raise ValueError("a game's outcome is 1 (first won), 0.5 (tie) or 0 (second won)")
    index = {p: k for k, p in enumerate(p for p in players if p != anchor)}
    i = np.array([index.get(g[0], -1) for g in games])
    j = np.array([index.get(g[1], -1) for g in games])
    y = np.array([float(g[2]) for g in games])

    def nll(free: np.ndarray) -> tuple[float, np.ndarray]:
        r = np.append(free, 0.0)  # index -1: the anchor
        d = r[i] - r[j]
        p = 1 / (1 + np.exp(-d))
        loss = -np.sum(y * np.log(p + 1e-300) + (1 - y) * np.log(1 - p + 1e-300))
        g = np.zeros(len(free) + 1)
        np.add.at(g, i, p - y)
        np.add.at(g, j, y - p)
        return float(loss), g[:-1]

    res = minimize(nll, np.zeros(len(index)), jac=True, method="L-BFGS-B")
    return {anchor: 0.0, **{p: float(res.x[k]) for p, k in index.items()}}


def ratings(games: Sequence[Game], anchor: str, confidence: float = 0.95, resamples: int = 1000,
            seed: int = 0) -> dict[str, dict[str, Any]]:
    """Bradley-Terry ratings with a percentile bootstrap CI over games (resampled with replacement, refitted).

    Args:
        games: ``(i, j, outcome)`` per game (a pairwise judge's item in one order is a game).
        anchor: the player held at 0 (the baseline).
        confidence: two-sided level. resamples: bootstrap refits. seed: numpy ``default_rng`` seed.

    Returns:
        player -> ``{"rating", "low", "high"}`` (logits against the anchor).
    """
    point = fit(games, anchor)
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {p: [] for p in point}
    for _ in range(resamples):
        sample = [games[k] for k in rng.integers(0, len(games), size=len(games))]
        if anchor not in {p for g in sample for p in g[:2]}:
            continue
        fitted = fit(sample, anchor)
        for p in point:
            if p in fitted:
                draws[p].append(fitted[p])
    alpha = (1 - confidence) / 2
    return {p: {"rating": r, "low": float(np.quantile(draws[p], alpha)) if draws[p] else None,
                "high": float(np.quantile(draws[p], 1 - alpha)) if draws[p] else None} for p, r in point.items()}
