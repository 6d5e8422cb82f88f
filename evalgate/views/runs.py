"""Runs as a person picks a checkpoint from them (``evalgate runs``): filtered by training run, training seed and
checkpoint, and ``--by-step`` tables (one per training run: rows steps, columns training seeds, cells the metric
± its stderr).

Only run metadata and aggregate metrics are shown (no per-item output), as ``evalgate runs`` always did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.checkpoints.identity import digest_hex
from evalgate.core.errors import BadInput
from evalgate.core.formatting import num, pm, table
from evalgate.store import RunRepo, RunRow


def select_runs(store: RunRepo, *, status: str | None = None, split: str | None = None,
                protocol_name: str | None = None, train_run: str | None = None, train_seed: int | None = None,
                checkpoint: str | None = None) -> list[RunRow]:
    """Stored runs, oldest first, matching every filter given.

    Args:
        store: the runs (a ``Store`` is one: ``Workspace.store``).
        status: complete, running, interrupted or failed.
        split: split name.
        protocol_name: protocol name (any version), or ``name@version`` (that version only), as ``runs`` prints it.
        train_run: training run name.
        train_seed: training seed.
        checkpoint: a checkpoint path (the same directory or file, however written), a path suffix such as
            ``seed-1/checkpoint-9``, or a prefix of the checkpoint's digest (at least 8 characters; ``blake3:`` may be
            left out).

    Returns:
        The runs rows (``Store.runs``: all stored fields, JSON columns decoded).
    """
    version = None
    if protocol_name is not None and "@" in protocol_name:
        protocol_name, version = protocol_name.rsplit("@", 1)
    where = {k: v for k, v in (("status", status), ("split", split), ("protocol_name", protocol_name),
                               ("protocol_version", version), ("train_run", train_run), ("train_seed", train_seed))
             if v is not None}
    rows = store.runs(**where)
    if checkpoint is not None:
        rows = [r for r in rows if _checkpoint_matches(r, checkpoint)]
    return rows


def _checkpoint_matches(run: RunRow, given: str) -> bool:
    path = run.checkpoint_path or ""
    if len(given) >= 8 and (run.checkpoint_digest.startswith(given) or digest_hex(run.checkpoint_digest)
                            .startswith(given)):
        return True
    if Path(given).exists() and Path(path).exists():
        return Path(given).resolve() == Path(path).resolve()
    return Path(path).parts[-len(Path(given).parts):] == Path(given).parts


@dataclass
class StepTable:
    """One training run's runs under one protocol on one split, by step and training seed.

    Attributes:
        train_run: the training run name.
        protocol: ``name@version``.
        split: the split.
        metric: the metric in the cells (``pass@1``, ``mean_score``, ...).
        seeds: the training seeds (columns), ascending.
        cells: step -> training seed -> (value, stderr, run_id); the latest complete run of that checkpoint.
        repeats: how many earlier complete runs of a cell's checkpoint the table does not show.
    """

    train_run: str
    protocol: str
    split: str
    metric: str
    seeds: list[int] = field(default_factory=list)
    cells: dict[int, dict[int, tuple[float, float, str]]] = field(default_factory=dict)
    repeats: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"train_run": self.train_run, "protocol": self.protocol, "split": self.split, "metric": self.metric,
                "seeds": self.seeds, "repeats": self.repeats,
                "rows": [{"step": step, "cells": {str(s): {"value": v, "stderr": se, "run_id": rid}
                                                  for s, (v, se, rid) in row.items()}}
                         for step, row in sorted(self.cells.items())]}

    def render(self) -> str:
        """The table as text: a title line, a header of seeds, one line per step; ``-`` where no run exists."""
        width = 17
        lines = [f"{self.train_run}  ({self.protocol} on {self.split}, {self.metric} ± stderr)",
                 f"{'step':>8}  " + "  ".join(f"{'seed ' + str(s):>{width}}" for s in self.seeds)]
        for step, row in sorted(self.cells.items()):
            cells = []
            for s in self.seeds:
                if s not in row:
                    cells.append(f"{'-':>{width}}")
                    continue
                v, se, _ = row[s]
                cells.append(f"{pm(v, se):>{width}}")
            lines.append(f"{step:>8}  " + "  ".join(cells))
        if self.repeats:
            lines.append(f"  ({self.repeats} earlier run(s) of the same checkpoints not shown: each cell is the "
                         "checkpoint's latest complete run)")
        return "\n".join(lines)


def by_step(runs: list[RunRow], metric: str = "pass@1") -> list[StepTable]:
    """One table per (training run, protocol, split) over the complete runs that have a training run, training
    seed and step; a checkpoint evaluated more than once shows its latest run.

    Args:
        runs: runs rows, oldest first (``select_runs``).
        metric: the metric shown; its stderr is ``<metric>_stderr`` (NaN when the run has none).

    Returns:
        Tables ordered by training run, protocol and split.

    Raises:
        BadInput: no run in ``runs`` has ``metric`` (the message lists the metrics they have).
    """
    tables: dict[tuple[str, str, str], StepTable] = {}
    seen_metrics: set[str] = set()
    for r in runs:
        m: Mapping[str, Any] = r.metrics or {}
        seen_metrics.update(k for k in m if not k.endswith("_stderr"))
        if r.status != "complete" or r.train_run is None or r.train_seed is None or r.step is None \
                or metric not in m:
            continue
        ref = f"{r.protocol_name}@{r.protocol_version}"
        t = tables.setdefault((r.train_run, ref, r.split), StepTable(r.train_run, ref, r.split, metric))
        row = t.cells.setdefault(r.step, {})
        t.repeats += r.train_seed in row
        row[r.train_seed] = (float(m[metric]), float(m.get(f"{metric}_stderr", math.nan)), r.run_id)
    if runs and not tables and metric not in seen_metrics:
        raise BadInput(f"no run has metric {metric!r}; the runs have: {', '.join(sorted(seen_metrics)) or 'none'}")
    for t in tables.values():
        t.seeds = sorted({s for row in t.cells.values() for s in row})
    return [tables[k] for k in sorted(tables)]


def runs_by_id(run_ids: list[str], store: RunRepo) -> list[RunRow]:
    """The stored runs ``run_ids`` in ``store``, in that order (``Store.runs`` rows; an unknown id is left out)."""
    return [r for rid in run_ids for r in store.runs(run_id=rid)]


def score_metrics(runs: list[RunRow]) -> list[str]:
    """The score metrics of ``runs`` a results table shows: every ``pass@k`` any of them reports, by k; else
    ``mean_score``."""
    ks = sorted({int(k[5:]) for r in runs for k in (r.metrics or {})
                 if k.startswith("pass@") and not k.endswith("_stderr") and k[5:].isdigit()})
    return [f"pass@{k}" for k in ks] or ["mean_score"]


def results_table(runs: list[RunRow], labels: list[str] | None = None) -> str:
    """Runs' scores for a person (``evalgate sweep`` and ``evalgate compare`` end with it): one line per run with
    its checkpoint (the last two parts of its path), training step and seed, split, each score metric as
    ``value ± stderr`` (``evalgate.core.formatting.pm``) and n, the items the metric averages over.

    Args:
        runs: ``Store.runs`` rows (``runs_by_id``); only aggregate metrics are shown, no per-item value.
        labels: a first column naming each run (``a`` / ``b``); default the run ids.
    """
    names = score_metrics(runs)
    header = ["run", "checkpoint", "step", "seed", "split", *(f"{m} ± stderr" for m in names), "n"]
    rows = []
    for label, r in zip(labels or [r.run_id for r in runs], runs, strict=True):
        m: Mapping[str, Any] = r.metrics or {}
        c = r.counts or {}
        ckpt = "/".join(Path(r.checkpoint_path or "?").parts[-2:])
        rows.append([label, ckpt, num(r.step), num(r.train_seed), r.split,
                     *(pm(m.get(k), m.get(f"{k}_stderr")) for k in names), num(r.items or c.get("items"))])
    return table(header, rows, right=[2, 3, *range(5, len(header))])
