"""Bradley-Terry ratings of several checkpoints judged pairwise, on the Elo-like scale of Chatbot Arena and
Arena-Hard, with a bootstrap CI (Chiang et al. 2024, "Chatbot Arena", sec. 5; arena-hard-auto v0.1's
``show_result.py``: ``compute_mle_elo`` and ``get_bootstrap_result``).

P(i beats j) = 1 / (1 + 10^((R_j - R_i) / 400)) (Bradley & Terry 1952 with base 10 and scale 400). The ratings
maximise the likelihood of the games, a tie counted as half a win for each side, with no penalty; the anchor (the
judge's baseline) is fixed at 1000. The fit is Newton's method on the convex negative log-likelihood in logits
``r = R ln(10) / 400`` (the bootstrap's refits stepped together); the reference fits the same likelihood with
scikit-learn's ``LogisticRegression(fit_intercept=False, penalty=None)``. docs/RLHF.md says where evalgate differs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

Game = tuple[str, str, float]
"""``(i, j, outcome)``: outcome 1 when i won, 0.5 a tie, 0 when j won."""

SCALE, BASE, ANCHOR_RATING = 400.0, 10.0, 1000.0
"""The Elo-like scale of Chatbot Arena and Arena-Hard: a rating difference of 400 is 10:1 odds; the anchor at 1000."""

_PER_LOGIT = SCALE / math.log(BASE)


def elo(logit: float) -> float | None:
    """A rating in logits over the anchor on the Elo-like scale (``1000 + 400 r / ln 10``); None when infinite."""
    return ANCHOR_RATING + _PER_LOGIT * float(logit) if math.isfinite(logit) else None


def _table(games: Sequence[Game]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct games as arrays: players (sorted), first and second player's index, outcome, how many times."""
    counts = Counter((str(i), str(j), float(y)) for i, j, y in games)
    players = sorted({p for g in counts for p in g[:2]})
    index = {p: k for k, p in enumerate(players)}
    keys = list(counts)
    return (players, np.array([index[g[0]] for g in keys], dtype=int), np.array([index[g[1]] for g in keys], dtype=int),
            np.array([g[2] for g in keys]), np.array([counts[g] for g in keys], dtype=float))


def _check(games: Sequence[Game], anchor: str) -> None:
    if not games or anchor not in {p for g in games for p in g[:2]}:
        raise ValueError(f"Bradley-Terry needs games, the anchor {anchor!r} among their players")
    if any(not 0 <= g[2] <= 1 for g in games):
        raise ValueError("a game's outcome is 1 (first won), 0.5 (tie) or 0 (second won)")
    if any(g[0] == g[1] for g in games):
        raise ValueError("a game of a player against itself carries no information: leave it out")


def _fit_arrays(n: int, a: int, i: np.ndarray, j: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Logits of ``n`` players (player ``a`` at 0) from weighted games; players the anchor's games cannot bound get
    +inf (they scored against the anchor's side and it never against theirs), -inf (the reverse) or nan (no games
    link them to the anchor). The finite ratings are those of the anchor's strongly connected component of the
    graph "i scored against j" (Ford 1957: the likelihood has a finite maximum exactly on such a component)."""
    live = w > 0
    i, j, y, w = i[live], j[live], y[live], w[live]
    reach = np.eye(n, dtype=bool)
    reach[i[y > 0], j[y > 0]] = True
    reach[j[y < 1], i[y < 1]] = True
    for _ in range(max(1, int(np.ceil(np.log2(n))))):  # transitive closure by repeated squaring
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    out = np.full(n, np.nan)
    out[reach[:, a] & ~reach[a, :]] = np.inf
    out[reach[a, :] & ~reach[:, a]] = -np.inf
    inside = reach[a, :] & reach[:, a]
    free = np.flatnonzero(inside & (np.arange(n) != a))
    keep = inside[i] & inside[j]
    if len(free):
        x = np.zeros((int(keep.sum()), n))
        x[np.arange(len(x)), i[keep]] = 1.0
        x[np.arange(len(x)), j[keep]] = -1.0
        out[free] = _newton(x[:, free], y[keep], w[keep] / w[keep].sum())
    out[a] = 0.0
    return out


def _newton(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The logits ``r`` minimising the weighted negative log-likelihood ``sum w (y log(1 + e^-d) + (1 - y)
    log(1 + e^d))``, ``d = x r`` (``x``: one row per distinct game, +1 for its first player, -1 for its second, the
    anchor's column left out): Newton's method with a backtracking line search (the likelihood is strictly convex on
    a strongly connected component, so its Hessian is positive definite), until the squared Newton decrement is below
    1e-20 or a step no longer lowers the likelihood in float64 (it stops changing within ~3e-8 of the maximum on
    some resamples, which the decrement rule alone left spinning to the 200th iteration)."""

    def nll(r: np.ndarray) -> float:
        d = x @ r
        return float(np.sum(w * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d))))

    r = np.zeros(x.shape[1])
    for _ in range(200):
        p = 1 / (1 + np.exp(-(x @ r)))
        g = x.T @ (w * (p - y))
        step = np.linalg.solve(x.T @ (x * (w * p * (1 - p))[:, None]), g)
        dec = float(g @ step)
        if dec < 1e-20:  # the squared Newton decrement: the fit is within ~1e-10 of the maximum
            break
        t, f0 = 1.0, nll(r)
        while nll(r - t * step) > f0 - 1e-4 * t * dec and t > 1e-10:
            t /= 2
        r = r - t * step
        if nll(r) >= f0:  # no decrease left at float precision: converged
            break
    return r


