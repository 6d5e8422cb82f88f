"""A suite's pure decisions (no store, no split read): the one checkpoint each seed ships for the whole suite
(``pick_checkpoints``), the suite verdict as an intersection-union test of its members (``intersection_union``),
Holm's step-down adjustment for the claim "at least one target improved" (``holm``) and the one-sided bootstrap
p-value each member's rule corresponds to (``bootstrap_p_value``). The rules are stated in docs/GATING.md, "Suite
gates"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from evalgate.core.stats import paired_bootstrap_draws
from evalgate.gate.results import CheckpointResult, SeedResult
from evalgate.gate.select import SeedKey, finite


@dataclass(frozen=True)
class SelectingMember:
    """A member that takes part in selection: its name, role, margin (guards), its per-seed dev results
    (``select.select_checkpoints``: each checkpoint's value and failed reasons) and the baseline's value on its dev
    split (None: unknown, so a guard's margin cannot be checked on dev)."""

    name: str
    role: str
    margin: float | None
    seeds: list[SeedResult]
    baseline_dev: float | None


@dataclass
class Pick:
    """One seed's shipped checkpoint for the whole suite.

    Attributes:
        key: (training run, training seed). digest, path, step: the checkpoint (None: none qualified).
        objective: the mean of the selecting targets' dev metrics at it (None: none qualified).
        rejected: checkpoint digest -> why it does not qualify (one line per member that rules it out).
        steps: checkpoint digest -> its step and path (every checkpoint any selecting member evaluated).
        unchecked: selecting guards whose margin could not be checked on dev (no baseline dev value).
    """

    key: SeedKey
    digest: str | None = None
    path: str | None = None
    step: int | None = None
    objective: float | None = None
    rejected: dict[str, list[str]] = field(default_factory=dict)
    steps: dict[str, tuple[int | None, str]] = field(default_factory=dict)
    unchecked: list[str] = field(default_factory=list)


def pick_checkpoints(members: Sequence[SelectingMember]) -> dict[SeedKey, Pick]:
    """Each seed's one checkpoint for the suite, from the selecting members' dev results.

    A checkpoint qualifies when every selecting member has a run of it that is not failed (run error, NaN metric,
    collapse, guard trip: ``select``'s reasons under that member's rules) and every selecting guard's dev value is
    at least the baseline's dev value minus the guard's margin. Among the qualifying checkpoints the seed ships the
    one with the highest mean of the selecting targets' dev metrics (ties: the earlier step). When none qualifies
    the seed ships nothing (``Pick.digest`` None): the member verdicts then count it as a seed without a best
    checkpoint (``min_seeds``, ``best_checkpoint``).

    Args:
        members: the selecting members (at least one target), in suite order.

    Returns:
        (training run, training seed) -> ``Pick``, for every seed any selecting member has.
    """
    per: dict[SeedKey, dict[str, dict[str, CheckpointResult]]] = {}  # seed -> member -> digest -> checkpoint
    for m in members:
        for s in m.seeds:
            per.setdefault((s.train_run, s.train_seed), {})[m.name] = {c.digest: c for c in s.checkpoints}
    picks: dict[SeedKey, Pick] = {}
    for key in sorted(per, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or 0)):
        pick = Pick(key)
        pick.unchecked = [m.name for m in members if m.role == "guard" and m.baseline_dev is None]
        by_member = per[key]
        for cks in by_member.values():
            for d, c in cks.items():
                pick.steps.setdefault(d, (c.step, c.path))
        best: tuple[float, int] | None = None
        for d in pick.steps:
            why, targets = _qualifies(members, by_member, d)
            if why:
                pick.rejected[d] = why
                continue
            objective = float(np.mean(targets))
            rank = (objective, -(pick.steps[d][0] or 0))
            if best is None or rank > best:
                best = rank
                pick.digest, pick.objective = d, objective
                pick.step, pick.path = pick.steps[d]
        picks[key] = pick
    return picks


def _qualifies(members: Sequence[SelectingMember], by_member: dict[str, dict[str, CheckpointResult]],
               digest: str) -> tuple[list[str], list[float]]:
    """Why checkpoint ``digest`` does not qualify (empty: it does), and the selecting targets' dev values at it."""
    why, targets = [], []
    for m in members:
        c = by_member.get(m.name, {}).get(digest)
        if c is None:
            why.append(f"{m.name}: no run on its selection split")
            continue
        if c.failed_reasons:
            why.append(f"{m.name}: failed ({'; '.join(c.failed_reasons)})")
            continue
        if not finite(c.value):
            why.append(f"{m.name}: metric is {c.value!r}")
            continue
        assert c.value is not None
        if m.role == "target":
            targets.append(float(c.value))
        elif m.baseline_dev is not None and c.value < m.baseline_dev - (m.margin or 0.0):
            why.append(f"{m.name}: dev {c.value:.4f} < baseline {m.baseline_dev:.4f} - margin {m.margin:g}")
    return why, targets


def intersection_union(passed: dict[str, bool]) -> tuple[bool, list[str]]:
    """The suite verdict: PASS only when every member passed. Each member's rule is a level-alpha test of its own
    null (the candidate is worse than its threshold); rejecting the union of those nulls when every one is rejected
    is a level-alpha test of "every member passes" with no multiplicity adjustment (Berger 1982, "Multiparameter
    hypothesis testing and acceptance sampling", Technometrics 24(4), theorem 1).

    Returns:
        (passed, the failing members' names in suite order).
    """
    failing = [name for name, ok in passed.items() if not ok]
    return not failing and bool(passed), failing


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values, in the input order: sort ascending ``p_(1) <= ... <= p_(m)``;
    ``adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``. A hypothesis is rejected at family-wise level alpha when its
    adjusted p-value is <= alpha (Holm 1979, "A simple sequentially rejective multiple test procedure", Scand. J.
    Statist. 6(2)); "at least one target improved" holds when the smallest is.

    Raises:
        ValueError: a p-value outside [0, 1].
    """
    if any(not 0.0 <= p <= 1.0 for p in p_values):
        raise ValueError(f"p-values must lie in [0, 1]: {list(p_values)}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def bootstrap_p_value(candidate: np.ndarray, baseline: np.ndarray | float, threshold: float, resamples: int,
                      seed: int) -> float:
    """One-sided bootstrap p-value of the null "candidate - baseline <= threshold": the share of the paired
    bootstrap's resampled differences (``core.stats.paired_bootstrap_draws``, the same draws as the gate's CI for
    the same seed) that are <= ``threshold``. The percentile CI's lower end at two-sided confidence c is >= the
    threshold about when this p-value is <= (1 - c) / 2 (the interval-test duality; Efron & Tibshirani 1993,
    sec. 16.4).

    Args:
        candidate: per-item values, shape (items,) or (seeds, items). baseline: per-item values or a fixed value.
        threshold: the member's threshold (min_improvement, or -margin). resamples, seed: as the gate's bootstrap.
    """
    _, diffs = paired_bootstrap_draws(candidate, baseline, resamples, seed)
    return float(np.mean(diffs <= threshold))
