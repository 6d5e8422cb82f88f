"""``evalgate sweep``: many checkpoints x splits under one protocol, locally or on a Ray cluster, into one store.

A sweep finds checkpoints (``discover``), plans one unit per (checkpoint, split) and skips those already complete
in the store (``units``), and runs the rest (``run``): in this process one after another (``local``), or with
``ray`` as Ray actors (``ray_cluster``, imported only then; a Ray worker process imports only ``worker``). Each unit
is an ordinary run (``evalgate.runner.evaluate``'s stages), so its record, samples, generation cache rows and
access-log read are those of ``evalgate run``. This package imports its modules lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalgate.core import lazy

if TYPE_CHECKING:
    from evalgate.sweep.discover import discover_checkpoints
    from evalgate.sweep.run import SweepOptions, SweepSummary, run_sweep, sweep
    from evalgate.sweep.units import Unit, UnitSummary

_WHERE = {  # name -> the submodule that defines it
    "SweepOptions": "run", "SweepSummary": "run", "run_sweep": "run", "sweep": "run", "Unit": "units",
    "UnitSummary": "units", "discover_checkpoints": "discover",
}

__all__ = ["SweepOptions", "SweepSummary", "Unit", "UnitSummary", "discover_checkpoints", "run_sweep", "sweep"]


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _WHERE, name, globals())
