"""Agreement between people and the automatic score (or the training reward), and between people.

For each run with web ratings (one run = one checkpoint on one split), over the rated samples:

- human score of a sample: the mean over raters of the score mapped to [0, 1] by the batch's scale,
  ``(score - min) / (max - min)``, so the chapter's audit rule ("human score < 0.4") reads the same on any scale;
- **Spearman's rho** between the automatic score (or reward) and the human score (``scipy.stats.spearmanr``), with a
  percentile bootstrap CI over samples (Efron & Tibshirani 1993, ch. 13; resamples where either side is constant
  have no rho and are dropped);
- **Cohen's kappa** after thresholding both sides at 0.5 (a human score of at least half the scale, an automatic
  score or reward of at least 0.5): ``(p_o - p_e) / (1 - p_e)`` (Cohen 1960, "A coefficient of agreement for nominal
  scales"), with its 2x2 confusion table;
- **Krippendorff's alpha** between raters (ordinal distance, the ``krippendorff`` package; Krippendorff 2011,
  "Computing Krippendorff's Alpha-Reliability"), over samples rated by at least two people.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from evalgate.store import Store

THRESHOLD = 0.5
"""Both sides are binarised at this value (human scores after mapping to [0, 1]) for kappa and the table."""


def spearman_ci(auto: Sequence[float], human: Sequence[float], confidence: float = 0.95, resamples: int = 2000,
                seed: int = 0) -> dict[str, Any]:
    """Spearman's rho of paired values with a percentile bootstrap CI.

    Args:
        auto, human: paired values, same length n.
        confidence: two-sided level of the interval.
        resamples: bootstrap resamples of the n pairs (seeded numpy generator).

    Returns:
        ``{"n", "rho", "ci": [low, high] or None}``; rho None when n < 3 or a side is constant.
    """
    from scipy.stats import rankdata, spearmanr

    a, h = np.asarray(auto, dtype=float), np.asarray(human, dtype=float)
    n = len(a)
    if n < 3 or np.ptp(a) == 0 or np.ptp(h) == 0:
        return {"n": n, "rho": None, "ci": None}
    rho = float(spearmanr(a, h).statistic)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    # Spearman's rho is Pearson's r of the (average) ranks: all resamples at once, the constant ones dropped
    ra, rh = rankdata(a[idx], axis=1), rankdata(h[idx], axis=1)
    ra, rh = ra - ra.mean(axis=1, keepdims=True), rh - rh.mean(axis=1, keepdims=True)
    den = np.sqrt((ra ** 2).sum(axis=1) * (rh ** 2).sum(axis=1))
    ok = den > 0
    stats = (ra * rh).sum(axis=1)[ok] / den[ok]
    alpha = (1 - confidence) / 2
    ci = [float(np.quantile(stats, alpha)), float(np.quantile(stats, 1 - alpha))] if len(stats) else None
    return {"n": n, "rho": rho, "ci": ci}


def cohen_kappa(auto: Sequence[float], human: Sequence[float], threshold: float = THRESHOLD) -> dict[str, Any]:
    """Cohen's kappa of both sides binarised at ``threshold`` (``>=`` is positive), and the confusion table.

    Returns:
        ``{"kappa", "observed", "confusion": [[auto-/human-, auto-/human+], [auto+/human-, auto+/human+]]}``;
        kappa None when the chance agreement is 1 (both sides constant and equal) or there are no pairs.
    """
    table = [[0, 0], [0, 0]]
    for x, y in zip(auto, human, strict=True):
        table[int(x >= threshold)][int(y >= threshold)] += 1
    n = sum(map(sum, table))
    if not n:
        return {"kappa": None, "observed": None, "confusion": table}
    p_o = (table[0][0] + table[1][1]) / n
    p_e = ((table[0][0] + table[0][1]) * (table[0][0] + table[1][0])
           + (table[1][0] + table[1][1]) * (table[0][1] + table[1][1])) / n ** 2
    return {"kappa": None if p_e == 1 else (p_o - p_e) / (1 - p_e), "observed": p_o, "confusion": table}


def krippendorff_alpha(ratings: dict[str, dict[tuple[str, int], float]]) -> float | None:
    """Krippendorff's alpha (ordinal) over ``rater -> {sample: score}``; None with fewer than two raters or no
    sample rated twice."""
    import krippendorff

    raters = sorted(ratings)
    samples = sorted({k for r in raters for k in ratings[r]})
    if len(raters) < 2 or not any(sum(k in ratings[r] for r in raters) >= 2 for k in samples):
        return None
    data = np.array([[ratings[r].get(k, np.nan) for k in samples] for r in raters], dtype=float)
    if len(np.unique(data[~np.isnan(data)])) < 2:
        return None  # one value everywhere: alpha is undefined (no disagreement to compare against)
    value = float(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"))
    return value if math.isfinite(value) else None


def run_agreement(store: Store, run_id: str, rewards: dict[tuple[str, int], float] | None = None,
                  resamples: int = 2000) -> dict[str, Any]:
    """Human vs automatic score (or reward), and between raters, for one run's web ratings.

    Args:
        rewards: ``(item_id, sample_index) -> training reward``; where given, it replaces the automatic score
            (samples without a reward are left out).

    Returns:
        ``{"run_id", "against": "reward" | "automatic score", "n_samples", "raters", "spearman", "kappa",
        "alpha", "samples": [{"item_id", "sample_index", "auto", "human", "n_raters"}]}``.
    """
    per_rater: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for b in store.batches():
        if b["run_id"] != run_id:
            continue
        span = b["scale_max"] - b["scale_min"]
        for r in store.ratings(b["batch_id"]):
            if r["score"] is not None:
                per_rater[r["rater"]][(r["item_id"], r["sample_index"])] = (r["score"] - b["scale_min"]) / span
    auto = {(s["item_id"], s["sample_index"]): s["score"] for s in store.sample_scores(run_id)}
    if rewards is not None:
        auto = {k: v for k, v in rewards.items() if k in auto}
    human: dict[tuple[str, int], list[float]] = defaultdict(list)
    for scores in per_rater.values():
        for k, v in scores.items():
            human[k].append(v)
    keys = sorted(k for k in human if k in auto)
    a = [float(auto[k]) for k in keys]
    h = [float(np.mean(human[k])) for k in keys]
    return {"run_id": run_id, "against": "reward" if rewards is not None else "automatic score",
            "n_samples": len(keys), "raters": sorted(per_rater),
            "spearman": spearman_ci(a, h, resamples=resamples), "kappa": cohen_kappa(a, h),
            "alpha": krippendorff_alpha(per_rater),
            "samples": [{"item_id": k[0], "sample_index": k[1], "auto": x, "human": y, "n_raters": len(human[k])}
                        for k, x, y in zip(keys, a, h, strict=True)]}


def agreement_by_checkpoint(store: Store, resamples: int = 2000) -> list[dict[str, Any]]:
    """``run_agreement`` for every run that has a rating batch, with the run's checkpoint (digest, path, training
    run, seed, step), protocol and split; runs in the order their first batch was made."""
    out, seen = [], set()
    for b in store.batches():
        if b["run_id"] in seen:
            continue
        seen.add(b["run_id"])
        run = store.runs(run_id=b["run_id"])
        r = run[0] if run else {}
        out.append({**run_agreement(store, b["run_id"], resamples=resamples),
                    "checkpoint": {k: r.get(k) for k in ("checkpoint_digest", "checkpoint_path", "train_run",
                                                         "train_seed", "step")},
                    "protocol": f"{r.get('protocol_name')}@{r.get('protocol_version')}", "split": b["split"]})
    return out
