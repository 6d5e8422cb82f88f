"""Eval results where teams already look: TensorBoard, W&B and MLflow (``--report-to`` on ``evalgate run``,
``sweep``, ``watch`` and ``gate``; docs/TRACKERS.md).

One tracker run per training run + seed, metrics keyed by the checkpoint's training step, so an eval curve lands on
the training curves' axis. What may leave the store is decided here, once, for every tracker:

- A run's metrics are an export of its split's numbers: a logged read like ``evalgate samples`` (purpose
  ``export-tracker``, cached, the run id in the row), under the split's tier policy and budget. A private-tier run
  is never exported: the attempt is logged as refused and the command goes on.
- A gate is exported as its aggregate verdict only (verdict, reason, each rule's pass/fail and its detail with
  counts of seeds in place of per-seed decision values, ``RuleOutcome.export_detail``; the checkpoint to ship),
  logged as ``exported`` on each split it gated on; no per-item and no per-run value of its decision split. The
  report files stay where the gate wrote them: each holds per-seed decision values.

A tracker library that is not installed is ``MissingExtra`` naming the extra (exit 2), checked before any work.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalgate.access import log as accesslog
from evalgate.core.enums import Tier
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.store.rows import RunRow
from evalgate.trackers.base import EvalPoint, GateSummary, RunKey, Tracker, TrackerConfig, finite_metrics

EXPORT_PURPOSE = "export-tracker"
"""The access-log purpose of a run's metrics sent to a tracker."""
GATE_EXPORT_OUTCOME = "exported"
"""The access-log outcome of a gate verdict sent to a tracker (not a read of the split: no budget counts it)."""
TRACKERS: dict[str, str] = {"tensorboard": "evalgate.trackers.tensorboard:TensorBoardTracker",
                            "wandb": "evalgate.trackers.wandb:WandbTracker",
                            "mlflow": "evalgate.trackers.mlflow:MlflowTracker"}
"""Tracker name -> ``module:class`` (imported only when asked for)."""

__all__ = ["EXPORT_PURPOSE", "TRACKERS", "EvalPoint", "GateSummary", "RunKey", "Tracker", "TrackerConfig",
           "export_gate", "export_runs", "gate_summary", "open_trackers"]


def open_trackers(names: list[str] | tuple[str, ...], config: TrackerConfig | None = None) -> list[Tracker]:
    """The trackers ``names`` (each once, in order), ready to write.

    Raises:
        BadInput: an unknown tracker name.
        MissingExtra: its library is not installed (the extra to add is named).
    """
    config = config or TrackerConfig()
    out: list[Tracker] = []
    for name in dict.fromkeys(names):
        if name not in TRACKERS:
            raise BadInput(f"--report-to {name!r}: unknown tracker; known: {', '.join(TRACKERS)}")
        module, cls = TRACKERS[name].split(":")
        out.append(getattr(importlib.import_module(module), cls)(config))
    return out


def _point(run: RunRow) -> EvalPoint | str:
    """The run's eval point, or why it has none."""
    if run.status != "complete":
        return f"run {run.run_id} is {run.status}, not complete"
    if run.step is None:
        return (f"run {run.run_id} ({run.checkpoint_path}) has no training step (pass --step, or name the "
                "directory checkpoint-N)")
    train_run = run.train_run or Path(str(run.checkpoint_path)).parent.name or "run"
    key = RunKey(train_run, run.train_seed)
    return EvalPoint(key, int(run.step), run.split, finite_metrics(dict(run.metrics or {})), run.run_id)


