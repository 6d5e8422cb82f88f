"""``evalgate sweep``'s entry points: ``run_sweep`` (and ``sweep``) plans a sweep's units and runs them here
(``local``) or on a Ray cluster (``ray_cluster``, imported only then); ``SweepOptions`` and ``SweepSummary`` are
what it takes and returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.progress import progress_bars
from evalgate.core.results import ReadByKey
from evalgate.protocol.spec import load_protocol, verify
from evalgate.runner.plan import RunOptions
from evalgate.runner.record import ProtocolRef
from evalgate.splits.guard import SplitManager
from evalgate.store import Store
from evalgate.sweep.discover import discover_checkpoints
from evalgate.sweep.steps import OnStored
from evalgate.sweep.units import Board, UnitSummary, plan_units


@dataclass
class SweepOptions:
    """How a sweep runs, beyond protocol, checkpoints and splits.

    Attributes:
        run: the options every unit's run gets (backend, backend options, sampling seed, purpose, actor, ...);
            training run, seed and step come from each checkpoint. ``run.progress`` shows the bar over units.
        ray: None runs locally in this process; ``auto`` or a Ray address runs on that cluster.
        chunk: requests per Ray actor call (``--ray``): completions come back, and are stored, a chunk at a time.
        max_retries: Ray workers that may die for one unit before the unit fails (``--ray``).
        on_stored: called in the driver after each finished request is stored, with the unit and the number of
            samples stored (progress hooks, tests).
    """

    run: RunOptions = field(default_factory=RunOptions)
    ray: str | None = None
    chunk: int = 4
    max_retries: int = 2
    on_stored: OnStored | None = None


@dataclass(frozen=True)
class SweepSummary(ReadByKey):
    """What a sweep did (``evalgate sweep --json`` prints ``as_dict()``; read by key as that document, for one
    release, with a ``DeprecationWarning``).

    Attributes:
        protocol: the protocol's name, version and sha256 (a ``ProtocolRef``; its ``path`` unset, and absent from
            ``as_dict()``).
        splits: the split names, in the order given.
        where: ``local`` or the Ray address.
        units: each (checkpoint, split) unit's ``UnitSummary`` (``Unit.summary()``), checkpoint-major: checkpoint,
            split, status (``done``, ``skipped``, ``failed``), run_id, error, tokens, ...
        counts: units by status.
        ignored: paths the glob matched that are no checkpoint.
        tokens: new completion tokens over all units.
        wall_s: wall seconds of the sweep.
        exit_code: 0 when every unit is done or skipped; else the highest of the failed units' codes (2 refused or
            bad input, 3 engine or internal).
    """

    protocol: ProtocolRef
    splits: list[str]
    where: str
    units: list[UnitSummary]
    counts: dict[str, int]
    ignored: list[Any]
    tokens: int
    wall_s: float
    exit_code: int

    @property
    def failed(self) -> list[UnitSummary]:
        """The units that failed."""
        return [u for u in self.units if u.status == "failed"]

    def as_dict(self) -> dict[str, Any]:
        """The JSON document (``evalgate sweep --json``)."""
        return {"protocol": self.protocol.model_dump(exclude_unset=True), "splits": self.splits, "where": self.where,
                "units": [u.as_dict() for u in self.units],
                "counts": self.counts, "ignored": self.ignored, "tokens": self.tokens, "wall_s": self.wall_s,
                "exit_code": self.exit_code}


def sweep(protocol_path: str | Path, checkpoints: str, splits: list[str], options: SweepOptions | None,
          store: Store) -> SweepSummary:
    """``run_sweep``: the ``SweepSummary`` (it was its ``as_dict()`` document; ``sweep(...)["units"]`` still reads
    for one release, with a ``DeprecationWarning``)."""
    return run_sweep(protocol_path, checkpoints, splits, options, store)


def run_sweep(protocol_path: str | Path, checkpoints: str, splits: list[str], options: SweepOptions | None,
              store: Store) -> SweepSummary:
    """Evaluate every checkpoint a glob matches on every split, skipping units already complete in the store.

    Args:
        protocol_path: protocol YAML (must match its ``.lock``).
        checkpoints: a glob of HF/TRL checkpoint directories and GGUF files (``discover_checkpoints``).
        splits: split names, each evaluated on every checkpoint.
        options: SweepOptions.
        store: the Store (default ``$EVALGATE_HOME/evalgate.duckdb``).

    Returns:
        The ``SweepSummary`` (``evalgate sweep --json`` prints its ``as_dict()``).

    Raises:
        BadInput, ProtocolDrift, MissingExtra: before any unit runs (bad glob, protocol, split, backend options;
            no Ray for ``ray``).
        KeyboardInterrupt: Ctrl-C; running units and their runs are marked ``interrupted`` first.
    """
    opts = options or SweepOptions()
    t0 = time.perf_counter()
    protocol = load_protocol(protocol_path)
    verify(protocol)
    if protocol.tools:
        raise BadInput(f"{protocol_path}: the protocol offers tools (an agentic, multi-turn evaluation), which "
                       "`evalgate sweep` does not run yet; evaluate each checkpoint with `evalgate run`")
    for split in splits:  # a typo'd split name is refused before any GGUF's one-time conversion (a minute on CPU)
        SplitManager(store).manifest(split)
    found, ignored = discover_checkpoints(checkpoints, store.recorded_checkpoint, store.env)
    units = plan_units(protocol, found, splits, opts.run, store)
    board = Board(units, opts.run.progress)
    # progress_bars: also the libraries' bars (model loading), off under --json
    with progress_bars(opts.run.progress):
        try:
            if opts.ray is None:
                from evalgate.sweep.local import run_local

                run_local(units, protocol_path, opts.run, store, board, opts.on_stored)
            else:
                from evalgate.sweep.ray_cluster import run_on_ray

                run_on_ray(units, protocol_path, opts.run, store, board, opts.ray, opts.chunk, opts.max_retries,
                           opts.on_stored)
        finally:
            board.close()
    statuses = [u.status for u in units]
    return SweepSummary(
        protocol=ProtocolRef(name=protocol.spec.name, version=protocol.spec.version, sha256=protocol.sha256),
        splits=list(splits), where=opts.ray or "local", units=[u.summary() for u in units],
        counts={s: statuses.count(s) for s in sorted(set(statuses))}, ignored=ignored,
        tokens=sum(u.tokens for u in units), wall_s=round(time.perf_counter() - t0, 3),
        exit_code=max((u.exit_code for u in units), default=0))