def _fit_many(n: int, a: int, i: np.ndarray, j: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``_fit_arrays`` of every row of ``counts`` ``(B, m)`` (how many times each distinct game occurs in a
    bootstrap resample) at once: logits ``(B, n)``. The reachability is ``_fit_arrays``' on all rows together; the
    rows whose games bound the same players share one ``_newton_many`` (their games not drawn weigh 0 there)."""
    live = counts > 0
    step = np.zeros((len(y), n, n), dtype=np.int64)  # game -> the edges "i scored against j" it adds when drawn
    step[np.flatnonzero(y > 0), i[y > 0], j[y > 0]] = 1
    step[np.flatnonzero(y < 1), j[y < 1], i[y < 1]] = 1
    reach = np.eye(n, dtype=bool) | ((live.astype(np.int64) @ step.reshape(len(y), -1)).reshape(-1, n, n) > 0)
    for _ in range(max(1, int(np.ceil(np.log2(n))))):
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    out = np.full((len(counts), n), np.nan)
    out[reach[:, :, a] & ~reach[:, a, :]] = np.inf
    out[reach[:, a, :] & ~reach[:, :, a]] = -np.inf
    inside = reach[:, a, :] & reach[:, :, a]
    patterns, group = np.unique(inside, axis=0, return_inverse=True)
    for k, pattern in enumerate(patterns):
        rows = np.flatnonzero(group.ravel() == k)
        free = np.flatnonzero(pattern & (np.arange(n) != a))
        keep = pattern[i] & pattern[j]
        if len(free):
            x = np.zeros((int(keep.sum()), n))
            x[np.arange(len(x)), i[keep]] = 1.0
            x[np.arange(len(x)), j[keep]] = -1.0
            w = counts[rows][:, keep]
            out[rows[:, None], free] = _newton_many(x[:, free], y[keep], w / w.sum(axis=1, keepdims=True))
    out[:, a] = 0.0
    return out


def _newton_many(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``_newton`` on each row of weights ``w`` ``(B, m)`` over the same games ``x`` ``(m, k)``, ``y`` ``(m,)``:
    the same iteration, line search and stopping rule per row, the rows stepped together; returns ``(B, k)``."""

    def nll(r: np.ndarray, w: np.ndarray) -> np.ndarray:
        d = r @ x.T
        return np.sum(w * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d)), axis=1)

    r = np.zeros((len(w), x.shape[1]))
    todo = np.arange(len(w))
    for _ in range(200):
        rt, wt = r[todo], w[todo]
        p = 1 / (1 + np.exp(-(rt @ x.T)))
        g = (wt * (p - y)) @ x
        step = np.linalg.solve(np.einsum("bm,mi,mj->bij", wt * p * (1 - p), x, x), g[:, :, None])[:, :, 0]
        dec = np.einsum("bk,bk->b", g, step)
        going = dec >= 1e-20  # the squared Newton decrement, as in _newton
        todo, rt, wt, step, dec = todo[going], rt[going], wt[going], step[going], dec[going]
        if not len(todo):
            break
        t, f0 = np.ones(len(todo)), nll(rt, wt)
        halving = np.arange(len(todo))  # the rows whose line search goes on
        while len(halving):
            th = t[halving]
            fails = nll(rt[halving] - th[:, None] * step[halving], wt[halving]) > f0[halving] - 1e-4 * th * dec[halving]
            halving = halving[fails & (th > 1e-10)]
            t[halving] /= 2
        r[todo] = rt - t[:, None] * step
        todo = todo[nll(r[todo], wt) < f0]  # no decrease left at float precision: converged
    return r


