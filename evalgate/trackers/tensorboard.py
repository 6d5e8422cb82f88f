"""TensorBoard: event files written with the ``tensorboard`` package's own ``EventFileWriter`` and protos (no
TensorFlow, no torch), one log directory per training run + seed: ``DIR/tensorboard/<train_run>/seed-<seed>``.

Scalars are ``eval/<split>/<metric>`` at the checkpoint's training step; pointing ``tensorboard --logdir`` at a
directory holding both these and the trainer's own event files (HF writes ``runs/<date>``) shows the eval curve on
the training curves' step axis. A gate goes to ``DIR/tensorboard/gate/<name>``: ``gate/passed`` and
``gate/rule/<rule>`` (1 pass, 0 fail), the verdict as Markdown text (``gate/verdict``), its report files copied
into ``artifacts/``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from evalgate.core.errors import MissingExtra
from evalgate.core.version import install_hint
from evalgate.trackers.base import EvalPoint, GateSummary, RunKey, TrackerConfig, safe_name


def _modules() -> tuple[Any, Any, Any, Any]:
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        raise MissingExtra(f"--report-to tensorboard needs the tensorboard package: {install_hint('tensorboard')}") \
            from e
    return event_pb2, summary_pb2, tensor_pb2, EventFileWriter


class TensorBoardTracker:
    """Writes event files under ``config.dir / "tensorboard"``.

    Raises:
        MissingExtra: the ``tensorboard`` package is not installed (``evalgate[tensorboard]``).
    """

    name = "tensorboard"

    def __init__(self, config: TrackerConfig):
        self._pb = _modules()
        self.root = Path(config.dir) / "tensorboard"
        self._writers: dict[Path, Any] = {}

    def _writer(self, logdir: Path) -> Any:
        if logdir not in self._writers:
            logdir.mkdir(parents=True, exist_ok=True)
            self._writers[logdir] = self._pb[3](str(logdir), filename_suffix=".evalgate")
        return self._writers[logdir]

    def logdir(self, key: RunKey) -> Path:
        """``<root>/<train_run>/seed-<seed>``."""
        return self.root / safe_name(key.train_run) / f"seed-{'none' if key.train_seed is None else key.train_seed}"

    def _scalars(self, logdir: Path, step: int, values: dict[str, float]) -> None:
        event_pb2, summary_pb2, _, _ = self._pb
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v)
                                             for t, v in values.items()])
        self._writer(logdir).add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def _text(self, logdir: Path, step: int, tag: str, text: str) -> None:
        event_pb2, summary_pb2, tensor_pb2, _ = self._pb
        from tensorboard.compat.proto import tensor_shape_pb2, types_pb2
        from tensorboard.plugins.text import metadata

        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text.encode("utf-8")],
                                        tensor_shape=tensor_shape_pb2.TensorShapeProto())
        meta = metadata.create_summary_metadata(display_name=tag, description="")
        value = summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=meta)
        self._writer(logdir).add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                                       summary=summary_pb2.Summary(value=[value])))

    def log_eval(self, point: EvalPoint) -> None:
        """Scalars ``eval/<split>/<metric>`` at ``point.step`` in the training run + seed's log directory."""
        self._scalars(self.logdir(point.key), point.step, point.tags())

    def log_gate(self, summary: GateSummary) -> None:
        """``gate/passed``, ``gate/rule/<rule>`` and the Markdown verdict at the gate's step."""
        logdir = self.root / "gate" / safe_name(summary.gate)
        self._scalars(logdir, summary.step, summary.scalars())
        self._text(logdir, summary.step, "gate/verdict", summary.markdown())

    def close(self) -> list[str]:
        """Flush and close every event file; returns the log directories written."""
        for w in self._writers.values():
            w.close()
        written, self._writers = [str(d) for d in self._writers], {}
        return written
