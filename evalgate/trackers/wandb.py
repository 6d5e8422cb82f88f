"""Weights & Biases: one W&B run per training run + seed (group = the training run), written with ``wandb``
itself, offline unless ``$WANDB_MODE`` says otherwise (``wandb sync DIR/wandb/offline-run-*`` uploads it later).

Metrics are ``eval/<split>/<metric>`` with ``train/global_step`` as their step metric (``define_metric``), the
axis HF's and TRL's W&B callback logs the training curves against, so the eval curve lands beside them. The run
id is derived from project, training run and seed, so later evaluations of the same training run resume it when
synced. A gate is a run ``gate/<name>`` of its own: summary ``gate/verdict``, ``gate/reason``, ``gate/passed``,
``gate/rule/<rule>`` (1 pass, 0 fail) and ``gate/verdict_md``; its report files saved with the run.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from evalgate.core.errors import MissingExtra
from evalgate.core.version import install_hint
from evalgate.trackers.base import EvalPoint, GateSummary, RunKey, TrackerConfig

STEP_METRIC = "train/global_step"
"""The step key HF's ``WandbCallback`` logs and defines as every metric's step (transformers' integration)."""


def _wandb() -> Any:
    try:
        import wandb
    except ImportError as e:
        raise MissingExtra(f"--report-to wandb needs the wandb package: {install_hint('wandb')}") from e
    return wandb


def run_id(project: str, name: str) -> str:
    """A stable W&B run id for ``project`` and a tracker run name (16 hex digits of their sha256)."""
    return hashlib.sha256(f"{project}\0{name}".encode()).hexdigest()[:16]


class WandbTracker:
    """Collects the points and writes one W&B run per training run + seed on ``close``.

    Raises:
        MissingExtra: the ``wandb`` package is not installed (``evalgate[wandb]``).
    """

    name = "wandb"

    def __init__(self, config: TrackerConfig):
        self.wandb = _wandb()
        self.config = config
        self.dir = Path(config.dir)
        self._points: dict[RunKey, list[EvalPoint]] = {}
        self._gates: list[GateSummary] = []
        self._written: list[str] = []

    def log_eval(self, point: EvalPoint) -> None:
        """Queue ``point`` for its training run + seed's W&B run."""
        self._points.setdefault(point.key, []).append(point)

    def log_gate(self, summary: GateSummary) -> None:
        """Queue the gate's summary run."""
        self._gates.append(summary)

    def _init(self, name: str, group: str, config: dict[str, Any]) -> Any:
        self.dir.mkdir(parents=True, exist_ok=True)
        settings = self.wandb.Settings(silent=True, console="off", x_disable_stats=True, x_disable_meta=True)
        return self.wandb.init(project=self.config.project, dir=str(self.dir), name=name, group=group,
                               id=run_id(self.config.project, name), config=config, job_type="eval",
                               mode=os.environ.get("WANDB_MODE", "offline"), settings=settings, reinit="create_new")

    def _write_points(self, key: RunKey, points: list[EvalPoint]) -> None:
        run = self._init(key.name, key.train_run, {"train_run": key.train_run, "train_seed": key.train_seed})
        run.define_metric(STEP_METRIC)
        run.define_metric("eval/*", step_metric=STEP_METRIC)
        for p in sorted(points, key=lambda p: p.step):
            run.log({STEP_METRIC: p.step, **p.tags()})
        self._written.append(f"wandb run {run.id} ({key.name}): {run.dir}")
        run.finish()

    def _write_gate(self, g: GateSummary) -> None:
        run = self._init(f"gate/{g.gate}", "gate", {"gate_id": g.gate_id})
        run.summary.update({"gate/verdict": g.verdict, "gate/reason": g.reason, "gate/step": g.step,
                            "gate/ship": g.ship or "", "gate/verdict_md": g.markdown(), **g.scalars()})
        self._written.append(f"wandb run {run.id} (gate/{g.gate}): {run.dir}")
        run.finish()

    def close(self) -> list[str]:
        """Write the queued runs (each ``init`` ... ``finish``); returns the runs written and their directories."""
        for key, points in self._points.items():
            self._write_points(key, points)
        for g in self._gates:
            self._write_gate(g)
        written, self._points, self._gates, self._written = self._written, {}, [], []
        return written
