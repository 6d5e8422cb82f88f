"""Statistics for evaluation metrics: standard errors and bootstrap confidence intervals.

Every reported mean comes with the standard error of the aggregation actually used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def stderr(values: Sequence[float] | np.ndarray) -> float:
    """Standard error of the mean over independent units: ``sd(x) / sqrt(n)``, ``sd`` the sample standard deviation
    (ddof=1) -- the central-limit estimate (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640).

    Args:
        values: shape ``(n,)``, one value per unit (item, or seed).

    Returns:
        The stderr; NaN for fewer than two values.
    """
    arr = np.asarray(values, dtype=float)
    return float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else float("nan")


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean over independent units (items): ``s / sqrt(n)`` (see ``stderr``).
    The stderr is NaN for fewer than two values.

    Returns:
        (mean, stderr).

    Raises:
        ValueError: no values.
    """
    if len(values) == 0:
        raise ValueError("mean of zero values")
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), stderr(arr)


def stderr_items_paired(scores: np.ndarray) -> float:
    """Stderr of the mean over seeds and items with items as the unit: ``sd_i(mean_s x_s,i) / sqrt(n)``.

    The seeds share items, so each item's mean over seeds is one observation (Miller 2024, arXiv:2411.00640, on
    clustered and repeated measurements of the same questions).

    Args:
        scores: shape ``(seeds, items)``.
    """
    return stderr(np.asarray(scores, dtype=float).mean(axis=0))


def stderr_over_seeds(scores: np.ndarray) -> float:
    """Stderr of the mean of per-seed means with seeds as the random unit: ``sd_s(mean_i x_s,i) / sqrt(S)``
    (training-seed variance, Madaan et al. 2024, "Quantifying Variance in Evaluation Benchmarks", arXiv:2406.10229).

    Args:
        scores: shape ``(seeds, items)``; NaN for one seed.
    """
    return stderr(np.asarray(scores, dtype=float).mean(axis=1))


