"""The gate's training-log guards: which log belongs to a seed, what ``evalgate.diagnostics`` finds on it under the
policy's ``guards`` (a finding whose severity is in ``fail_on`` fails every checkpoint at or after its first step;
signals the log cannot check; whether the log covers the checkpoints), and the reward-hacking triad over the seed's
dev curve, the one signal that needs dev evaluations and so stays in the gate."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalgate.diagnostics.guards import SeedGuards, guard_seed
from evalgate.diagnostics.log import TrainLog, find_train_log, read_path
from evalgate.diagnostics.signals import DATA, Finding
from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import SeedResult, TrainLogInfo
from evalgate.gate.select import SeedKey, finite


def train_logs(policy: GatePolicy, seeds: list[SeedResult]) -> dict[SeedKey, TrainLog | None]:
    """(training run, training seed) -> its log: the policy's ``training_logs`` entry for the seed, else the first
    log found next to that seed's own checkpoints (latest step first; never another run's); None when there is
    none."""
    out: dict[SeedKey, TrainLog | None] = {}
    for s in seeds:
        key, seed = (s.train_run, s.train_seed), s.train_seed
        if seed is not None and seed in policy.training_logs:
            out[key] = read_path(policy.training_logs[seed])
            continue
        log = None
        for c in sorted(s.checkpoints, key=lambda c: c.step or 0, reverse=True):
            p = Path(c.path)
            if p.is_dir():
                log = find_train_log(p.parent)
                if log:
                    break
        out[key] = log
    return out


def seed_guards(policy: GatePolicy, seeds: list[SeedResult],
                logs: dict[SeedKey, TrainLog | None]) -> dict[SeedKey, SeedGuards]:
    """(training run, training seed) -> ``diagnostics.guards.guard_seed`` over its log under the policy's guards,
    with the seed's checkpoint steps for the coverage check."""
    return {(s.train_run, s.train_seed): guard_seed(logs.get((s.train_run, s.train_seed)), policy.guards,
                                                    [c.step for c in s.checkpoints if c.step is not None],
                                                    s.train_seed)
            for s in seeds}


def _window_mean(series: list[tuple[int, float]], lo: int, hi: int) -> float | None:
    vals = [v for s, v in series if lo < s <= hi and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def reward_hacking(log: TrainLog | None, dev: list[dict[str, Any]]) -> tuple[Finding | None, int]:
    """The reward-hacking triad over the same steps: training reward up, dev metric down, and completion length
    or truncation up (the chapter's three legs; ``diagnostics`` reads the first two from the log alone as
    ``reward_length_rise``, the dev leg needs the gate's evaluations).

    Steps are cut into intervals at the dev-evaluated checkpoints ``s_0 < s_1 < ...`` (``I_k = (s_{k-1}, s_k]``,
    ``s_{-1} = 0``). At ``s_k`` (k >= 1) the triad holds when: the mean training reward over ``I_k`` exceeds that over
    ``I_{k-1}``; the dev metric at ``s_k`` is below that at ``s_{k-1}``; and the mean logged completion length or
    truncation over ``I_k`` exceeds that over ``I_{k-1}``, or the dev run's mean completion tokens or truncation
    rate rose from ``s_{k-1}`` to ``s_k``.

    Args:
        log: the seed's training log (None: no finding, there is no training reward).
        dev: per checkpoint in step order ``{"step", "value", "mean_completion_tokens", "truncation_rate"}``.

    Returns:
        (the first step's finding (signal ``reward_hacking``, severity ``fail``) or None, the number of steps
        ``s_k`` checked: both reward windows hold a finite reward). 0 checked: the triad is not checkable for the
        seed (no log, no reward, or fewer than two dev checkpoints with reward logged around them).
    """
    if log is None or "reward" not in log.series:
        return None, 0
    rew = log.series["reward"]
    bounds = [0] + [int(d["step"]) for d in dev]
    checked = 0
    for k in range(1, len(dev)):
        lo2, lo1, hi = bounds[k - 1], bounds[k], bounds[k + 1]
        r_prev, r_now = _window_mean(rew, lo2, lo1), _window_mean(rew, lo1, hi)
        if r_prev is None or r_now is None:
            continue
        checked += 1
        if not r_now > r_prev:
            continue
        a, b = dev[k - 1], dev[k]
        if not b["value"] < a["value"]:
            continue
        why, keys = [], [log.used["reward"]]
        for key, label in (("completion_length", "completion length"), ("truncation", "truncation")):
            ser = log.series.get(key, [])
            p, n = _window_mean(ser, lo2, lo1), _window_mean(ser, lo1, hi)
            if p is not None and n is not None and n > p:
                why.append(f"logged {label} {p:.4g} -> {n:.4g}")
                keys.append(log.used[key])
        for key, label in (("mean_completion_tokens", "dev completion tokens"), ("truncation_rate", "dev truncation")):
            if a.get(key) is not None and b.get(key) is not None and b[key] > a[key]:
                why.append(f"{label} {a[key]:.4g} -> {b[key]:.4g}")
        if why:
            return Finding("reward_hacking", DATA, "fail",
                           f"steps {lo1}-{hi}: training reward {r_prev:.4g} -> {r_now:.4g} while dev metric "
                           f"{a['value']:.4g} -> {b['value']:.4g} and " + ", ".join(why), int(b["step"]),
                           {"reward_before": r_prev, "reward_after": r_now, "dev_before": float(a["value"]),
                            "dev_after": float(b["value"])}, keys), checked
    return None, checked


def attach_diagnostics(seed: SeedResult, log: TrainLog | None, guards: SeedGuards | None) -> None:
    """Set the seed's diagnostics (its guard trips, then the reward-hacking triad over its dev curve), the
    diagnosis behind them and the log it came from."""
    dev = [{"step": c.step, "value": c.value, **c.metrics} for c in seed.checkpoints
           if finite(c.value) and c.step is not None]
    triad, seed.triad_checked = reward_hacking(log, dev)
    seed.guards = guards
    seed.diagnostics = [*(guards.trips if guards else []), *([triad] if triad else [])]
    seed.train_log = TrainLogInfo(log.source, log.format, sorted(log.series)) if log else None
    seed.train_series = log.series if log else {}
