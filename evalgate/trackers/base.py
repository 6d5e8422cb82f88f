"""What every tracker writer receives: one training run + seed's eval metrics at a training step, and a gate's
verdict summary (``evalgate.trackers``; one module per tracker library)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from evalgate.core.models import StrictModel


class TrackerConfig(StrictModel):
    """Where the trackers write (``--tracker-dir``, ``--tracker-project``, ``--tracker-uri``). Not part of any
    protocol or gate policy, nor of their hashes: where results are copied to never changes what they are."""


    dir: Path = Path("evalgate-trackers")
    """Root directory: TensorBoard event files under ``DIR/tensorboard/<train_run>/seed-<seed>``, W&B offline runs
    under ``DIR/wandb``, MLflow's default store ``sqlite:///DIR/mlflow.db``."""
    project: str = "evalgate"
    """The W&B project and the MLflow experiment name."""
    tracking_uri: str | None = None
    """MLflow tracking URI (default: the SQLite store in ``dir``)."""


@dataclass(frozen=True)
class RunKey:
    """One tracker run: a training run and seed (the checkpoints' ``train_run`` / ``train_seed``)."""

    train_run: str
    train_seed: int | None

    @property
    def name(self) -> str:
        """``<train_run>/seed-<seed>`` (``seed-none`` when the seed is unknown)."""
        return f"{self.train_run}/seed-{'none' if self.train_seed is None else self.train_seed}"


@dataclass(frozen=True)
class EvalPoint:
    """A run's metrics at its checkpoint's training step.

    Attributes:
        key: the training run + seed.
        step: the checkpoint's training step (the x axis the training curves use).
        split: the split evaluated; tags are ``eval/<split>/<metric>``.
        metrics: metric name -> finite float (pass@k, stderr, truncation rate, ...).
        run_id: the evalgate run.
    """

    key: RunKey
    step: int
    split: str
    metrics: dict[str, float]
    run_id: str

    def tags(self) -> dict[str, float]:
        """``eval/<split>/<metric>`` -> value."""
        return {f"eval/{self.split}/{k}": v for k, v in self.metrics.items()}


@dataclass(frozen=True)
class GateSummary:
    """What a tracker gets of a gate: its aggregate verdict, never a per-item or per-run value.

    Attributes:
        gate: the policy name; gate_id: the stored gate.
        verdict: ``PASS`` / ``FAIL``; reason: the machine-readable reason (pass, fail, drift, ...).
        rules: ``(rule, passed, detail)`` per rule; the detail without any per-seed value of the decision split
            (``RuleOutcome.export_detail`` where the gate's detail names one).
        step: the shipped checkpoint's training step (the highest step gated when none ships).
        ship: the checkpoint path to ship, or None.
    """

    gate: str
    gate_id: str
    verdict: str
    reason: str
    rules: list[tuple[str, bool, str]]
    step: int
    ship: str | None

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    def markdown(self) -> str:
        """The verdict, each rule with pass/FAIL and its detail, and the checkpoint to ship, as Markdown."""
        lines = [f"**{self.verdict}**: gate `{self.gate}` ({self.reason}; {self.gate_id})", ""]
        lines += [f"- [{'pass' if ok else 'FAIL'}] `{rule}`: {detail}" for rule, ok, detail in self.rules]
        lines += ["", f"ship: `{self.ship}`" if self.ship else "ship: none"]
        return "\n".join(lines)

    def scalars(self) -> dict[str, float]:
        """``gate/passed`` and ``gate/rule/<rule>``: 1.0 pass, 0.0 fail."""
        out = {"gate/passed": 1.0 if self.passed else 0.0}
        out.update({f"gate/rule/{rule}": 1.0 if ok else 0.0 for rule, ok, _ in self.rules})
        return out


class Tracker(Protocol):
    """A tracker writer (``tensorboard``, ``wandb``, ``mlflow``)."""

    name: str

    def log_eval(self, point: EvalPoint) -> None:
        """Write one run's metrics at its step into the tracker run of its training run + seed."""

    def log_gate(self, summary: GateSummary) -> None:
        """Write a gate's verdict summary and rules into the tracker run ``gate/<name>``."""

    def close(self) -> list[str]:
        """Flush and close; returns where the data went (directories, run ids) for the user."""


_JUDGE_SCALARS = ("judged", "unparseable", "mean_rating")
_PAIRWISE_SCALARS = ("win_rate", "low", "high", "lc_win_rate", "position_flip_rate", "items", "unparseable_items")


def finite_metrics(metrics: dict[str, Any] | None) -> dict[str, float]:
    """The metrics that are plain finite numbers (booleans and NaN left out; nested values left out), and an LLM
    judge's rates with their counts beside them: ``judge/mean_rating``, ``judge/win_rate``, ``judge/lc_win_rate``,
    ... next to ``judge/judged``, ``judge/unparseable`` and ``judge/unparseable_items`` (every rate counts an
    unparseable verdict, docs/RLHF.md); ``judge/lc_extreme_change`` (1 or 0) beside the LC rate, which is left out
    when that flag is set (a fit AlpacaEval warns about is no number to plot: padding only the answers a model loses
    lifts it to 1)."""
    metrics = metrics or {}
    found = metrics.get("judge")
    judge: dict[str, Any] = found if isinstance(found, dict) else {}
    pairwise = judge.get("pairwise") or {}
    flat = {**metrics, **{f"judge/{k}": judge.get(k) for k in _JUDGE_SCALARS},
            **{f"judge/{k}": pairwise.get(k) for k in _PAIRWISE_SCALARS}}
    if "lc_extreme_change" in pairwise:  # AlpacaEval's "the GLM may have failed": the flag, and no LC rate to plot
        flat["judge/lc_extreme_change"] = 1.0 if pairwise["lc_extreme_change"] else 0.0
        if pairwise["lc_extreme_change"]:
            flat.pop("judge/lc_win_rate")
    out: dict[str, float] = {}
    for k, v in flat.items():
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v)):
            out[str(k)] = float(v)
    return out


def safe_name(text: str) -> str:
    """A path component from a training-run name (``/`` and other odd characters become ``_``)."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_") or "run"
