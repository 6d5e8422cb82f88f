"""Signals over a training log, each with its first step, a severity, the values behind it and one plain sentence,
grouped by the part of the training loop it belongs to (the chapter's loop: data/reward, policy update,
exploration, system).

Windows (docs/DIAGNOSTICS.md): a *level* signal looks at ``window`` consecutive logged values (the clip fraction:
every one above the threshold; truncation, pinned length, zero-variance groups: their mean above it) and reports
the first step of the first such run. A *trend* signal compares the mean of the last ``n * window_share`` logged
values with that of the first as many (n = finite logged values, at least 2 each, at least 4 values) and reports
the first step of the first trailing window (after the early one) that crosses the threshold.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from operator import itemgetter
from statistics import median
from typing import Any

import numpy as np

from evalgate.diagnostics.keys import KEY_MAP
from evalgate.diagnostics.log import TrainLog
from evalgate.diagnostics.thresholds import Thresholds

DATA, POLICY, EXPLORATION, SYSTEM = "data/reward", "policy update", "exploration", "system"
PARTS = (DATA, POLICY, EXPLORATION, SYSTEM)
SEVERITIES = ("info", "warn", "fail")
"""Severities in increasing order; a finding's ``status`` is one of these, or ``ok``, ``not_checkable``, ``off``."""

Series = list[tuple[int, float]]
_second = itemgetter(1)