def export_runs(run_ids: list[str], trackers: list[Tracker], store: Any, actor: str | None = None,
                say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Send stored runs' metrics to ``trackers`` at their checkpoints' steps (each a logged read of its split).

    Args:
        run_ids: the runs (complete ones are exported; the others are named in ``skipped``).
        trackers: from ``open_trackers``; closed here.
        store: the Store (the workspace's).
        actor: who exports (default the store's environment's, ``actor_name``).
        say: where a line per skipped run goes (default: nowhere).

    Returns:
        ``{"exported": [run ids], "skipped": [{"run_id", "reason"}], "written": [where each tracker wrote]}``.
    """
    from evalgate.splits.guard import SplitManager
    from evalgate.splits.manifest import actor_name

    manager, who = SplitManager(store), actor_name(actor, env=store.env)
    names = ", ".join(t.name for t in trackers)
    exported: list[str] = []
    skipped: list[dict[str, str]] = []
    for run_id in dict.fromkeys(run_ids):
        rows = store.runs(run_id=run_id)
        point = _point(rows[0]) if rows else f"no run {run_id} in the store"
        if isinstance(point, str):
            skipped.append({"run_id": run_id, "reason": point})
            continue
        try:
            _admit(manager, rows[0], who, names)
        except (RefusedByPolicy, BadInput) as e:
            skipped.append({"run_id": run_id, "reason": str(e)})
            continue
        for t in trackers:
            t.log_eval(point)
        exported.append(run_id)
    for s in skipped:
        (say or (lambda _: None))(f"not sent to {names}: {s['reason']}")
    return {"exported": exported, "skipped": skipped, "written": [w for t in trackers for w in t.close()]}


def _admit(manager: Any, run: RunRow, actor: str, names: str) -> None:
    """Check and log the export of ``run``'s metrics as a read of its split (a private run: refused, logged)."""
    split, digest, phash = run.split, run.checkpoint_digest, run.protocol_hash
    if run.tier == Tier.PRIVATE:
        manager.refuse(split, EXPORT_PURPOSE, actor,
                       f"run {run.run_id} is on split {split} (tier private): private-tier numbers go to a tracker "
                       "only as a gate's verdict ('evalgate gate --report-to ...')", checkpoint_digest=digest,
                       protocol_hash=phash)
    m, _ = manager.check(split, EXPORT_PURPOSE, actor, None, digest, phash)
    manager.log_read(m, actor, EXPORT_PURPOSE, True, digest, phash, run.run_id, detail=f"metrics to {names}")


def gate_summary(doc: dict[str, Any]) -> GateSummary:
    """The aggregate verdict of a gate document (``gate_and_report``'s, ``evalgate gate --json``'s): each rule's
    ``export_detail`` where it has one (its detail names per-seed values of the decision split), else its detail.

    The step is the shipped checkpoint's, else the highest checkpoint step the gate considered (0 when none).
    """
    steps = [c["step"] for s in doc.get("seeds", []) for c in s.get("checkpoints", []) if c.get("step") is not None]
    ship = doc.get("ship") or {}
    step: int = ship["step"] if ship.get("step") is not None else max(steps, default=0)
    rules = [(r["rule"], bool(r["passed"]), str(r.get("export_detail") or r["detail"])) for r in doc.get("rules", [])]
    return GateSummary(doc["gate"], doc.get("gate_id") or "", doc["verdict"], doc["reason"], rules, int(step),
                       ship.get("checkpoint"))


def export_gate(doc: dict[str, Any], trackers: list[Tracker], *, store: Any,
                actor: str | None = None) -> dict[str, Any]:
    """Send a gate's aggregate verdict (``gate_summary``) to ``trackers``, logged as ``exported`` on each split
    the gate used (selection and decision).

    Returns:
        ``{"summary": GateSummary as a dict, "written": [where each tracker wrote]}``.
    """
    from evalgate.splits.guard import SplitManager
    from evalgate.splits.manifest import actor_name

    summary = gate_summary(doc)
    manager, who = SplitManager(store), actor_name(actor, env=store.env)
    names = ", ".join(t.name for t in trackers)
    for split in dict.fromkeys(s for s in (doc.get("selection_split"), doc.get("decision_split")) if s):
        m = manager.manifest(split)
        accesslog.append(store, accesslog.entry(
            actor=who, split=m.name, tier=m.tier, purpose=EXPORT_PURPOSE, outcome=GATE_EXPORT_OUTCOME, cached=True,
            protocol_hash=doc.get("protocol_hash"),
            detail=f"gate {summary.gate_id} verdict {summary.verdict} (rules pass/fail) to {names}"))
    for t in trackers:
        t.log_gate(summary)
    return {"summary": {"verdict": summary.verdict, "reason": summary.reason, "step": summary.step,
                        "rules": summary.rules, "ship": summary.ship},
            "written": [w for t in trackers for w in t.close()]}
