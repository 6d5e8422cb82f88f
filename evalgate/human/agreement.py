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

``proxy_agreement`` gives the same measures for a proxy scorer (a judge, a reward model) against the raters' mean, with
a percentile bootstrap CI over samples for each, plus Cohen's quadratic-weighted kappa (Cohen 1968, "Weighted
kappa") and Krippendorff's alpha between the proxy and the raters' mean, both on the rating scale's levels.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from evalgate.store import Store

Values = Sequence[float] | np.ndarray
"""Paired scores: a sequence or a numpy array."""

THRESHOLD = 0.5
"""Both sides are binarised at this value (human scores after mapping to [0, 1]) for kappa and the table."""


def spearman_ci(auto: Values, human: Values, confidence: float = 0.95, resamples: int = 2000,
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


def kappa(x: Values, y: Values, levels: int, weights: str | None = None) -> float | None:
    """Cohen's kappa of two ratings of the same samples on the categories ``0 .. levels - 1``.

    ``1 - sum(w * O) / sum(w * E)``, ``O`` the observed joint frequencies, ``E`` the chance ones (the product of the
    margins): ``weights`` None gives ``w = 1`` off the diagonal, i.e. ``(p_o - p_e) / (1 - p_e)`` (Cohen 1960);
    ``"linear"`` ``|i - j|`` and ``"quadratic"`` ``(i - j) ** 2`` give the weighted kappa (Cohen 1968). The same
    value as ``sklearn.metrics.cohen_kappa_score(x, y, labels=range(levels), weights=weights)``.

    Returns:
        kappa, or None with no pairs or when chance predicts no disagreement (both sides one same category).
    """
    obs = np.zeros((levels, levels))
    np.add.at(obs, (np.asarray(x, dtype=int), np.asarray(y, dtype=int)), 1)
    n = obs.sum()
    if not n:
        return None
    chance = np.outer(obs.sum(axis=1), obs.sum(axis=0)) / n
    i, j = np.indices((levels, levels))
    w = {None: (i != j).astype(float), "linear": np.abs(i - j), "quadratic": (i - j) ** 2.0}[weights]
    expected = float((w * chance).sum())
    return None if expected == 0 else 1 - float((w * obs).sum()) / expected


def cohen_kappa(auto: Sequence[float], human: Sequence[float], threshold: float = THRESHOLD) -> dict[str, Any]:
    """Cohen's kappa (``kappa``) of both sides binarised at ``threshold`` (``>=`` is positive), and the confusion
    table.

    Returns:
        ``{"kappa", "observed", "confusion": [[auto-/human-, auto-/human+], [auto+/human-, auto+/human+]]}``;
        kappa None when the chance agreement is 1 (both sides constant and equal) or there are no pairs.
    """
    x = [int(v >= threshold) for v in auto]
    y = [int(v >= threshold) for v in human]
    table = [[sum(1 for p, q in zip(x, y, strict=True) if (p, q) == (r, c)) for c in (0, 1)] for r in (0, 1)]
    n = len(x)
    return {"kappa": kappa(x, y, 2), "observed": (table[0][0] + table[1][1]) / n if n else None, "confusion": table}


def _alpha(data: np.ndarray, level: Literal["ordinal"], domain: Sequence[float] | None = None) -> float | None:
    """``krippendorff.alpha`` of a (coders, units) array, NaN missing; None when one value is everywhere (no
    disagreement to compare against) or the value is not finite."""
    import krippendorff

    if len(np.unique(data[~np.isnan(data)])) < 2:
        return None
    value = float(krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain))
    return value if math.isfinite(value) else None


def krippendorff_alpha(ratings: dict[str, dict[tuple[str, int], float]]) -> float | None:
    """Krippendorff's alpha (ordinal) over ``rater -> {sample: score}``; None with fewer than two raters or no
    sample rated twice."""
    raters = sorted(ratings)
    samples = sorted({k for r in raters for k in ratings[r]})
    if len(raters) < 2 or not any(sum(k in ratings[r] for r in raters) >= 2 for k in samples):
        return None
    return _alpha(np.array([[ratings[r].get(k, np.nan) for k in samples] for r in raters], dtype=float), "ordinal")


def on_levels(values: Values, levels: int) -> np.ndarray:
    """Scores in [0, 1] read on a rating scale of ``levels`` points: the nearest of ``0 .. levels - 1``
    (``round(x * (levels - 1))``; a raters' mean between two points goes to the nearer)."""
    return np.rint(np.clip(np.asarray(values, dtype=float), 0, 1) * (levels - 1)).astype(int)


def _with_ci(stat: Any, a: np.ndarray, h: np.ndarray, idx: np.ndarray, confidence: float) -> dict[str, Any]:
    """``{"value", "ci"}``: ``stat(a, h)`` and the percentile interval of ``stat`` over the resampled rows ``idx``
    (resamples where it is undefined dropped); both None where it is undefined on the data.

    ``stat`` is computed once per distinct set of drawn rows: the kappas and alpha count pairs, so the order of the
    rows does not change them (integer counts, summed exactly), and a small audit tier draws the same rows again
    and again (5 samples: at most 126 distinct draws in 2,000 resamples).
    """
    value = stat(a, h) if len(a) else None
    if value is None:
        return {"value": None, "ci": None}
    seen: dict[bytes, float | None] = {}

    def drawn(i: np.ndarray) -> float | None:
        key = np.sort(i).tobytes()
        if key not in seen:
            seen[key] = stat(a[i], h[i])
        return seen[key]
    draws = [v for v in (drawn(i) for i in idx) if v is not None]
    tail = (1 - confidence) / 2
    return {"value": value,
            "ci": [float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))] if draws else None}


