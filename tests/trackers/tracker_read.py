"""Reading what the trackers wrote with each library's own reader (for the tracker tests): TensorBoard's
``EventAccumulator``, wandb's ``datastore`` over an offline run's ``.wandb`` file, MLflow's ``MlflowClient``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def tb_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of every scalar in the event files of ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def tb_texts(logdir: Path) -> dict[str, list[tuple[int, str]]]:
    """tag -> [(step, text)] of the text summaries in ``logdir``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    return {t: [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors(t)]
            for t in acc.Tags()["tensors"]}


def wandb_records(run_file: Path) -> dict[str, Any]:
    """``{"history": [{key: value}], "summary": {key: value}, "run": {id, group, name}, "files": [paths]}`` of an
    offline run's ``.wandb`` file, read with ``wandb.sdk.internal.datastore``."""
    from wandb.proto import wandb_internal_pb2 as pb
    from wandb.sdk.internal import datastore

    ds = datastore.DataStore()
    ds.open_for_scan(str(run_file))
    out: dict[str, Any] = {"history": [], "summary": {}, "run": {}, "files": []}
    while (data := ds.scan_data()) is not None:
        rec = pb.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            out["summary"].update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                   for i in rec.summary.update})
        elif kind == "run":
            out["run"] = {"id": rec.run.run_id, "group": rec.run.run_group, "name": rec.run.display_name}
        elif kind == "files":
            out["files"] += [f.path for f in rec.files.files]
    return out


def wandb_run_files(root: Path) -> dict[str, Path]:
    """display name -> the newest ``.wandb`` file of each offline run under ``root/wandb``."""
    found: dict[str, Path] = {}
    for f in sorted(root.glob("wandb/offline-run-*/run-*.wandb")):
        found[wandb_records(f)["run"]["name"]] = f
    return found
