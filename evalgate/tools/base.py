"""The contract of a tool (``Tool``), what a call may use (``ToolContext``) and what it returns (``ToolOutput``);
light, so that plugins and the built-ins import it without the registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use, from the protocol's ``tools`` section.

    Attributes:
        task_dir: the task directory (absolute), or None when the protocol grants none.
        fs_write: whether files in ``task_dir`` may be written.
        network: whether the network may be used.
        timeout_s: wall-clock limit per call, seconds.
        cpu_s: CPU-time limit per ``python`` call, seconds.
        memory_mb: address-space limit per ``python`` call, MiB.
    """

    task_dir: Path | None = None
    fs_write: bool = False
    network: bool = False
    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024


@dataclass(frozen=True)
class ToolOutput:
    """A call's result as the model sees it: ``ok`` False for the tool's own error (its text says which)."""

    ok: bool
    text: str


@dataclass(frozen=True)
class Tool:
    """One tool.

    Attributes:
        name: registry name.
        description: what the model is told the tool does.
        parameters: JSON Schema (an ``object`` schema) of its arguments.
        run: ``run(args, ctx) -> ToolOutput``; called only for a call that passed ``check`` and the schema.
        check: ``check(args, ctx) -> violation or None``: the permission the call would break (``network``,
            ``fs_scope``, ``fs_write``); None: allowed.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], ToolOutput]
    check: Callable[[dict[str, Any], ToolContext], str | None] | None = None


def inside(task_dir: Path | None, rel: Any) -> Path | None:
    """The path ``rel`` names inside ``task_dir`` (symlinks resolved), or None when it leaves it or there is no
    task directory."""
    if task_dir is None or not isinstance(rel, str):
        return None
    root = task_dir.resolve()
    p = (root / rel).resolve()
    return p if p == root or root in p.parents else None
