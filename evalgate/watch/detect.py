"""What the watch sees in a run directory: its checkpoints and their states, whether a checkpoint's files are still
changing, training progress, and where the training log is. What "a complete checkpoint" is lives in
``evalgate.checkpoints.layout`` (one definition for watch, sweep and the diagnostics)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.checkpoints.layout import TRAINER_STATE, checkpoint_step, incomplete
from evalgate.watch.files import LOG_FILE

if TYPE_CHECKING:
    from evalgate.diagnostics.diagnose import Diagnosis


@dataclass
class CheckpointState:
    """One checkpoint seen by the watch.

    Attributes:
        run_dir, path, step: where it is.
        status: ``settling`` (being written or waiting out the settle time), ``ready``, ``evaluating``, ``done``,
            ``skipped`` (deleted) or ``failed`` (its evaluation raised).
        message: why it waits, was skipped or failed.
        metric: the dev metric once done; ``run_id`` the run that holds it (``resumed``: found in the store).
        last_change: wall time (epoch s) its files last changed; ``eval_started``: when its evaluation began.
    """

    run_dir: str
    path: str
    step: int
    status: str = "settling"
    message: str | None = None
    metric: float | None = None
    run_id: str | None = None
    resumed: bool = False
    last_change: float | None = None
    eval_started: float | None = None
    signature: tuple[tuple[str, int, int], ...] | None = field(default=None, repr=False)


@dataclass
class RunState:
    """One watched run directory: its checkpoints, its diagnosis and its STOP reason."""

    run_dir: str
    checkpoints: dict[int, CheckpointState] = field(default_factory=dict)
    diagnosis: Diagnosis | None = None
    log_key: tuple[str, int, int] | None = None
    stop: dict[str, Any] | None = None
    max_steps: int | None = None
    global_step: int | None = None
    finished: bool = False


def signature(ckpt: Path) -> tuple[tuple[str, int, int], ...]:
    """(relative path, size, mtime_ns) of every file under ``ckpt``, sorted: any write changes it."""
    out = []
    for root, _, files in os.walk(ckpt):
        for f in files:
            p = os.path.join(root, f)
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(p)
                out.append((os.path.relpath(p, ckpt), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))




def checkpoint_dirs(run_dir: Path) -> dict[int, Path]:
    """The ``checkpoint-N`` directories of ``run_dir`` by step (``checkpoints.layout.checkpoint_step``)."""
    return {n: run_dir / c for c in os.listdir(run_dir)
            if (n := checkpoint_step(c)) is not None and (run_dir / c).is_dir()}


def settle(cs: CheckpointState, path: Path, queued: bool, now: float, settle_s: float) -> str | None:
    """Advance a settling checkpoint: ``ready`` once it is complete (``checkpoints.layout.incomplete``) and either
    announced by the callback (``queued``) or unchanged (``signature``) for ``settle_s`` seconds; otherwise its
    ``message`` says why it waits. The signature is taken again after the completeness check: a file written between
    the two (a trainer_state.json finished while it was parsed) restarts the settle time. Returns a line worth
    telling the user (a ``trainer_state.json`` that does not parse), or None."""
    sig = signature(path)
    if sig != cs.signature:
        cs.signature, cs.last_change = sig, now
    why = incomplete(path)
    if why is not None:
        cs.message = why
        return f"{path}: {why}" if "does not parse" in why else None
    if (after := signature(path)) != sig:  # written while it was checked: what parsed is not what was unchanged
        cs.signature, cs.last_change = after, now
        cs.message = "settling (written while checked)"
        return None
    if queued or now - (cs.last_change or now) >= settle_s:
        cs.status, cs.message = "ready", "announced by EvalgateCallback" if queued else None
    else:
        cs.message = f"settling ({now - (cs.last_change or now):.0f}/{settle_s:g} s unchanged)"
    return None


def progress(rs: RunState, ckpt: Path) -> None:
    """Training progress from a complete checkpoint's ``trainer_state.json``: global_step, max_steps, and
    finished once global_step reached max_steps."""
    with contextlib.suppress(ValueError, OSError, TypeError):
        state = json.loads((ckpt / TRAINER_STATE).read_text())
        g, m = int(state.get("global_step") or 0), int(state.get("max_steps") or 0)
        if g >= (rs.global_step or 0):
            rs.global_step, rs.max_steps = g, m or rs.max_steps
        rs.finished = rs.finished or bool(m and g >= m)


def log_source(rd: Path) -> Path | None:
    """The training log the watch follows: the callback's ``evalgate-log.jsonl``, else the newest checkpoint's
    ``trainer_state.json``, else one in ``rd``; None when there is none yet."""
    if (rd / LOG_FILE).is_file():
        return rd / LOG_FILE
    for _, c in sorted(checkpoint_dirs(rd).items(), reverse=True):
        if (c / TRAINER_STATE).is_file():
            return c / TRAINER_STATE
    return rd / TRAINER_STATE if (rd / TRAINER_STATE).is_file() else None