def proxy_agreement(auto: Values, human: Values, levels: int, confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """A proxy scorer's agreement with people over n paired samples, each with a percentile bootstrap CI over
    samples (Efron & Tibshirani 1993, ch. 13; one seeded draw of rows shared by the kappas and alpha).

    Args:
        auto: the proxy's score per sample, in [0, 1] (a judge's rating mapped to [0, 1], a reward model's
            sigmoid(reward)).
        human: the raters' mean score per sample, mapped to [0, 1] by the batch's scale.
        levels: points on the rating scale (5 for 1-5); the kappas and alpha read both sides on them (``on_levels``).

    Returns:
        ``{"n", "levels", "spearman": spearman_ci, "kappa", "weighted_kappa", "alpha"}``; each of the last three
        ``{"value", "ci"}``: Cohen's kappa with both sides binarised at ``THRESHOLD`` (Cohen 1960), the
        quadratic-weighted kappa on the levels (Cohen 1968), Krippendorff's alpha (ordinal, the ``krippendorff``
        package) with the proxy and the raters' mean as its two coders. None where undefined (no pairs, one side
        constant).
    """
    a, h = np.asarray(auto, dtype=float), np.asarray(human, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(resamples, len(a))) if len(a) else np.empty((0, 0))

    def binary(x: np.ndarray, y: np.ndarray) -> float | None:
        return kappa((x >= THRESHOLD).astype(int), (y >= THRESHOLD).astype(int), 2)

    def weighted(x: np.ndarray, y: np.ndarray) -> float | None:
        return kappa(on_levels(x, levels), on_levels(y, levels), levels, "quadratic")

    def alpha(x: np.ndarray, y: np.ndarray) -> float | None:
        return _alpha(np.vstack([on_levels(x, levels), on_levels(y, levels)]).astype(float), "ordinal",
                      range(levels))

    return {"n": len(a), "levels": levels,
            "spearman": spearman_ci(a, h, confidence=confidence, resamples=resamples, seed=seed),
            **{k: _with_ci(f, a, h, idx, confidence) for k, f in
               (("kappa", binary), ("weighted_kappa", weighted), ("alpha", alpha))}}


def rated_samples(store: Store, run_id: str, rewards: dict[tuple[str, int], float] | None = None
                  ) -> tuple[dict[str, dict[tuple[str, int], float]], list[dict[str, Any]]]:
    """One run's web-rated samples: each rater's scores, and the samples both rated and scored (or rewarded).

    Args:
        rewards: ``(item_id, sample_index) -> training reward``; where given, it replaces the automatic score
            (samples without a reward are left out).

    Returns:
        ``(per rater {(item_id, sample_index): score in [0, 1] by the batch's scale}, [{"item_id", "sample_index",
        "auto", "human" (the raters' mean), "n_raters"}] sorted by item and sample)``.
    """
    per_rater: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for b in store.batches():
        if b.run_id != run_id:
            continue
        span = b.scale_max - b.scale_min
        for r in store.ratings(b.batch_id):
            if r.score is not None:
                per_rater[r.rater][(r.item_id, r.sample_index)] = (r.score - b.scale_min) / span
    auto = {(s.item_id, s.sample_index): s.score for s in store.sample_scores(run_id)}
    if rewards is not None:
        auto = {k: v for k, v in rewards.items() if k in auto}
    human: dict[tuple[str, int], list[float]] = defaultdict(list)
    for scores in per_rater.values():
        for k, v in scores.items():
            human[k].append(v)
    keys = sorted(k for k in human if k in auto)
    return per_rater, [{"item_id": k[0], "sample_index": k[1], "auto": float(auto[k]),
                        "human": float(np.mean(human[k])), "n_raters": len(human[k])} for k in keys]


def run_agreement(store: Store, run_id: str, rewards: dict[tuple[str, int], float] | None = None,
                  resamples: int = 2000) -> dict[str, Any]:
    """Human vs automatic score (or reward), and between raters, for one run's web ratings (``rated_samples``).

    Args:
        rewards: ``(item_id, sample_index) -> training reward``; where given, it replaces the automatic score
            (samples without a reward are left out).

    Returns:
        ``{"run_id", "against": "reward" | "automatic score", "n_samples", "raters", "spearman", "kappa",
        "alpha", "samples": [{"item_id", "sample_index", "auto", "human", "n_raters"}]}``.
    """
    per_rater, samples = rated_samples(store, run_id, rewards)
    a, h = [s["auto"] for s in samples], [s["human"] for s in samples]
    return {"run_id": run_id, "against": "reward" if rewards is not None else "automatic score",
            "n_samples": len(samples), "raters": sorted(per_rater),
            "spearman": spearman_ci(a, h, resamples=resamples), "kappa": cohen_kappa(a, h),
            "alpha": krippendorff_alpha(per_rater), "samples": samples}


def agreement_by_checkpoint(store: Store, resamples: int = 2000) -> list[dict[str, Any]]:
    """``run_agreement`` for every run that has a rating batch, with the run's checkpoint (digest, path, training
    run, seed, step), protocol and split; runs in the order their first batch was made."""
    out, seen = [], set()
    for b in store.batches():
        if b.run_id in seen:
            continue
        seen.add(b.run_id)
        run = store.runs(run_id=b.run_id)
        r = run[0] if run else None
        out.append({**run_agreement(store, b.run_id, resamples=resamples),
                    "checkpoint": {k: getattr(r, k, None) for k in ("checkpoint_digest", "checkpoint_path",
                                                                    "train_run", "train_seed", "step")},
                    "protocol": f"{getattr(r, 'protocol_name', None)}@{getattr(r, 'protocol_version', None)}",
                    "split": b.split})
    return out