def stderr_paired_difference(candidate: np.ndarray, baseline: np.ndarray) -> float:
    """Stderr of the mean paired difference over the same items: ``sd_i(mean_s x_s,i - b_i) / sqrt(n)``
    (the paired-differences
    stderr of Miller 2024, arXiv:2411.00640).

    Args:
        candidate: shape ``(items,)`` or ``(seeds, items)``; several seeds are averaged per item first.
        baseline: shape ``(items,)``, the same items in the same order.
    """
    cand = np.atleast_2d(np.asarray(candidate, dtype=float))
    return stderr(cand.mean(axis=0) - np.asarray(baseline, dtype=float))


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, resamples: int = 10_000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (Efron & Tibshirani 1993, ch. 13), seeded.

    Returns:
        (low, high).
    """
    arr = np.asarray(values, dtype=float)
    if len(arr) == 0:
        raise ValueError("bootstrap of zero values")
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(resamples, len(arr)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def stderr_mean_of_means(stderrs: Sequence[float]) -> float:
    """Stderr of an unweighted mean of k independent subset means: ``sqrt(sum(se_j^2)) / k``.

    For two subsets this is ``0.5 * sqrt(se_a^2 + se_b^2)`` (variance of a sum of independent estimates; Var(cX) =
    c^2 Var(X)). It treats the subsets (e.g. training seeds) as fixed and their item-level errors as independent.

    Raises:
        ValueError: no stderrs.
    """
    if len(stderrs) == 0:
        raise ValueError("stderr of a mean of zero subsets")
    return float(math.sqrt(sum(s * s for s in stderrs)) / len(stderrs))


def paired_bootstrap_diff(candidate: np.ndarray, baseline: np.ndarray | float, confidence: float = 0.95,
                          resamples: int = 10_000, seed: int = 0) -> dict[str, float]:
    """Paired bootstrap of the mean difference between a candidate and a baseline over the same items.

    Args:
        candidate: per-item scores, shape ``(items,)`` for one training seed or ``(seeds, items)`` for several;
            all rows score the same items in the same order.
        baseline: per-item baseline scores, shape ``(items,)``, or a fixed value.
        confidence: two-sided level of the percentile interval.
        resamples: bootstrap resamples.
        seed: numpy ``default_rng`` seed (results are reproducible).

    Returns:
        ``{"diff", "low", "high", "stderr", "resamples", "confidence"}``: the observed difference of means, the
        percentile interval (Efron & Tibshirani 1993, ch. 13) and the bootstrap stderr (sd of the resampled
        differences). One seed: items are resampled with replacement and the same draw is applied to candidate
        and baseline (paired). Several seeds: a two-stage bootstrap (Davison & Hinkley 1997, sec. 3.8) resamples
        seeds, then items; the baseline uses the same item draw.

    Raises:
        ValueError: shapes disagree or no items.
    """
    observed, diffs = paired_bootstrap_draws(candidate, baseline, resamples, seed)
    alpha = (1 - confidence) / 2
    return {"diff": observed, "low": float(np.quantile(diffs, alpha)), "high": float(np.quantile(diffs, 1 - alpha)),
            "stderr": float(diffs.std(ddof=1)), "resamples": resamples, "confidence": confidence}


def paired_bootstrap_draws(candidate: np.ndarray, baseline: np.ndarray | float, resamples: int = 10_000,
                           seed: int = 0) -> tuple[float, np.ndarray]:
    """The observed mean difference and the resampled differences of ``paired_bootstrap_diff`` (same arguments,
    same draws for the same seed), shape ``(resamples,)``.

    Raises:
        ValueError: shapes disagree or no items.
    """
    cand = np.atleast_2d(np.asarray(candidate, dtype=float))
    n_seeds, n_items = cand.shape
    if n_items == 0:
        raise ValueError("paired bootstrap over zero items")
    fixed = np.isscalar(baseline) or np.ndim(baseline) == 0
    base = np.full(n_items, float(baseline)) if fixed else np.asarray(baseline, dtype=float)  # type: ignore[arg-type]
    if base.shape != (n_items,):
        raise ValueError(f"baseline has shape {base.shape}, candidate items {n_items}")
    rng = np.random.default_rng(seed)
    observed = float(cand.mean() - base.mean())
    diffs = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(1, n_items * n_seeds))
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        items = rng.integers(0, n_items, size=(m, n_items))
        if n_seeds > 1:
            seeds = rng.integers(0, n_seeds, size=(m, n_seeds))
            # mean over resampled seeds of the per-seed mean over resampled items
            per_seed = np.take_along_axis(cand[seeds], items[:, None, :].repeat(n_seeds, axis=1), axis=2)
            c = per_seed.mean(axis=(1, 2))
        else:
            c = cand[0][items].mean(axis=1)
        diffs[start:start + m] = c - base[items].mean(axis=1)
    return observed, diffs


DETECTION_POWER = 0.8
"""Power at which ``minimum_detectable_difference`` is stated (the customary 80 %)."""
TOO_SMALL_DIFFERENCE = 0.5
"""A decision split whose minimum detectable difference is at least this (half a [0, 1] metric's range) is flagged
as too small for the gate's statistics: at 95 % confidence, fewer than 32 items."""


def minimum_detectable_difference(n: int, confidence: float = 0.95, power: float = DETECTION_POWER,
                                  sd: float = 1.0) -> float:
    """The smallest true paired difference (candidate - baseline, per item, metric units) that a two-sided test at
    ``confidence`` detects with probability ``power`` over ``n`` items: ``(z_{1-a/2} + z_power) * sd / sqrt(n)``, with
    ``a = 1 - confidence`` (the normal-approximation minimum detectable effect; Bloom 1995, "Minimum Detectable
    Effects", Evaluation Review 19(5); for evals, Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640,
    sec. 5 on power). ``sd`` is the standard deviation of the per-item differences; the default 1 is its bound for
    values in [0, 1] (every item discordant, as a pass/fail metric can be), so the figure is what the split can
    promise whatever the models.

    Args:
        n: items in the decision split (>= 1).
        confidence: two-sided confidence level, in (0, 1).
        power: probability of detecting a difference of that size, in (0, 1).
        sd: standard deviation of the per-item differences.

    Returns:
        The difference, metric units (may exceed 1: no difference a [0, 1] metric can show is detectable).

    Raises:
        ValueError: n < 1, or confidence or power outside (0, 1).
    """
    from statistics import NormalDist

    if n < 1 or not 0 < confidence < 1 or not 0 < power < 1:
        raise ValueError(f"need n >= 1 and confidence, power in (0, 1); got n={n}, confidence={confidence}, "
                         f"power={power}")
    z = NormalDist().inv_cdf
    return (z(1 - (1 - confidence) / 2) + z(power)) * sd / math.sqrt(n)


def items_to_detect(difference: float, confidence: float = 0.95, power: float = DETECTION_POWER) -> int:
    """The fewest items whose ``minimum_detectable_difference`` (sd 1) is below ``difference``."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    return math.floor(((z(1 - (1 - confidence) / 2) + z(power)) / difference) ** 2) + 1
