"""Pairwise judge statistics: both orders per pair, ties half, position flips, win rate with a paired bootstrap CI,
and the length-controlled win rate.

A pair is one item judged twice: once with the model's completion in position A and the baseline's in B, once with
the two swapped (the position swap of MT-Bench, Zheng et al. 2023, "Judging LLM-as-a-Judge", sec. 3.4, and of
Arena-Hard, Li et al. 2024). The item's preference is the mean of the two outcomes seen from the model's side
(win 1, tie 0.5, loss 0), so a judge that always picks position A gives every item 0.5, never a win. An item
whose verdict cannot be parsed in either order counts as a loss for the model (``counted_preference``): every
rate is over every judged item, so an answer that breaks the judge's output whenever it is losing gains nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from evalgate.rlhf.lc_winrate import length_controlled_win_rate

Verdict = Literal["A", "B", "tie"]
VERDICTS: tuple[str, ...] = ("A", "B", "tie")


@dataclass(frozen=True)
class PairJudgement:
    """One item judged in both orders.

    Attributes:
        item_id: the item.
        model_first: the judge's verdict with the model's completion in position A ("A", "B", "tie"), or None when
            the verdict could not be parsed.
        baseline_first: the verdict with the baseline's completion in position A, or None.
        model_len: the model's completion length in characters (AlpacaEval measures length in characters).
        baseline_len: the baseline's completion length in characters.
        model_first_weight, baseline_first_weight: how many games each verdict counts as (a weighted verdict scale,
            ``JudgeOptions.verdict_weights``: Arena-Hard's A>>B counts 3); 1 each by default.
    """

    item_id: str
    model_first: str | None
    baseline_first: str | None
    model_len: int
    baseline_len: int
    model_first_weight: int = 1
    baseline_first_weight: int = 1

    def __post_init__(self) -> None:
        for name in ("model_first", "baseline_first"):
            value = getattr(self, name)
            if value is not None and value not in VERDICTS:
                raise ValueError(f"item {self.item_id!r}: {name} is {value!r}; a verdict is one of {VERDICTS} "
                                 "or None (unparseable)")


def outcome(verdict: str, model_position: Literal["A", "B"]) -> float:
    """The model's outcome of one verdict: 1 when the judge preferred the model, 0.5 a tie, 0 the baseline.

    Raises:
        ValueError: a verdict outside ``VERDICTS``.
    """
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    if verdict == "tie":
        return 0.5
    return 1.0 if verdict == model_position else 0.0


def item_preference(pair: PairJudgement) -> float | None:
    """The item's preference for the model: the mean of its two outcomes, each counted as many times as its verdict
    weighs (equal weights: 0, 0.25, 0.5, 0.75 or 1); None when either order's verdict is unparseable (the rates then
    count the item as a loss: ``counted_preference``)."""
    if pair.model_first is None or pair.baseline_first is None:
        return None
    w1, w2 = pair.model_first_weight, pair.baseline_first_weight
    return (w1 * outcome(pair.model_first, "A") + w2 * outcome(pair.baseline_first, "B")) / (w1 + w2)


def games(pair: PairJudgement) -> int:
    """How many games the item counts as in the win rate: its two verdicts' weights (2 for an unparseable item,
    a loss in both orders)."""
    return 2 if item_preference(pair) is None else pair.model_first_weight + pair.baseline_first_weight


UNPARSEABLE_AS = "loss"
"""How the rates count an item with an unparseable verdict (either order): a loss for the model, preference 0,
the score the run gives that sample (docs/RLHF.md)."""


def counted_preference(pair: PairJudgement) -> float:
    """The item's preference as every rate counts it: ``item_preference``, or 0 (a loss) when a verdict is
    unparseable."""
    pref = item_preference(pair)
    return 0.0 if pref is None else pref


def position_flip(pair: PairJudgement) -> bool | None:
    """Whether swapping the positions changed the judge's outcome for the model (win, tie or loss); None when
    either verdict is unparseable. A judge that keeps choosing position A flips on every item it does not call a
    tie in both orders."""
    if pair.model_first is None or pair.baseline_first is None:
        return None
    return outcome(pair.model_first, "A") != outcome(pair.baseline_first, "B")


def win_rate(pairs: Sequence[PairJudgement], confidence: float = 0.95, resamples: int = 10_000,
             seed: int = 0) -> dict[str, Any]:
    """Win rate of the model against the baseline over every judged item, an item with an unparseable verdict
    counted as a loss (``counted_preference``).

    Args:
        pairs: one judgement per item (both orders).
        confidence: two-sided level of the bootstrap interval.
        resamples: bootstrap resamples.
        seed: numpy ``default_rng`` seed.

    Returns:
        ``{"win_rate", "low", "high", "lc_win_rate", "lc_standard_error", "lc_extreme_change", "lc", "items",
        "parsed_items", "unparseable_items", "unparseable_as", "wins", "ties", "losses", "position_flip_rate",
        "first_position_rate"}``. ``win_rate`` is the mean counted preference over all ``items`` (ties half,
        unparseable items 0: ``unparseable_as`` "loss"), each verdict counted as many games as it weighs (a
        weighted scale: Arena-Hard's ``show_result.py`` pools the games, so A>>B counts three wins); ``low``/``high``
        a percentile bootstrap over items, both
        orders of an item drawn together (paired); the LC win rate over the same items
        (``lc_winrate.length_controlled_win_rate``, whose whole result is ``lc``), its bootstrap standard error and
        AlpacaEval's extreme-change flag; ``wins``/``ties``/``losses`` count single verdicts from the model's side
        of the ``parsed_items``; ``position_flip_rate`` the share of parsed items whose outcome changed with the
        swap; ``first_position_rate`` the share of non-tie verdicts for position A (0.5 for a judge without position
        bias); those two are None when no item parsed in both orders.

    Raises:
        ValueError: no pairs, or an item twice.
    """
    if not pairs:
        raise ValueError("win rate over zero pairs")
    ids = [p.item_id for p in pairs]
    if len(set(ids)) != len(ids):
        raise ValueError("an item is judged twice: one PairJudgement per item")
    parsed = [p for p in pairs if item_preference(p) is not None]
    prefs = [counted_preference(p) for p in pairs]
    weights = np.array([games(p) for p in pairs], dtype=float)
    won = np.array(prefs) * weights
    rate, (low, high) = float(won.sum() / weights.sum()), _ratio_ci(won, weights, confidence, resamples, seed)
    lc = length_controlled_win_rate(prefs, [p.model_len - p.baseline_len for p in pairs])
    decided = [v for p in parsed for v in (p.model_first, p.baseline_first) if v != "tie"]
    return {"items": len(pairs), "parsed_items": len(parsed), "unparseable_items": len(pairs) - len(parsed),
            "unparseable_as": UNPARSEABLE_AS, **_verdict_counts(parsed), "win_rate": rate,
            "low": low, "high": high, "lc_win_rate": lc["lc_win_rate"], "lc_standard_error": lc["lc_standard_error"],
            "lc_extreme_change": lc["extreme_change"], "lc": lc,
            "position_flip_rate": sum(bool(position_flip(p)) for p in parsed) / len(parsed) if parsed else None,
            "first_position_rate": (decided.count("A") / len(decided)) if decided else None}


def _ratio_ci(won: np.ndarray, weights: np.ndarray, confidence: float, resamples: int,
              seed: int) -> tuple[float, float]:
    """Percentile bootstrap over items of ``sum(won) / sum(weights)`` (the weighted win rate; with every item
    weighing 2 it is ``core.stats.bootstrap_ci`` of the item means, draw for draw)."""
    idx = np.random.default_rng(seed).integers(0, len(won), size=(resamples, len(won)))
    rates = won[idx].sum(axis=1) / weights[idx].sum(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(rates, alpha)), float(np.quantile(rates, 1 - alpha))


def _verdict_counts(parsed: Sequence[PairJudgement]) -> dict[str, int]:
    outcomes = [o for p in parsed for o in (outcome(p.model_first or "", "A"), outcome(p.baseline_first or "", "B"))]
    return {"wins": outcomes.count(1.0), "ties": outcomes.count(0.5), "losses": outcomes.count(0.0)}


def per_item_table(pairs: Sequence[PairJudgement]) -> list[dict[str, Any]]:
    """The report's per-item table: one row per item with both verdicts and their weights (a weighted verdict
    scale's games; ``rlhf.bradley_terry.judge_games`` reads them), the preference as the rates count it
    (``counted_preference``: 0 for an unparseable item), whether the swap flipped the outcome, and both lengths;
    ``status`` is ``ok`` or ``unparseable``."""
    return [{"item_id": p.item_id, "model_first": p.model_first, "baseline_first": p.baseline_first,
             "model_first_weight": p.model_first_weight, "baseline_first_weight": p.baseline_first_weight,
             "preference": counted_preference(p), "flip": position_flip(p), "model_len": p.model_len,
             "baseline_len": p.baseline_len,
             "status": "ok" if item_preference(p) is not None else "unparseable"} for p in pairs]
