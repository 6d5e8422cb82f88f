"""Tools a model may call during an agentic evaluation, registered by name.

A tool is a ``Tool``: its name, a description and JSON-schema parameters shown to the model, a ``check`` that
names the permission a call would break (``network``, ``fs_scope``, ``fs_write``; run before anything executes)
and a ``run`` that executes an allowed call. A tool's own failure (a traceback, a missing file, a bad expression)
is a ``ToolOutput`` with ``ok=False`` that the model sees, never an exception.

Built in: ``python`` (the code sandbox, ``evalgate.sandbox``), ``calculator`` (simpleeval, never ``eval``),
``read_file`` and ``write_file`` (inside the task directory only; writing needs ``tools.fs_write``), ``http_get``
(refused unless ``tools.network``). A task adds its own by an entry point in the group ``evalgate.tools`` whose
object is a ``Tool``; ``tools.offered[].implementation`` names it.
"""

from __future__ import annotations

import difflib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.errors import BadInput

ENTRY_POINT_GROUP = "evalgate.tools"
"""Entry-point group of task-defined tools (each entry point's object is a ``Tool``)."""


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


BUILTIN: dict[str, Tool] = {}


def _register(tool: Tool) -> Tool:
    BUILTIN[tool.name] = tool
    return tool


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def known_tools() -> list[str]:
    """Names of every tool: built in and by entry point."""
    return sorted({*BUILTIN, *_entry_points()})


def get_tool(name: str) -> Tool:
    """The tool registered as ``name`` (built in first, then entry points of ``evalgate.tools``).

    Raises:
        BadInput: no such tool (lists the known ones), or an entry point whose object is not a ``Tool``.
    """
    from evalgate.tools import builtin  # noqa: F401 - registers the built-in tools

    if name in BUILTIN:
        return BUILTIN[name]
    eps = _entry_points()
    if name not in eps:
        close = difflib.get_close_matches(name, known_tools(), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise BadInput(f"unknown tool {name!r}; {hint}known tools: {', '.join(known_tools())} (a task adds one by "
                       f"an entry point in the group {ENTRY_POINT_GROUP!r})")
    tool = eps[name].load()
    if not isinstance(tool, Tool):
        raise BadInput(f"entry point {name!r} ({eps[name].value}) of group {ENTRY_POINT_GROUP!r} is a "
                       f"{type(tool).__name__}, not an evalgate.tools.Tool; make it one")
    return tool


def inside(task_dir: Path | None, rel: Any) -> Path | None:
    """The path ``rel`` names inside ``task_dir`` (symlinks resolved), or None when it leaves it or there is no
    task directory."""
    if task_dir is None or not isinstance(rel, str):
        return None
    root = task_dir.resolve()
    p = (root / rel).resolve()
    return p if p == root or root in p.parents else None
