"""Tools a model may call during an agentic evaluation, registered by name.

A tool is a ``Tool``: its name, a description and JSON-schema parameters shown to the model, a ``check`` that
names the permission a call would break (``network``, ``fs_scope``, ``fs_write``; run before anything executes)
and a ``run`` that executes an allowed call. A tool's own failure (a traceback, a missing file, a bad expression)
is a ``ToolOutput`` with ``ok=False`` that the model sees, never an exception.

Built in: ``python`` (the code sandbox, ``evalgate.core.sandbox``), ``calculator`` (simpleeval, never ``eval``),
``read_file`` and ``write_file`` (inside the task directory only; writing needs ``tools.fs_write``), ``http_get``
(refused unless ``tools.network``), each a ``Tool`` in ``tools/builtin.py`` registered in ``TOOLS`` (the one
``evalgate.core.registry.Registry`` mechanism). A task adds its own by an entry point in the group ``evalgate.tools``
whose object is a ``Tool``; ``tools.offered[].implementation`` names it.
"""

from __future__ import annotations

from evalgate.core.errors import BadInput
from evalgate.core.registry import Registry
from evalgate.tools.base import Tool, ToolContext, ToolOutput, inside

__all__ = ["ENTRY_POINT_GROUP", "TOOLS", "Tool", "ToolContext", "ToolOutput", "get_tool", "inside", "known_tools"]

ENTRY_POINT_GROUP = "evalgate.tools"
"""Entry-point group of task-defined tools (each entry point's object is a ``Tool``)."""

TOOLS: Registry[Tool] = Registry("tool", Tool, entry_point_group=ENTRY_POINT_GROUP)
"""Tools by name: the built-ins (``tools/builtin.py``, imported on first use) and a task's through the
``evalgate.tools`` entry-point group."""

for _name in ("python", "calculator", "read_file", "write_file", "http_get"):
    TOOLS.register(_name, f"evalgate.tools.builtin:{_name.upper()}")


def known_tools() -> list[str]:
    """Names of every tool: built in and by entry point, sorted; imports none."""
    return TOOLS.names()


def get_tool(name: str) -> Tool:
    """The tool registered as ``name`` (a built-in wins over an entry point of the same name).

    Raises:
        BadInput: no such tool (the nearest and every known one), or an entry point whose object is not a ``Tool``.
    """
    if name not in TOOLS:
        raise BadInput(f"{TOOLS.unknown(name).message} (a task adds one by an entry point in the group "
                       f"{ENTRY_POINT_GROUP!r})")
    return TOOLS.require(name)
