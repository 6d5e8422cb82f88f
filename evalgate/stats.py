"""Statistics for evaluation metrics: standard errors and bootstrap confidence intervals.

Every reported mean comes with the standard error of the aggregation actually used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def mean_stderr(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error of the mean over independent units (items): ``s / sqrt(n)`` with the sample
    standard deviation ``s`` (ddof=1). The stderr is NaN for fewer than two values.

    Returns:
        (mean, stderr).

    Raises:
        ValueError: no values.
    """
    if len(values) == 0:
        raise ValueError("mean of zero values")
    arr = np.asarray(values, dtype=float)
    se = float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else float("nan")
    return float(arr.mean()), se


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
