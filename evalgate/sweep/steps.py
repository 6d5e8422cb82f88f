"""The steps of one unit shared by the local and the Ray executors: prepare and start its run, watch its stored
generations, and score and store it (in the driver, the store's only writer)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalgate.backends.base import Backend, BackendOptions, GenerationRequest, GenerationResult
from evalgate.core.errors import EvalgateError
from evalgate.runner.evaluate import finish
from evalgate.runner.generate import Generated
from evalgate.runner.plan import RunOptions, RunPlan, prepare
from evalgate.store import Store
from evalgate.sweep.units import Board, Unit

# Called in the driver after each finished request of a unit is stored: (unit, samples stored by that request).
OnStored = Callable[[Unit, int], None]


def exit_code(e: BaseException) -> int:
    """The exit code an error stands for (``EvalgateError.exit_code``; 3 for anything else)."""
    return e.exit_code if isinstance(e, EvalgateError) else 3


def fail(unit: Unit, e: BaseException, board: Board) -> None:
    """Mark ``unit`` failed with ``e`` (its run, if any, was marked by ``run.marking_stops``)."""
    unit.status, unit.error = "failed", f"{type(e).__name__}: {e}"
    unit.exit_code = exit_code(e)
    board.refresh(finished=True)


def prepare_unit(unit: Unit, protocol_path: str | Path, options: RunOptions, store: Store) -> RunPlan:
    """``runner.plan.prepare`` for the unit's checkpoint and split (no per-sample progress bars: the sweep draws
    its own over units); marks the unit running under the new run id.

    Raises:
        BadInput, ProtocolDrift, RefusedByPolicy: as ``evaluate`` (the refusal is logged).
    """
    plan = prepare(protocol_path, unit.checkpoint, unit.split, dataclasses.replace(options, progress=False), store)
    unit.status, unit.run_id = "running", plan.run_id
    return plan


def finish_unit(unit: Unit, plan: RunPlan, started: Any, generated: Generated, board: Board, t0: float) -> None:
    """Score the unit's samples and store its complete run (``run.finish``); any error fails the unit only."""
    try:
        finish(plan, started, generated)
    except Exception as e:  # noqa: BLE001 - one unit's scorer error must not end the sweep's other units
        fail(unit, e, board)
        return
    unit.status, unit.wall_s = "done", time.perf_counter() - t0
    board.refresh(finished=True)


class Observed:
    """A backend whose finished requests are also counted on the unit and reported to ``on_stored`` (after
    ``generate_missing``'s sink stored them)."""

    name = "observed"

    def __init__(self, inner: Backend, unit: Unit, board: Board, on_stored: OnStored | None):
        self.inner, self.unit, self.board, self.on_stored = inner, unit, board, on_stored

    @property
    def options(self) -> BackendOptions:
        return self.inner.options

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        def stored(res: GenerationResult) -> None:
            if on_result is not None:
                on_result(res)
            self.unit.generated += len(res.completions)
            self.unit.tokens += sum(c.completion_tokens for c in res.completions)
            self.board.refresh()
            if self.on_stored is not None:
                self.on_stored(self.unit, len(res.completions))

        return self.inner.generate(requests, on_result=stored)

    def info(self) -> dict[str, Any]:
        return self.inner.info()
