"""The evalgate error hierarchy.

Every error carries the process exit code the CLI uses (DESIGN.md, "CLI contract"):
0 success / gate PASS; 1 gate FAIL or protocol drift; 2 bad input or refused by policy; 3 internal or engine error.
Messages say what was wrong, where, and what to do. The CLI prints ``message`` on one line without a traceback
unless ``EVALGATE_DEBUG=1``.
"""

from __future__ import annotations


class EvalgateError(Exception):
    """Base class. ``exit_code`` is what ``evalgate`` exits with when this error reaches the CLI."""

    exit_code: int = 3

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Slurm, Kubernetes and ``kill`` send) turned into Ctrl-C's exception by the CLI
    (``evalgate.commands.handle_errors``), so every place that marks a stopped run ``interrupted`` does so for it too;
    the command then exits 143 (128 + SIGTERM)."""


class BadInput(EvalgateError):
    """A user-supplied file, flag or name is wrong (malformed YAML, unknown split, missing checkpoint). Exit 2."""

    exit_code = 2


class RefusedByPolicy(EvalgateError):
    """A split read or gate action is refused by a tier policy or budget. Exit 2."""

    exit_code = 2


class StoreLocked(BadInput):
    """The store's lock stayed held longer than this client waits for it (``EVALGATE_LOCK_TIMEOUT``). Exit 2.
    ``holders``: who held it, as far as this client can see (``[{"pid", "role" or "user", "program", "since",
    ...}]``); ``waited``: seconds waited; ``location``: the store (never a password)."""

    def __init__(self, message: str, location: str = "", waited: float = 0.0,
                 holders: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.location, self.waited, self.holders = location, waited, holders or []


class MissingExtra(BadInput):
    """An optional engine or library is not installed; the message names the pip extra. Exit 2."""


class ProtocolDrift(EvalgateError):
    """A protocol no longer matches its lock file. Exit 1. ``diff`` holds (field, locked, current) rows."""

    exit_code = 1

    def __init__(self, message: str, diff: list[tuple[str, object, object]] | None = None):
        super().__init__(message)
        self.diff = diff or []


class EngineError(EvalgateError):
    """The generation engine failed (model load, generation, server). Exit 3."""

    exit_code = 3
