"""Compatibility layer: the training-log readers moved to ``evalgate.diagnostics`` (``log.py``, key map in
``keys.py``); the gate's guards (``guard_diagnostics``) and the reward-hacking triad over dev evaluations
(``reward_hacking``) stay here, with the meaning they had, until the gate reads ``evalgate.diagnostics`` directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Any

from evalgate.diagnostics.keys import KEY_MAP
from evalgate.diagnostics.log import (
    TrainLog,
    find_train_log,
    from_records,
    read_jsonl,
    read_path,
    read_tensorboard,
    read_trainer_state,
)

__all__ = ["KEY_MAP", "Diagnostic", "TrainLog", "find_train_log", "from_records", "guard_diagnostics", "read_jsonl",
           "read_path", "read_tensorboard", "read_trainer_state", "reward_hacking"]


# -- diagnostics ---------------------------------------------------------------------------------------------------
@dataclass
class Diagnostic:
    """One finding: ``kind`` (``nan``, ``kl``, ``clip_fraction``, ``entropy``, ``grad_norm_spike``,
    ``reward_hacking``), the first step where it appeared, and a readable detail."""

    kind: str
    step: int
    detail: str


def _window_mean(series: list[tuple[int, float]], lo: int, hi: int) -> float | None:
    vals = [v for s, v in series if lo < s <= hi and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def guard_diagnostics(log: TrainLog, kl_target: float | None = None, clip_max: float | None = 0.4,
                      clip_window: int = 5, entropy_floor: float | None = None, spike_factor: float | None = 10.0,
                      spike_window: int = 10) -> list[Diagnostic]:
    """PPO/GRPO guards over a training log, each reported at the first step where it appeared.

    - ``nan``: any NaN/inf value in any logged key.
    - ``kl``: KL above ``2 * kl_target`` (the adaptive-KL controller's band, Ziegler et al. 2019, sec. 2.2).
    - ``clip_fraction``: clip fraction above ``clip_max`` for ``clip_window`` consecutive logged steps (reported
      at the first step of that window).
    - ``entropy``: entropy below ``entropy_floor``.
    - ``grad_norm_spike``: grad norm above ``spike_factor`` x the median of the previous ``spike_window`` logged
      values (needs at least 3 previous values).

    A guard whose threshold is None is not run. Returns the findings ordered by step.
    """
    out: list[Diagnostic] = []
    if log.nonfinite:
        s, k = log.nonfinite[0]
        out.append(Diagnostic("nan", s, f"non-finite value of '{k}' at step {s}"))
    kl = log.series.get("kl", [])
    if kl_target is not None:
        hit = next(((s, v) for s, v in kl if v > 2 * kl_target), None)
        if hit:
            out.append(Diagnostic("kl", hit[0], f"KL {hit[1]:.4g} > 2 x target {kl_target:g} at step {hit[0]}"))
    clip = log.series.get("clip_fraction", [])
    if clip_max is not None and clip_window >= 1:
        run = 0
        for i, (s, v) in enumerate(clip):
            run = run + 1 if v > clip_max else 0
            if run == clip_window:
                first = clip[i - clip_window + 1][0]
                out.append(Diagnostic("clip_fraction", first, f"clip fraction > {clip_max:g} for {clip_window} "
                                                              f"logged steps from step {first} to {s}"))
                break
    ent = log.series.get("entropy", [])
    if entropy_floor is not None:
        hit = next(((s, v) for s, v in ent if v < entropy_floor), None)
        if hit:
            out.append(Diagnostic("entropy", hit[0], f"entropy {hit[1]:.4g} < floor {entropy_floor:g} at step "
                                                     f"{hit[0]}"))
    gn = [(s, v) for s, v in log.series.get("grad_norm", []) if math.isfinite(v)]
    if spike_factor is not None:
        for i in range(3, len(gn)):
            prev = [v for _, v in gn[max(0, i - spike_window):i]]
            med = median(prev)
            if med > 0 and gn[i][1] > spike_factor * med:
                out.append(Diagnostic("grad_norm_spike", gn[i][0], f"grad norm {gn[i][1]:.4g} > {spike_factor:g} x "
                                                                   f"median {med:.4g} of the previous {len(prev)} "
                                                                   f"logged values, at step {gn[i][0]}"))
                break
    return sorted(out, key=lambda d: d.step)


def reward_hacking(log: TrainLog | None, dev: list[dict[str, Any]]) -> Diagnostic | None:
    """The reward-hacking triad over the same steps: training reward up, dev metric down, and completion length
    or truncation up.

    Steps are cut into intervals at the dev-evaluated checkpoints ``s_0 < s_1 < ...`` (``I_k = (s_{k-1}, s_k]``,
    ``s_{-1} = 0``). At ``s_k`` (k >= 1) the triad holds when: the mean training reward over ``I_k`` exceeds that over
    ``I_{k-1}``; the dev metric at ``s_k`` is below that at ``s_{k-1}``; and the mean logged completion length or
    truncation over ``I_k`` exceeds that over ``I_{k-1}``, or the dev run's mean completion tokens or truncation
    rate rose from ``s_{k-1}`` to ``s_k``.

    Args:
        log: the seed's training log (None: no finding, there is no training reward).
        dev: per checkpoint in step order ``{"step", "value", "mean_completion_tokens", "truncation_rate"}``.

    Returns:
        The first step's finding, or None.
    """
    if log is None or "reward" not in log.series:
        return None
    rew = log.series["reward"]
    bounds = [0] + [int(d["step"]) for d in dev]
    for k in range(1, len(dev)):
        lo2, lo1, hi = bounds[k - 1], bounds[k], bounds[k + 1]
        r_prev, r_now = _window_mean(rew, lo2, lo1), _window_mean(rew, lo1, hi)
        if r_prev is None or r_now is None or not r_now > r_prev:
            continue
        a, b = dev[k - 1], dev[k]
        if not b["value"] < a["value"]:
            continue
        why = []
        for key, label in (("completion_length", "completion length"), ("truncation", "truncation")):
            ser = log.series.get(key, [])
            p, n = _window_mean(ser, lo2, lo1), _window_mean(ser, lo1, hi)
            if p is not None and n is not None and n > p:
                why.append(f"logged {label} {p:.4g} -> {n:.4g}")
        for key, label in (("mean_completion_tokens", "dev completion tokens"), ("truncation_rate", "dev truncation")):
            if a.get(key) is not None and b.get(key) is not None and b[key] > a[key]:
                why.append(f"{label} {a[key]:.4g} -> {b[key]:.4g}")
        if why:
            return Diagnostic("reward_hacking", b["step"],
                              f"steps {lo1}-{hi}: training reward {r_prev:.4g} -> {r_now:.4g} while dev metric "
                              f"{a['value']:.4g} -> {b['value']:.4g} and " + ", ".join(why))
    return None
