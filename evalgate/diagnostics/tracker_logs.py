"""Training logs held by experiment trackers: a W&B run's ``.wandb`` file (offline or synced: the run directory
``wandb/offline-run-*`` / ``wandb/run-*`` holds it) read with wandb's own ``wandb.sdk.internal.datastore``, and an
MLflow run (``runs:/<run_id>`` on ``$MLFLOW_TRACKING_URI``) read with ``MlflowClient``. Both become the step
records every other reader yields (``log.from_records``), so the key map of docs/DIAGNOSTICS.md applies as for a
JSONL log: HF's W&B callback logs ``train/<key>`` (the prefix is stripped) against ``train/global_step``, HF's
MLflow callback logs ``<key>`` at ``step`` = the global step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput, MissingExtra
from evalgate.core.version import install_hint

MLFLOW_PREFIX = "runs:/"
"""An MLflow run given as a path: ``runs:/<run_id>`` (MLflow's own run URI form)."""
WANDB_STEP_KEYS = ("train/global_step", "global_step", "step", "_step")
"""Step keys of a W&B history row, in order: HF's callback's step metric first, W&B's own row counter last."""


def wandb_files(d: Path) -> list[Path]:
    """The ``.wandb`` run files in a W&B run directory, a ``wandb`` directory or a training run directory holding
    one (newest last)."""
    found = [*d.glob("*.wandb"), *d.glob("*run-*/run-*.wandb"), *d.glob("wandb/*run-*/run-*.wandb")]
    return sorted(set(found), key=lambda p: (p.stat().st_mtime, str(p)))


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # W&B writes NaN / Infinity as JSON's extension literals, which json.loads reads
        return None


def _wandb_rows(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """History rows of a ``.wandb`` file (``{key: value}``, nested keys joined by ``/``) and read warnings."""
    try:
        from wandb.proto import wandb_internal_pb2 as pb
        from wandb.sdk.internal import datastore
    except ImportError as e:
        raise MissingExtra(f"reading a W&B run needs wandb < 0.30 (its run-file reader): {install_hint('wandb')}") \
            from e
    ds = datastore.DataStore()
    try:
        ds.open_for_scan(str(path))
    except Exception as e:  # noqa: BLE001 - wandb raises AssertionError on a file that is not a W&B log
        raise BadInput(f"{path}: not a W&B run file ({type(e).__name__}: {e})") from e
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    while True:
        try:
            data = ds.scan_data()
        except Exception as e:  # noqa: BLE001 - a record cut mid-write: keep what came before it
            warnings.append(f"{path}: the file ends in an incomplete record ({e}); read the records before it")
            break
        if data is None:
            break
        rec = pb.Record()  # type: ignore[attr-defined]  # generated protobuf class: no stubs
        rec.ParseFromString(data)
        if rec.WhichOneof("record_type") == "history":
            rows.append({i.key or "/".join(i.nested_key): _value(i.value_json) for i in rec.history.item})
    return rows, warnings


def wandb_records(path: str | Path) -> tuple[list[dict[str, Any]], str, list[str]]:
    """Read a W&B run: a ``.wandb`` file, or a directory holding one (``wandb_files``; the newest is read).

    The step of a row is its ``train/global_step`` (HF / TRL), else ``global_step`` / ``step``, else W&B's own
    ``_step`` (then named in a warning: it counts ``log`` calls, which is the training step only when the trainer
    passed ``step=``).

    Returns:
        ``(records, source, warnings)``: one record per logged step (``step`` plus the metrics), the file read,
        and what the reader had to guess (``diagnostics.log.read_wandb`` makes them a ``TrainLog``).

    Raises:
        BadInput: no ``.wandb`` file there, or not a W&B run file.
        MissingExtra: wandb (< 0.30) is not installed.
    """
    p = Path(path)
    files = [p] if p.is_file() else wandb_files(p)
    if not files:
        raise BadInput(f"{p}: no W&B run file (run-*.wandb) found; pass the run's directory wandb/offline-run-*")
    rows, warnings = _wandb_rows(files[-1])
    own = [r for r in rows if not any(k in r for k in WANDB_STEP_KEYS[:-1]) and "_step" in r]
    if own:
        warnings.append(f"{len(own)} row(s) without train/global_step: W&B's own _step used as their step")
    records = [{"step": next(r[k] for k in WANDB_STEP_KEYS if k in r),
                **{k: v for k, v in r.items() if k not in WANDB_STEP_KEYS}}
               for r in rows if any(k in r for k in WANDB_STEP_KEYS)]
    return records, str(files[-1]), warnings


def mlflow_records(ref: str) -> tuple[list[dict[str, Any]], str, list[str]]:
    """Read an MLflow run ``runs:/<run_id>`` from ``$MLFLOW_TRACKING_URI`` (MLflow's default otherwise): every
    metric's full history (``MlflowClient.get_metric_history``), one record per step in step order.

    Returns:
        ``(records, source, warnings)``: one record per step in step order, ``ref``, and no warnings
        (``diagnostics.log.read_mlflow`` makes them a ``TrainLog``).

    Raises:
        BadInput: no such run in that store.
        MissingExtra: mlflow is not installed.
    """
    try:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise MissingExtra(f"reading an MLflow run needs mlflow: {install_hint('mlflow')}") from e
    run_id = ref[len(MLFLOW_PREFIX):].strip("/")
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    client = MlflowClient(tracking_uri=uri)
    try:
        run = client.get_run(run_id)
    except MlflowException as e:
        raise BadInput(f"{ref}: no MLflow run {run_id!r} at {uri or 'the default store'} (set MLFLOW_TRACKING_URI "
                       f"to the store the trainer logged to): {e.message}") from e
    by_step: dict[int, dict[str, Any]] = {}
    for key in sorted(run.data.metrics):
        for m in client.get_metric_history(run_id, key):
            by_step.setdefault(int(m.step), {"step": int(m.step)})[key] = float(m.value)
    return [by_step[s] for s in sorted(by_step)], ref, []
