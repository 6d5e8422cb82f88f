"""The unbiased pass@k estimator.

Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from evalgate.core.errors import BadInput


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k samples, drawn without replacement from n with c correct, is correct.

    ``pass@k = 1 - C(n-c, k) / C(n, k)``, computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` for numerical
    stability (Chen et al. 2021, Fig. 3).

    Args:
        n: samples generated for the problem (>= 1).
        c: correct samples (0 <= c <= n).
        k: samples considered (1 <= k <= n).

    Returns:
        pass@k in [0, 1].

    Raises:
        BadInput: k > n (pass@k is undefined with fewer than k samples; never reported as 1.0), or c, n, k
            out of range.
    """
    if n < 1 or not 0 <= c <= n:
        raise BadInput(f"pass@k needs n >= 1 and 0 <= c <= n (got n={n}, c={c})")
    if not 1 <= k <= n:
        raise BadInput(f"pass@{k} needs at least k={k} samples per problem but only n={n} were generated; "
                       "raise sampling.n or drop this k")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean over problems of per-problem pass@k; ``counts`` holds (n, c) per problem, each with its own n.

    Raises:
        BadInput: no problems, or k > n for some problem.
    """
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        raise BadInput("pass@k over zero problems is undefined")
    return float(np.mean(values))
