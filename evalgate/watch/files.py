"""The files a training run directory shares between ``EvalgateCallback`` (in the trainer) and ``evalgate watch``:
the queue the callback announces saved checkpoints in, its metrics log, and the STOP file the watch writes.

Light on purpose: the callback imports it inside the training process, so it loads neither the store nor the run.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalgate.core.fileio import atomic_write

QUEUE_FILE = "evalgate-queue.jsonl"
"""``RUN_DIR/evalgate-queue.jsonl``: one ``{"step": N}`` line per checkpoint the callback saw saved, then
``{"event": "train_end"}``."""
LOG_FILE = "evalgate-log.jsonl"
"""``RUN_DIR/evalgate-log.jsonl``: the callback's copy of the trainer's logged metrics (the diagnostics read it)."""
STOP_FILE = "STOP"
"""``RUN_DIR/STOP``: written by the watch (JSON: reason, step, source, time); the callback stops training on it."""


def read_queue(run_dir: Path) -> tuple[set[int], bool]:
    """What ``EvalgateCallback`` wrote to ``run_dir/evalgate-queue.jsonl``: the steps it announced as saved, and
    whether training ended (an ``{"event": "train_end"}`` line). A half-written last line is ignored until it is
    complete."""
    q = run_dir / QUEUE_FILE
    steps: set[int] = set()
    ended = False
    if not q.is_file():
        return steps, ended
    for line in q.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            rec = json.loads(line)
            if rec.get("event") == "train_end":
                ended = True
            else:
                steps.add(int(rec["step"]))
    return steps, ended


def write_stop(run_dir: Path, reason: str, step: int | None, source: str) -> dict[str, Any]:
    """Write ``run_dir/STOP`` (JSON: reason, step, source, time) atomically; returns what was written."""
    doc = {"reason": reason, "step": step, "source": source, "time": datetime.now(UTC).isoformat(),
           "by": f"evalgate watch (pid {os.getpid()})"}
    atomic_write(run_dir / STOP_FILE, json.dumps(doc, indent=2) + "\n")
    return doc