@dataclass
class Finding:
    """One signal's result on one log.

    Attributes:
        signal: signal name (docs/DIAGNOSTICS.md), e.g. ``kl_above_target``.
        part: loop part: ``data/reward``, ``policy update``, ``exploration`` or ``system``.
        status: ``info`` / ``warn`` / ``fail`` (it fired), ``ok``, ``not_checkable`` (its keys are absent, or KL
            is zero/NaN throughout) or ``off`` (its threshold is None).
        message: one plain sentence on what it means for the run.
        step: first step where it appeared (None unless it fired).
        values: the numbers behind it (threshold, window means, the value that tripped).
        keys: the raw keys it read, or, when not checkable, every key it looked for.
        segment: None for the log as it stands; for a finding in a resumed run's abandoned segment, which one
            (``abandoned before the resume at step N``); such findings are reported, never stop or gate a run.
    """

    signal: str
    part: str
    status: str
    message: str
    step: int | None = None
    values: dict[str, float] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    segment: str | None = None

    @property
    def fired(self) -> bool:
        """True for info, warn and fail."""
        return self.status in SEVERITIES

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN/inf values as strings)."""
        d = asdict(self)
        d["values"] = {k: (v if math.isfinite(v) else str(v)) for k, v in self.values.items()}
        return d


def _finite(series: Series) -> Series:
    return [(s, v) for s, v in series if math.isfinite(v)]


def _mean(vals: list[float]) -> float:
    return sum(vals) / len(vals)


def _windows(pts: Series, share: float) -> tuple[int, float, float] | None:
    """(w, early mean, late mean) of the first and last ``w = max(2, ceil(n * share))`` values; None when n < 2w."""
    n = len(pts)
    w = max(2, math.ceil(n * share))
    if n < 2 * w:
        return None
    vals = list(map(_second, pts))
    return w, _mean(vals[:w]), _mean(vals[-w:])


def _first_trailing(pts: Series, w: int, crossed: Callable[[float], bool]) -> int | None:
    """The step where the value changed: in the first window of ``w`` values after the early window whose mean
    satisfies ``crossed``, the first value that satisfies it itself (a mean past a bound has a value past it). The
    window's first step would name a step before the change (KL flat to step 29 and jumping at 30 would be
    reported at step 22)."""
    vals = list(map(_second, pts))
    run = sum(vals[w:2 * w])
    for i in range(w, len(vals) - w + 1):
        if i > w:
            run += vals[i + w - 1] - vals[i - 1]
        if crossed(run / w):
            return next((pts[j][0] for j in range(i, i + w) if crossed(vals[j])), pts[i][0])
    return None


def _first_level(pts: Series, w: int, above: float, every: bool) -> tuple[int, float, int] | None:
    """The first ``w`` consecutive values all above ``above`` (``every``) or with mean above it: the step where the
    value changed (the first value of that run above ``above``), the run's mean and ``w``. A log with fewer than
    ``w`` values is judged on all of them (``w`` is then their number: four steps at 100 %
    truncation are not "ok")."""
    vals = list(map(_second, pts))
    if not vals:
        return None
    w = min(w, len(vals))
    if every:
        run = 0
        for i, v in enumerate(vals):
            run = run + 1 if v > above else 0
            if run == w:
                return pts[i - w + 1][0], _mean(vals[i - w + 1:i + 1]), w
        return None
    total = sum(vals[:w])
    for i in range(len(vals) - w + 1):
        if i:
            total += vals[i + w - 1] - vals[i - 1]
        if total / w > above:
            j = next((j for j in range(i, i + w) if vals[j] > above), i)
            return pts[j][0], total / w, w
    return None


def _over(hit: tuple[int, float, int], window: int) -> str:
    """"over N logged steps", saying so when the log is shorter than the window."""
    if hit[2] < window:
        return f"over all {hit[2]} logged step(s) (fewer than the window of {window}: judged on what there is)"
    return f"over {window} logged steps"


def _short(hit: tuple[int, float, int], window: int) -> dict[str, float]:
    """``{"short_window": n}`` when the log had fewer than ``window`` values (a live run's callback waits for a
    full window before it stops training on such a finding)."""
    return {"short_window": float(hit[2])} if hit[2] < window else {}


class _Ctx:
    """One log, its thresholds and the findings so far."""

    def __init__(self, log: TrainLog, th: Thresholds):
        self.log, self.th = log, th
        self.out: list[Finding] = []
        self._bad = {k for _, k in log.nonfinite}
        self._pts: dict[str, Series] = {}

    def pts(self, canon: str) -> Series:
        """The canonical series without NaN/inf values."""
        if canon not in self._pts:
            ser = self.log.series.get(canon, [])
            self._pts[canon] = _finite(ser) if self.log.used.get(canon) in self._bad else ser
        return self._pts[canon]

    def keys(self, canon: str) -> list[str]:
        return [self.log.used[canon]] if canon in self.log.used else list(KEY_MAP[canon])

    def add(self, signal: str, part: str, status: str, message: str, step: int | None = None,
            values: dict[str, float] | None = None, keys: list[str] | None = None) -> Finding:
        f = Finding(signal, part, status, message, step, values or {}, keys or [])
        self.out.append(f)
        return f

    def absent(self, signal: str, part: str, canon: str, what: str) -> Finding:
        return self.add(signal, part, "not_checkable", f"{what} not logged: looked for "
                        + ", ".join(KEY_MAP[canon]) + ".", keys=list(KEY_MAP[canon]))

    def off(self, signal: str, part: str, canon: str, field_name: str) -> Finding:
        return self.add(signal, part, "off", f"turned off (thresholds.{field_name} is null).", keys=self.keys(canon))

    def limit(self, signal: str, part: str, canon: str, what: str, field_name: str) -> float | None:
        """``thresholds.<field_name>`` when ``signal`` can be evaluated; else None, after recording it as not
        checkable (series ``canon`` not logged) or off (the threshold is None)."""
        if canon not in self.log.series:
            self.absent(signal, part, canon, what)
            return None
        lim: float | None = getattr(self.th, field_name)
        if lim is None:
            self.off(signal, part, canon, field_name)
        elif not self.pts(canon):
            self.add(signal, part, "not_checkable", f"every logged value of '{self.log.used[canon]}' is NaN/inf.",
                     keys=self.keys(canon))
            return None
        return lim


# -- policy update ---------------------------------------------------------------------------------------------------
def _kl_state(c: _Ctx) -> str | None:
    """Why KL cannot be checked (absent, zero throughout, NaN throughout), or None."""
    ser = c.log.series.get("kl")
    if not ser:
        return "KL penalty off or not logged (TRL GRPO/RLOO log no KL when beta = 0): looked for " \
               + ", ".join(KEY_MAP["kl"]) + "."
    fin = c.pts("kl")
    if not fin:
        return f"KL penalty off or not logged: '{c.log.used['kl']}' is NaN at every logged step (beta = 0?)."
    if all(v == 0 for _, v in fin):
        return f"KL penalty off or not logged: '{c.log.used['kl']}' is 0 at every logged step (beta = 0?)."
    return None


def kl_signals(c: _Ctx) -> None:
    """``kl_above_target`` (fail), ``kl_rising`` (warn) and ``kl_negative`` (warn); all ``not_checkable`` when KL
    is absent, zero or NaN throughout, never "within bounds"."""
    why = _kl_state(c)
    for name, fname in (("kl_above_target", "kl_target"), ("kl_rising", "kl_rise_max"),
                        ("kl_negative", "kl_negative_max")):
        if why:
            c.add(name, POLICY, "not_checkable", why, keys=c.keys("kl"))
        elif getattr(c.th, fname) is None:
            c.off(name, POLICY, "kl", fname)
    if why:
        return
    pts, keys = c.pts("kl"), c.keys("kl")
    if c.th.kl_target is not None:
        lim = 2 * c.th.kl_target
        hit = next(((s, v) for s, v in pts if v > lim), None)
        if hit:
            c.add("kl_above_target", POLICY, "fail", f"KL reached {hit[1]:.4g} at step {hit[0]}, above 2 x the target "
                  f"{c.th.kl_target:g}: the policy is drifting from the reference faster than the run allows.",
                  hit[0], {"kl": hit[1], "limit": lim}, keys)
        else:
            c.add("kl_above_target", POLICY, "ok", f"KL stayed at or below 2 x the target {c.th.kl_target:g} "
                  f"(max {max(v for _, v in pts):.4g}).", values={"max": max(v for _, v in pts), "limit": lim},
                  keys=keys)
    if c.th.kl_rise_max is not None:
        _trend(c, "kl_rising", POLICY, "kl", "up", c.th.kl_rise_max, floor=c.th.kl_rise_floor,
               fired="KL rose {r:.3g}x from the early steps ({a:.4g} -> {b:.4g}): the policy keeps moving away "
                     "from the reference; a surge like this precedes collapse.",
               quiet="KL changed {r:.3g}x from the early to the late steps ({a:.4g} -> {b:.4g}).")
    if c.th.kl_negative_max is not None:
        _kl_negative(c, pts, keys, c.th.kl_negative_max)


def _kl_negative(c: _Ctx, pts: Series, keys: list[str], bound: float) -> None:
    """``kl_negative`` (warn): KL below ``bound`` at every one of ``window`` consecutive logged steps. The KL a
    trainer logs is a sample estimate, so single values around 0 are noise (huggingface/trl#925); one that stays
    below -1 is what TRL's PPO trainer warns about (huggingface/trl PR 352; hiyouga/LlamaFactory#664: -5.27)."""
    hit = _first_level([(s, -v) for s, v in pts], c.th.window, -bound, every=True)
    low = min(v for _, v in pts)
    if hit:
        c.add("kl_negative", POLICY, "warn", f"KL stayed below {bound:g} at every step {_over(hit, c.th.window)} "
              f"from step {hit[0]} (mean {-hit[1]:.4g}, lowest {low:.4g}): a true KL is never negative, so the "
              "policy's and the reference's log-probabilities no longer describe the same sampling (generation "
              "settings, a wrong reference model, padding); TRL warns of this as a precursor of failed training.",
              hit[0], {"mean": -hit[1], "min": low, "limit": bound, **_short(hit, c.th.window)}, keys)
    else:
        c.add("kl_negative", POLICY, "ok", f"KL never stayed below {bound:g} for {c.th.window} logged steps (lowest "
              f"{low:.4g}).", values={"min": low, "limit": bound}, keys=keys)


def _trend(c: _Ctx, name: str, part: str, canon: str, direction: str, limit: float, fired: str, quiet: str,
           floor: float = 0.0, sev: str = "warn", drop: bool = False) -> Finding:
    """A ratio trend: late/early above ``limit`` (``up``), or the relative drop 1 - late/early above ``limit``
    (``drop``)."""
    pts, keys = c.pts(canon), c.keys(canon)
    win = _windows(pts, c.th.window_share)
    if win is None:
        return c.add(name, part, "not_checkable", f"too few logged values of '{keys[0]}' ({len(pts)}) for a trend; "
                     "need at least 4.", keys=keys)
    w, a, b = win
    base = max(a, floor) if direction == "up" else a
    if base <= 0:
        return c.add(name, part, "not_checkable", f"'{keys[0]}' early-window mean is {a:.4g}; a ratio to it is "
                     "undefined.", keys=keys)
    ratio = b / base
    vals = {"early_mean": a, "late_mean": b, "ratio": ratio, "limit": limit, "window": float(w)}

    def crossed(m: float) -> bool:
        return (1 - m / base) > limit if drop else m / base > limit

    tripped = (1 - ratio) > limit if drop else ratio > limit
    txt = (fired if tripped else quiet).format(r=ratio, a=a, b=b, d=1 - ratio)
    if not tripped:
        return c.add(name, part, "ok", txt, values=vals, keys=keys)
    return c.add(name, part, sev, txt, _first_trailing(pts, w, crossed), vals, keys)


def clip_signal(c: _Ctx) -> None:
    """``clip_fraction`` (fail): above ``clip_fraction_max`` for ``window`` consecutive logged steps; ``info`` when
    it is 0 at every step (one policy update per batch: the ratio is 1 and the clip never acts)."""
    lim = c.limit("clip_fraction", POLICY, "clip_fraction", "clip fraction", "clip_fraction_max")
    if lim is None:
        return
    pts, keys = c.pts("clip_fraction"), c.keys("clip_fraction")
    hit = _first_level(pts, c.th.window, lim, every=True)
    if hit:
        c.add("clip_fraction", POLICY, "fail", f"clip fraction above {lim:g} at every step {_over(hit, c.th.window)} "
              f"from step {hit[0]} (mean {hit[1]:.3g}): PPO keeps hitting its clip; lower the learning rate or the "
              "number of PPO epochs.", hit[0], {"mean": hit[1], "limit": lim, **_short(hit, c.th.window)}, keys)
    elif pts and all(v == 0 for _, v in pts):
        c.add("clip_fraction", POLICY, "info", f"'{keys[0]}' is 0 at every logged step: with one update per batch "
              "(TRL num_iterations = 1) the importance ratio is 1 and the clip never acts.", values={"max": 0.0},
              keys=keys)
    else:
        mx = max((v for _, v in pts), default=float("nan"))
        c.add("clip_fraction", POLICY, "ok", f"clip fraction never stayed above {lim:g} for {c.th.window} logged "
              f"steps (max {mx:.3g}).", values={"max": mx, "limit": lim}, keys=keys)


def value_loss_signal(c: _Ctx) -> None:
    """``value_loss`` (warn): the critic's loss does not decrease (late-window mean >= early-window mean)."""
    if "value_loss" not in c.log.series:
        c.absent("value_loss", POLICY, "value_loss", "critic value loss (PPO with a critic; GRPO/RLOO have none)")
        return
    if not c.th.value_loss:
        c.off("value_loss", POLICY, "value_loss", "value_loss")
        return
    pts, keys = c.pts("value_loss"), c.keys("value_loss")
    win = _windows(pts, c.th.window_share)
    if win is None:
        c.add("value_loss", POLICY, "not_checkable", f"too few logged values of '{keys[0]}' ({len(pts)}).",
              keys=keys)
        return
    w, a, b = win
    vals = {"early_mean": a, "late_mean": b}
    if b >= a:
        c.add("value_loss", POLICY, "warn", f"the critic's value loss did not decrease ({a:.4g} -> {b:.4g}): its "
              "value estimates are not fitting the returns, so advantages are noise; fit the critic alone first.",
              _first_trailing(pts, w, lambda m: m >= a), vals, keys)
    else:
        c.add("value_loss", POLICY, "ok", f"the value loss decreased ({a:.4g} -> {b:.4g}).", values=vals, keys=keys)


# -- exploration -----------------------------------------------------------------------------------------------------
_RL_SERIES = ("kl", "clip_fraction", "completion_length", "truncation", "zero_std_frac", "value_loss", "reward_std")
_PREFERENCE_KEYS = ("rewards/margins", "rewards/chosen", "logps/chosen")


def trainer_kind(log: TrainLog) -> str:
    """The kind of training read from a log's keys: ``rl`` (a key only RL trainers log: KL, clip fraction,
    completion length, truncation, zero-variance groups, value loss, reward spread, or a reward other than DPO's
    margin), ``preference`` (TRL DPO's ``rewards/margins``, ``rewards/chosen``, ``logps/chosen``), ``sft`` (TRL
    SFTTrainer's ``mean_token_accuracy`` and none of those), else ``unknown`` (every signal applies)."""
    raw = set(log.raw_keys)
    if any(k in log.series for k in _RL_SERIES) or any(r in raw for r in KEY_MAP["reward"] if r != "rewards/margins"):
        return "rl"
    if raw.intersection(_PREFERENCE_KEYS):
        return "preference"
    return "sft" if "mean_token_accuracy" in raw else "unknown"


def entropy_signals(c: _Ctx) -> None:
    """``entropy_floor`` (fail), ``entropy_drop`` (warn) and ``entropy_rising`` (warn)."""
    if "entropy" not in c.log.series:
        for name in ("entropy_floor", "entropy_drop", "entropy_rising"):
            c.absent(name, EXPLORATION, "entropy", "entropy")
        return
    pts, keys = c.pts("entropy"), c.keys("entropy")
    if c.th.entropy_floor is None:
        c.off("entropy_floor", EXPLORATION, "entropy", "entropy_floor")
    else:
        fl = c.th.entropy_floor
        hit = next(((s, v) for s, v in pts if v < fl), None)
        if hit:
            c.add("entropy_floor", EXPLORATION, "fail", f"entropy fell to {hit[1]:.4g} at step {hit[0]}, below the "
                  f"floor {fl:g}: the policy has all but stopped exploring.", hit[0], {"entropy": hit[1],
                                                                                      "floor": fl}, keys)
        else:
            c.add("entropy_floor", EXPLORATION, "ok", f"entropy stayed at or above {fl:g}.", values={"floor": fl},
                  keys=keys)
    kind = trainer_kind(c.log) if c.th.trainer_kind == "auto" else c.th.trainer_kind
    for name, fname in (("entropy_drop", "entropy_drop_max"), ("entropy_rising", "entropy_rise_max")):
        if getattr(c.th, fname) is None:
            c.off(name, EXPLORATION, "entropy", fname)
        elif kind == "sft":
            why = "mean_token_accuracy and no RL key logged" if c.th.trainer_kind == "auto" else "set"
            c.add(name, EXPLORATION, "off", f"does not apply to an SFT run (thresholds.trainer_kind "
                  f"{c.th.trainer_kind}: {why}): fitting the data lowers the entropy by design; it is an RL signal "
                  "(exploration).", keys=keys)
        elif name == "entropy_drop":
            _trend(c, "entropy_drop", EXPLORATION, "entropy", "down", getattr(c.th, fname), drop=True,
                   fired="entropy fell {d:.0%} from the early steps ({a:.4g} -> {b:.4g}): the policy is converging "
                         "early and exploring less.",
                   quiet="entropy changed from {a:.4g} to {b:.4g} ({r:.3g}x of the early steps).")
        else:
            _entropy_rising(c, getattr(c.th, fname))


def _entropy_rising(c: _Ctx, limit: float) -> None:
    """``entropy_rising`` (warn): entropy's late/early ratio above ``limit`` while the reward did not rise (fell,
    stayed flat or is not logged). A policy whose entropy climbs while its reward falls is spreading its mass over
    tokens the reward does not want: the collapse verl users report (verl-project/verl#2738, #1066). With a rising
    reward (an entropy bonus buying exploration that pays) the rise is reported as ``info``."""
    rew = next((f for f in c.out if f.signal == "reward_flat"), None)
    effect = rew.values.get("effect") if rew is not None else None
    f = _trend(c, "entropy_rising", EXPLORATION, "entropy", "up", limit,
               fired="entropy rose {r:.3g}x from the early steps ({a:.4g} -> {b:.4g})",
               quiet="entropy changed {r:.3g}x from the early steps ({a:.4g} -> {b:.4g}).")
    if f.status != "warn":
        return
    if effect is None:
        f.message += " and the reward is not logged (or constant): a policy that spreads its probability mass " \
                     "without a reward to show for it is drifting to noise; read the samples."
    elif effect >= c.th.reward_effect:
        f.status = "info"
        f.message += f" while the reward rose ({effect:+.2f} sd): exploration that pays (e.g. an entropy bonus)."
    else:
        verb = "fell" if effect <= -c.th.reward_effect else "stayed flat"
        f.message += f" while the training reward {verb} ({effect:+.2f} sd): the policy is spreading its " \
                     "probability mass over tokens the reward does not want, the entropy collapse that " \
                     "precedes a failed run; lower the learning rate or the entropy bonus and read the samples."
        f.values["reward_effect"] = effect


# -- data / reward ---------------------------------------------------------------------------------------------------
def _cap(c: _Ctx) -> tuple[float, str] | None:
    if c.th.max_completion_length is not None:
        return float(c.th.max_completion_length), "thresholds.max_completion_length"
    trunc = c.pts("truncation")
    mx = c.pts("completion_length_max")
    if trunc and mx and any(v > 0 for _, v in trunc):
        return max(v for _, v in mx), f"longest logged completion ('{c.log.used['completion_length_max']}'), " \
                                      "inferred: some completions were truncated"
    return None


def length_signals(c: _Ctx) -> None:
    """``truncation`` (fail), ``length_pinned`` (warn), ``length_growth`` (warn)."""
    th = c.th
    lim = c.limit("truncation", DATA, "truncation", "share of truncated completions", "truncation_max")
    if lim is not None:
        pts, keys = c.pts("truncation"), c.keys("truncation")
        hit = _first_level(pts, th.window, lim, every=False)
        if hit:
            c.add("truncation", DATA, "fail", f"{hit[1]:.0%} of completions were cut at the maximum length "
                  f"{_over(hit, th.window)} from step {hit[0]} (limit {lim:.0%}): the reward scores "
                  "unfinished answers; raise the length limit or penalise overlong answers.", hit[0],
                  {"mean": hit[1], "limit": lim, **_short(hit, th.window)}, keys)
        else:
            c.add("truncation", DATA, "ok", f"truncated share stayed at or below {lim:.0%} over every "
                  f"{th.window} logged steps (max {max((v for _, v in pts), default=0):.0%}).",
                  values={"limit": lim}, keys=keys)
    if "completion_length" not in c.log.series:
        c.absent("length_pinned", DATA, "completion_length", "mean completion length")
        c.absent("length_growth", DATA, "completion_length", "mean completion length")
        return
    pts, keys = c.pts("completion_length"), c.keys("completion_length")
    cap = _cap(c)
    if th.length_pinned_ratio is None:
        c.off("length_pinned", DATA, "completion_length", "length_pinned_ratio")
    elif cap is None:
        c.add("length_pinned", DATA, "not_checkable", "maximum completion length unknown: set "
              "thresholds.max_completion_length (it is inferred only when truncation and the longest completion "
              "are logged, e.g. completions/clipped_ratio and completions/max_length).",
              keys=keys + list(KEY_MAP["completion_length_max"]) + list(KEY_MAP["truncation"]))
    else:
        lim = th.length_pinned_ratio * cap[0]
        hit = _first_level([(s, v) for s, v in pts], th.window, lim - 1e-9, every=False)
        vals = {"cap": cap[0], "limit": lim}
        if hit:
            c.add("length_pinned", DATA, "warn", f"mean completion length {hit[1]:.4g} is at {hit[1] / cap[0]:.0%} of "
                  f"the cap {cap[0]:g} {_over(hit, th.window)} from step {hit[0]} (cap: {cap[1]}): most answers "
                  "run to the limit.", hit[0], {**vals, "mean": hit[1], **_short(hit, th.window)}, keys)
        else:
            c.add("length_pinned", DATA, "ok", f"mean completion length stayed below {th.length_pinned_ratio:.0%} "
                  f"of the cap {cap[0]:g} (cap: {cap[1]}).", values=vals, keys=keys)
    if th.length_growth_max is None:
        c.off("length_growth", DATA, "completion_length", "length_growth_max")
    else:
        _trend(c, "length_growth", DATA, "completion_length", "up", th.length_growth_max,
               fired="mean completion length grew {r:.3g}x from the early steps ({a:.4g} -> {b:.4g}): answers are "
                     "inflating, a sign of length preference or reward hacking.",
               quiet="mean completion length changed {r:.3g}x ({a:.4g} -> {b:.4g}).")


def zero_std_signals(c: _Ctx) -> None:
    """``zero_std_groups`` (warn): the share of zero-variance reward groups is high; ``zero_std_rising`` (warn)."""
    th = c.th
    if "zero_std_frac" not in c.log.series:
        c.absent("zero_std_groups", DATA, "zero_std_frac", "share of zero-variance reward groups (GRPO/RLOO)")
        c.absent("zero_std_rising", DATA, "zero_std_frac", "share of zero-variance reward groups (GRPO/RLOO)")
        return
    pts, keys = c.pts("zero_std_frac"), c.keys("zero_std_frac")
    rise_max = th.zero_std_rise_max
    if th.zero_std_max is None:
        c.off("zero_std_groups", DATA, "zero_std_frac", "zero_std_max")
    else:
        hit = _first_level(pts, th.window, th.zero_std_max, every=False)
        mean_all = _mean(list(map(_second, pts))) if pts else float("nan")
        if hit:
            c.add("zero_std_groups", DATA, "warn", f"{hit[1]:.0%} of prompts had the same reward for every sampled "
                  f"completion {_over(hit, th.window)} from step {hit[0]} ({mean_all:.0%} over the run): those "
                  "groups give no learning signal; the prompts are too easy or too hard for the reward.", hit[0],
                  {"mean": hit[1], "run_mean": mean_all, "limit": th.zero_std_max, **_short(hit, th.window)}, keys)
        else:
            c.add("zero_std_groups", DATA, "ok", f"zero-variance groups stayed at or below {th.zero_std_max:.0%} "
                  f"over every {th.window} logged steps ({mean_all:.0%} over the run).",
                  values={"run_mean": mean_all, "limit": th.zero_std_max}, keys=keys)
    if rise_max is None:
        c.off("zero_std_rising", DATA, "zero_std_frac", "zero_std_rise_max")
        return
    win = _windows(pts, th.window_share)
    if win is None:
        c.add("zero_std_rising", DATA, "not_checkable", f"too few logged values of '{keys[0]}' ({len(pts)}).",
              keys=keys)
        return
    w, a, b = win
    vals = {"early_mean": a, "late_mean": b, "rise": b - a, "limit": rise_max}
    if b - a > rise_max:
        step = _first_trailing(pts, w, lambda m: m - a > rise_max)
        c.add("zero_std_rising", DATA, "warn", f"zero-variance groups rose from {a:.0%} to {b:.0%}: more and more "
              "prompts are solved (or failed) by every completion, so the learning signal is drying up.", step,
              vals, keys)
    else:
        c.add("zero_std_rising", DATA, "ok", f"zero-variance groups went from {a:.0%} to {b:.0%}.", values=vals,
              keys=keys)


def reward_signals(c: _Ctx) -> None:
    """``reward_flat`` (warn while length or KL move, info otherwise), ``reward_falling`` (warn),
    ``reward_std_collapse`` (warn), ``reward_length_rise`` (warn): two legs of the reward-hacking triad readable
    from the log alone."""
    if "reward" not in c.log.series:
        for name in ("reward_flat", "reward_falling", "reward_length_rise"):
            c.absent(name, DATA, "reward", "training reward")
    else:
        _reward_moves(c)
    lim = c.limit("reward_std_collapse", DATA, "reward_std", "reward standard deviation", "reward_std_drop_max")
    if lim is not None:
        _trend(c, "reward_std_collapse", DATA, "reward_std", "down", lim, drop=True,
               fired="the spread of rewards within groups fell {d:.0%} ({a:.4g} -> {b:.4g}): advantages are "
                     "normalised by it, so the update is running out of signal.",
               quiet="reward standard deviation went from {a:.4g} to {b:.4g}.")


def _reward_moves(c: _Ctx) -> None:
    th = c.th
    pts, keys = c.pts("reward"), c.keys("reward")
    win = _windows(pts, th.window_share)
    sd = float(np.std(np.fromiter(map(_second, pts), dtype=float, count=len(pts)))) if len(pts) > 1 else 0.0
    if win is None or sd == 0:
        for name in ("reward_flat", "reward_falling", "reward_length_rise"):
            c.add(name, DATA, "not_checkable", f"too few or constant values of '{keys[0]}' ({len(pts)} logged).",
                  keys=keys)
        return
    w, a, b = win
    d = (b - a) / sd
    late_start = pts[-w][0]
    lw = _windows(c.pts("completion_length"), th.window_share)
    len_ratio = lw[2] / lw[1] if lw and lw[1] > 0 else None
    kl_rising = any(f.signal == "kl_rising" and f.status == "warn" for f in c.out)
    len_moved = len_ratio is not None and abs(len_ratio - 1) > th.length_move
    vals = {"early_mean": a, "late_mean": b, "effect": d, "limit": th.reward_effect}
    if len_ratio is not None:
        vals["length_ratio"] = len_ratio
    movers = ([f"completion length changed {len_ratio:.3g}x"] if len_moved and len_ratio is not None else []) + \
        (["KL rose"] if kl_rising else [])
    kl_note = "" if "kl" in c.log.series and _kl_state(c) is None else " (KL is not logged)"
    if abs(d) < th.reward_effect:
        if movers:
            c.add("reward_flat", DATA, "warn", f"training reward stayed flat ({a:.4g} -> {b:.4g}, {d:+.2f} sd) while "
                  f"{' and '.join(movers)}: the policy is changing without earning more reward.", late_start, vals,
                  keys)
        else:
            c.add("reward_flat", DATA, "info", f"training reward stayed flat ({a:.4g} -> {b:.4g}, {d:+.2f} sd) and "
                  f"nothing else moved{kl_note}: the run may not be learning.", late_start, vals, keys)
    else:
        c.add("reward_flat", DATA, "ok", f"training reward {'rose' if d > 0 else 'fell'} {a:.4g} -> {b:.4g} "
              f"({d:+.2f} sd).", values=vals, keys=keys)
    fall = th.reward_fall_effect
    if fall is None:
        c.off("reward_falling", DATA, "reward", "reward_fall_effect")
    elif d <= -fall:
        c.add("reward_falling", DATA, "warn", f"training reward fell {a:.4g} -> {b:.4g} ({d:+.2f} sd): the policy "
              "is getting worse at what it is trained for; look at the step the fall began and read the samples.",
              _first_trailing(pts, w, lambda m: (m - a) / sd <= -fall), {**vals, "limit": -fall}, keys)
    else:
        c.add("reward_falling", DATA, "ok", f"training reward did not fall by {fall:g} sd or more ({d:+.2f} sd).",
              values={**vals, "limit": -fall}, keys=keys)
    if len_ratio is None:
        c.absent("reward_length_rise", DATA, "completion_length", "mean completion length")
    elif d >= th.reward_effect and len_ratio > 1 + th.length_move:
        c.add("reward_length_rise", DATA, "warn", f"training reward rose ({a:.4g} -> {b:.4g}, {d:+.2f} sd) while "
              f"answers got {len_ratio:.3g}x longer: two legs of the reward-hacking triad; check dev accuracy and "
              "read high-reward samples.", late_start, vals, keys + c.keys("completion_length"))
    else:
        c.add("reward_length_rise", DATA, "ok", f"reward and length did not rise together (reward {d:+.2f} sd, "
              f"length {len_ratio:.3g}x).", values=vals, keys=keys + c.keys("completion_length"))


# -- system ----------------------------------------------------------------------------------------------------------
def grad_norm_signal(c: _Ctx) -> None:
    """``grad_norm_spike`` (fail): above ``grad_norm_spike`` x the median of the previous ``grad_norm_window``
    logged values (needs 3 previous values and a median above 0: TRL logs grad_norm 0 on steps where every group
    had one reward, and a normal value after such steps is no spike)."""
    k = c.limit("grad_norm_spike", SYSTEM, "grad_norm", "grad norm", "grad_norm_spike")
    if k is None:
        return
    gn, keys, win = c.pts("grad_norm"), c.keys("grad_norm"), c.th.grad_norm_window
    for i in _spike_candidates(gn, k, win):
        med = median(v for _, v in gn[max(0, i - win):i])
        if med > 0 and gn[i][1] > k * med:
            c.add("grad_norm_spike", SYSTEM, "fail", f"grad norm {gn[i][1]:.4g} at step {gn[i][0]} is over {k:g}x the "
                  f"median {med:.4g} of the previous logged values: a spike that can wreck the weights in one "
                  "update.", gn[i][0], {"grad_norm": gn[i][1], "median": med, "factor": k}, keys)
            return
    c.add("grad_norm_spike", SYSTEM, "ok", f"no grad-norm spike above {k:g}x the running median.",
          values={"factor": k}, keys=keys)


def _spike_candidates(gn: Series, k: float, win: int) -> list[int]:
    """Indexes i >= 3 whose value exceeds ``k`` x the median of the previous ``win`` values (numpy: a 100,000-step
    log is checked in milliseconds; the caller re-checks each candidate exactly)."""
    vals = np.fromiter(map(_second, gn), dtype=float, count=len(gn))
    if len(vals) < 4:
        return []
    pad = np.concatenate([np.full(win - 3, np.nan), vals])  # windows of the first values are shorter: NaN-padded
    meds = np.nanmedian(np.lib.stride_tricks.sliding_window_view(pad, win)[: len(vals) - 3], axis=1)
    hit = np.nonzero((meds > 0) & (vals[3:] > k * meds))[0]
    return [int(i) + 3 for i in hit]


_LOSS = re.compile(r"(?:^|[/_])loss(?:$|[/_])")
_REWARD_KEYS = frozenset((*KEY_MAP["reward"], *KEY_MAP["reward_std"]))


def must_be_finite(key: str) -> bool:
    """True for a loss (a key with ``loss`` as a word: HF ``loss``, verl ``actor/pg_loss``, ``critic/vf_loss``,
    OpenRLHF ``policy_loss``, ``critic_loss``, ``ptx_loss``, TRL PPO ``loss/value_avg``, ...) or a reward of the key
    map (``reward``, ``critic/score/mean``, ...): NaN there is a divergence whatever signal is on (an
    OpenRLHF ``policy_loss`` of NaN is no mere warning). Per-function rewards (TRL ``rewards/<fn>/mean``) are not: a
    function that returns None for every completion of a batch logs NaN by design."""
    return bool(_LOSS.search(key)) or key in _REWARD_KEYS


def nonfinite_signal(c: _Ctx) -> None:
    """``nonfinite`` per key: fail in a loss or a reward (``must_be_finite``) or a key a signal that is on reads,
    warn in another key (one whose signals are off: ``kl`` without a KL check), info for such a key NaN at every
    step (a metric that is off)."""
    if not c.th.nonfinite:
        c.add("nonfinite", SYSTEM, "off", "turned off (thresholds.nonfinite is false).")
        return
    read = {k for f in c.out if f.status != "off" for k in f.keys}  # keys of the signals that ran
    first: dict[str, tuple[int, int]] = {}
    for s, k in c.log.nonfinite:
        st, n = first.get(k, (s, 0))
        first[k] = (st, n + 1)
    if not first:
        c.add("nonfinite", SYSTEM, "ok", "no NaN or inf in any logged value.")
    for k, (s, n) in sorted(first.items(), key=lambda kv: kv[1][0]):
        total = len(c.log.columns[k][0])
        if must_be_finite(k):
            c.add("nonfinite", SYSTEM, "fail", f"'{k}' became NaN/inf at step {s} ({n} of {total} logged values): a "
                  f"{'loss' if _LOSS.search(k) else 'reward'} the trainer optimises is not a number, so the run "
                  "diverged numerically; checkpoints from this step on are suspect.", s, {"count": float(n)}, [k])
        elif n == total:
            c.add("nonfinite", SYSTEM, "info", f"'{k}' is NaN/inf at every logged step ({n}): that metric is off or "
                  "not computed (e.g. kl with beta = 0), not a divergence.", s, {"count": float(n)}, [k])
        elif k in read:
            c.add("nonfinite", SYSTEM, "fail", f"'{k}' became NaN/inf at step {s} ({n} of {total} logged values): the "
                  "run diverged numerically; checkpoints from this step on are suspect.", s, {"count": float(n)},
                  [k])
        else:
            c.add("nonfinite", SYSTEM, "warn", f"'{k}' is NaN/inf at {n} of {total} logged steps from step {s}; no "
                  "signal reads it (a reward function returning None for some prompts gives this).", s,
                  {"count": float(n)}, [k])


SIGNALS: tuple[Callable[[_Ctx], None], ...] = (length_signals, zero_std_signals, kl_signals, reward_signals,
                                               clip_signal, value_loss_signal, entropy_signals, grad_norm_signal,
                                               nonfinite_signal)
"""Run in this order (reward_flat reads kl_rising's result)."""


def run_signals(log: TrainLog, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every signal over one log.

    Returns:
        One finding per signal (``nonfinite``: one per key with NaN/inf, or one ``ok``), in ``SIGNALS`` order.
    """
    c = _Ctx(log, thresholds or Thresholds())
    for sig in SIGNALS:
        sig(c)
    return c.out


SIGNAL_SERIES: dict[str, str] = {
    "truncation": "truncation", "length_pinned": "completion_length", "length_growth": "completion_length",
    "zero_std_groups": "zero_std_frac", "zero_std_rising": "zero_std_frac", "reward_flat": "reward",
    "reward_falling": "reward", "reward_length_rise": "reward", "reward_std_collapse": "reward_std",
    "kl_above_target": "kl", "kl_rising": "kl", "kl_negative": "kl", "clip_fraction": "clip_fraction",
    "value_loss": "value_loss", "entropy_floor": "entropy", "entropy_drop": "entropy", "entropy_rising": "entropy",
    "grad_norm_spike": "grad_norm",
}
"""Signal -> the canonical series it is read from (what the report plots)."""