def fit(games: Sequence[Game], anchor: str) -> dict[str, float]:
    """Maximum-likelihood Bradley-Terry ratings in logits over ``anchor`` (at 0) of every player in ``games``.

    A player whose rating the games cannot bound is +inf (it scored against the anchor's side, directly or through
    others, and never lost a point the other way: every game won), -inf (the reverse) or nan (no games link it to the
    anchor); Chatbot Arena's and Arena-Hard's fits return a large finite number there instead.

    Raises:
        ValueError: no games, the anchor plays none, an outcome outside [0, 1], a player against itself.
    """
    _check(games, anchor)
    players, i, j, y, w = _table(games)
    r = _fit_arrays(len(players), players.index(anchor), i, j, y, w)
    return {p: float(r[k]) for k, p in enumerate(players)}


def ratings(games: Sequence[Game], anchor: str, confidence: float = 0.95, resamples: int = 1000,
            seed: int = 0) -> dict[str, Any]:
    """Bradley-Terry ratings on the Elo-like scale with a percentile bootstrap CI over games, as Chatbot Arena and
    Arena-Hard v0.1 compute them (``get_bootstrap_result``: the games resampled with replacement, the ratings
    refitted, the 2.5 % and 97.5 % quantiles at 95 %).

    Args:
        games: ``(i, j, outcome)`` per game; a weighted verdict (Arena-Hard's A>>B) is that many games.
        anchor: the player held at 1000 (the judge's baseline).
        confidence: two-sided level. resamples: bootstrap refits. seed: numpy ``default_rng`` seed (each resample
            draws how many times each distinct game occurs, multinomially: the same law as resampling the games).

    Returns:
        ``{"anchor", "anchor_rating" (1000), "scale" (400), "base" (10), "games", "confidence", "resamples",
        "players": [...]}``, the players by rating, highest first, each ``{"player", "rating", "low", "high",
        "win_rate_vs_anchor", "games", "bound"}``: ``rating`` and the CI ends on the scale (None where unbounded),
        ``win_rate_vs_anchor`` the fitted P(player beats the anchor) (Arena-Hard's "score"), ``games`` the games the
        player played, ``bound`` None, or ``above`` / ``below`` / ``unlinked`` when the games cannot bound its
        rating (``fit``).

    Raises:
        ValueError: as ``fit``.
    """
    _check(games, anchor)
    players, i, j, y, w = _table(games)
    a = players.index(anchor)
    point = _fit_arrays(len(players), a, i, j, y, w)
    rng = np.random.default_rng(seed)
    draws = _fit_many(len(players), a, i, j, y, rng.multinomial(int(w.sum()), w / w.sum(), size=resamples) * 1.0)
    alpha = (1 - confidence) / 2
    played = Counter(p for g in games for p in g[:2])
    rows = []
    for k, p in enumerate(players):
        col = draws[:, k][~np.isnan(draws[:, k])] if resamples else np.array([point[k]])
        low, high = (float(q) for q in np.quantile(np.clip(col, -1e12, 1e12), [alpha, 1 - alpha])) if len(col) \
            else (math.nan, math.nan)
        rows.append({"player": p, "rating": elo(point[k]), "low": elo(low) if abs(low) < 1e11 else None,
                     "high": elo(high) if abs(high) < 1e11 else None,
                     "win_rate_vs_anchor": None if np.isnan(point[k]) else float(1 / (1 + np.exp(-point[k]))),
                     "games": played[p], "bound": _bound(point[k])})
    rows.sort(key=lambda r: -_order(r))
    return {"anchor": anchor, "anchor_rating": ANCHOR_RATING, "scale": SCALE, "base": BASE, "games": len(games),
            "confidence": confidence, "resamples": resamples, "players": rows}


def _bound(r: float) -> str | None:
    if math.isfinite(r):
        return None
    return "unlinked" if math.isnan(r) else ("above" if r > 0 else "below")


def _order(row: dict[str, Any]) -> float:
    if row["rating"] is not None:
        return float(row["rating"])
    return {"above": math.inf, "below": -math.inf}.get(row["bound"], -math.inf)


def judge_games(player: str, anchor: str, items: Iterable[dict[str, Any]]) -> list[Game]:
    """The games of one pairwise judge run against its baseline, from its per-item table
    (``rlhf.pairwise.per_item_table``): each order's verdict is a game of ``player`` against ``anchor``, counted as
    many times as the verdict weighs (Arena-Hard's A>>B: 3), a tie half a win; an item whose verdict is unparseable
    in either order is a loss in both orders, as every evalgate judge rate counts it (Arena-Hard drops such items).
    With only games against the anchor, the player's fitted ``win_rate_vs_anchor`` is the run's ``win_rate``.
    """
    from evalgate.rlhf.pairwise import outcome

    out: list[Game] = []
    for row in items:
        if row.get("status") != "ok":
            out += [(player, anchor, 0.0)] * 2
            continue
        out += [(player, anchor, outcome(row["model_first"], "A"))] * int(row.get("model_first_weight", 1))
        out += [(player, anchor, outcome(row["baseline_first"], "B"))] * int(row.get("baseline_first_weight", 1))
    return out
