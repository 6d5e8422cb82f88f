"""Running a sweep's units in this process, one after another: each model is loaded once for all of its splits,
and a unit is scored (in one background thread) while the next unit generates."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from evalgate.backends.base import Backend, get_backend
from evalgate.runner.evaluate import marking_stops
from evalgate.runner.generate import generate_missing
from evalgate.runner.plan import RunOptions, RunPlan
from evalgate.runner.record import start
from evalgate.store import Store
from evalgate.sweep.steps import Observed, OnStored, fail, finish_unit, prepare_unit
from evalgate.sweep.units import Board, Unit


class _ModelCache:
    """The one loaded engine: kept while the units use the same checkpoint, dropped when the next one starts."""

    def __init__(self) -> None:
        self.digest: str | None = None
        self.backend: Backend | None = None

    def get(self, plan: RunPlan) -> Backend:
        if self.digest != plan.checkpoint.digest or self.backend is None:
            self.backend = None  # free the previous model before loading the next
            self.backend = get_backend(plan.options.backend, str(plan.checkpoint.model_dir), plan.backend_options,
                                       tokenizer=plan.prompts.tokenizer)
            self.digest = plan.checkpoint.digest
        return self.backend


def run_local(units: list[Unit], protocol_path: str | Path, options: RunOptions, store: Store, board: Board,
              on_stored: OnStored | None = None) -> None:
    """Run the ``pending`` units in order in this process.

    A unit that fails (refused read, engine or scorer error) is marked ``failed`` and the sweep goes on. Ctrl-C
    marks the generating unit (and its run) ``interrupted``, lets the unit being scored finish, and re-raises.

    Raises:
        KeyboardInterrupt: Ctrl-C (after marking).
    """
    models = _ModelCache()
    scoring = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalgate-score")
    previous: Future[None] | None = None
    try:
        for unit in [u for u in units if u.status == "pending"]:
            t0 = time.perf_counter()
            try:
                plan = prepare_unit(unit, protocol_path, options, store)
                started = start(plan)
                board.refresh()
                with marking_stops(plan):
                    backend = Observed(models.get(plan), unit, board, on_stored) if plan.missing else None
                    generated = generate_missing(plan, backend)
            except KeyboardInterrupt:
                unit.status, unit.error = "interrupted", "stopped by the user (Ctrl-C)"
                raise
            except Exception as e:  # noqa: BLE001 - a unit's failure is recorded on it; the other units go on
                fail(unit, e, board)
                continue
            unit.generate_s = generated.generate_s
            if previous is not None:
                previous.result()  # one unit scored at a time, in order, while the next one generates
            previous = scoring.submit(finish_unit, unit, plan, started, generated, board, t0)
    finally:
        scoring.shutdown(wait=True)
