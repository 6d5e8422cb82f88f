"""Training logs written next to checkpoints, mapped to known keys, and the diagnostics the gate runs on them.

Readers: HF/TRL ``trainer_state.json`` (its ``log_history``), JSONL (one JSON object per line with ``step`` or
``global_step``), TensorBoard event files (through the ``tensorboard`` package's ``EventAccumulator``; install
``evalgate[tensorboard]``). Each log becomes one series per canonical key, ``[(step, value), ...]`` in step order.

Known keys (first match wins; a ``train/`` prefix, as HF's TensorBoard callback writes, is stripped):

==================  ======================================================================================
canonical           trainer keys
==================  ======================================================================================
reward              ``reward`` (TRL GRPO), ``objective/scores``, ``env/reward_mean`` (TRL PPO / PPOv2)
kl                  ``kl`` (GRPO), ``objective/kl`` (PPO)
entropy             ``entropy`` (GRPO), ``objective/entropy``, ``policy/entropy_avg`` (PPO)
clip_fraction       ``clip_ratio/region_mean``, ``clip_ratio`` (GRPO), ``policy/clipfrac_avg`` (PPO)
completion_length   ``completions/mean_length``, ``completion_length`` (GRPO)
truncation          ``completions/clipped_ratio`` (GRPO: share of completions cut at max length)
grad_norm           ``grad_norm``
loss                ``loss``
learning_rate       ``learning_rate``
==================  ======================================================================================
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from evalgate.errors import BadInput, MissingExtra
from evalgate.fileio import iter_jsonl

KEY_MAP: dict[str, tuple[str, ...]] = {
    "reward": ("reward", "objective/scores", "env/reward_mean"),
    "kl": ("kl", "objective/kl"),
    "entropy": ("entropy", "objective/entropy", "policy/entropy_avg"),
    "clip_fraction": ("clip_ratio/region_mean", "clip_ratio", "policy/clipfrac_avg"),
    "completion_length": ("completions/mean_length", "completion_length"),
    "truncation": ("completions/clipped_ratio",),
    "grad_norm": ("grad_norm",),
    "loss": ("loss",),
    "learning_rate": ("learning_rate",),
}
_STEP_DIR = re.compile(r"checkpoint-(\d+)$")


@dataclass
class TrainLog:
    """One training run's logged metrics.

    Attributes:
        source: file or directory read.
        format: ``trainer_state``, ``jsonl`` or ``tensorboard``.
        series: canonical key -> ``[(step, value)]`` in step order (only keys the log has).
        raw_keys: every key the log holds.
        nonfinite: ``[(step, key)]`` of NaN/inf values in any key, in step order.
    """

    source: str
    format: str
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    raw_keys: list[str] = field(default_factory=list)
    nonfinite: list[tuple[int, str]] = field(default_factory=list)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        return None
    try:
        return float(v)
    except ValueError:
        return None


def from_records(records: list[dict[str, Any]], source: str, fmt: str) -> TrainLog:
    """Build a TrainLog from step records (dicts with ``step`` or ``global_step`` and metric keys).

    Records without a step are skipped (trainer_state.json's final summary has one, and no metric we map).
    """
    log = TrainLog(source, fmt)
    raw: dict[str, list[tuple[int, float]]] = {}
    for rec in records:
        step = rec.get("step", rec.get("global_step"))
        if not isinstance(step, int | float):
            continue
        for k, v in rec.items():
            if k in ("step", "global_step", "epoch"):
                continue
            x = _num(v)
            if x is None:
                continue
            key = k[6:] if k.startswith("train/") else k
            raw.setdefault(key, []).append((int(step), x))
            if not math.isfinite(x):
                log.nonfinite.append((int(step), key))
    log.raw_keys = sorted(raw)
    for canon, candidates in KEY_MAP.items():
        for c in candidates:
            if c in raw:
                log.series[canon] = sorted(raw[c])
                break
    log.nonfinite.sort()
    return log


def read_trainer_state(path: str | Path) -> TrainLog:
    """Read an HF/TRL ``trainer_state.json`` (its ``log_history``).

    Raises:
        BadInput: missing file, invalid JSON, or no ``log_history`` list.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BadInput(f"{p}: cannot read trainer_state.json ({e}); pass the file the trainer wrote") from e
    hist = doc.get("log_history") if isinstance(doc, dict) else None
    if not isinstance(hist, list):
        raise BadInput(f"{p}: no 'log_history' list; is this a Trainer's trainer_state.json?")
    return from_records([h for h in hist if isinstance(h, dict)], str(p), "trainer_state")


def read_jsonl(path: str | Path) -> TrainLog:
    """Read a JSONL metrics log: one JSON object per line with ``step`` (or ``global_step``) and metric keys.

    Raises:
        BadInput: a line that is not a JSON object (naming the line).
    """
    p = Path(path)
    records = []
    for i, rec in iter_jsonl(p.read_text(), p, "each line must be one JSON object"):
        if not isinstance(rec, dict):
            raise BadInput(f"{p}:{i}: each line must be a JSON object with 'step' and metric keys")
        records.append(rec)
    return from_records(records, str(p), "jsonl")


def read_tensorboard(path: str | Path) -> TrainLog:
    """Read scalar summaries from TensorBoard event files under ``path`` (a file or a directory).

    Raises:
        MissingExtra: the ``tensorboard`` package is not installed.
    """
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        raise MissingExtra("reading TensorBoard event files needs: pip install 'evalgate[tensorboard]'") from e
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.rglob("events.out.tfevents.*"))
    by_step: dict[int, dict[str, Any]] = {}
    for f in files:
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            for ev in acc.Scalars(tag):
                by_step.setdefault(int(ev.step), {"step": int(ev.step)})[tag] = float(ev.value)
    return from_records([by_step[s] for s in sorted(by_step)], str(p), "tensorboard")


def find_train_log(run_dir: str | Path) -> TrainLog | None:
    """Find and read the training log of a run directory (the parent of its ``checkpoint-N`` directories).

    Order: ``trainer_state.json`` in the highest ``checkpoint-N`` (it holds the whole history up to that step),
    else one in ``run_dir``; TensorBoard event files under ``run_dir``; ``*.jsonl`` in ``run_dir``.

    Returns:
        The log, or None when there is none.
    """
    d = Path(run_dir)
    if d.is_file():
        return read_path(d)
    if not d.is_dir():
        return None
    ckpts = sorted(((int(m.group(1)), c) for c in d.iterdir() if (m := _STEP_DIR.search(c.name))), reverse=True)
    for _, c in ckpts:
        if (c / "trainer_state.json").is_file():
            return read_trainer_state(c / "trainer_state.json")
    if (d / "trainer_state.json").is_file():
        return read_trainer_state(d / "trainer_state.json")
    if any(d.rglob("events.out.tfevents.*")):
        return read_tensorboard(d)
    jsonl = sorted(d.glob("*.jsonl"))
    return read_jsonl(jsonl[0]) if jsonl else None


def read_path(path: str | Path) -> TrainLog:
    """Read a training log file by its kind (``trainer_state.json``/``*.json``, ``*.jsonl``, event file)."""
    p = Path(path)
    if p.is_dir():
        log = find_train_log(p)
        if log is None:
            raise BadInput(f"{p}: no trainer_state.json, TensorBoard events or .jsonl log found")
        return log
    if p.name.startswith("events.out.tfevents"):
        return read_tensorboard(p)
    if p.suffix == ".jsonl":
        return read_jsonl(p)
    return read_trainer_state(p)


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
