"""What a tool call may do: the protocol's ``tools`` permissions, checked before anything executes.

A call is checked in this order, and the first permission it breaks is its violation: the tool is offered and
allowed (``disallowed_tool``), the sample's call budget is not spent (``call_budget``: every call attempted counts,
refused ones included), and the tool's own check (``network``, ``fs_scope``, ``fs_write``). A call that breaks none
has its arguments validated against the offered JSON Schema (``invalid_arguments``, a tool error the model sees),
then runs; a tool that raises gives an error result, never a crash.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema

from evalgate.protocol.spec import LoadedProtocol
from evalgate.runner.agent.calls import ToolCall
from evalgate.tools import Tool, ToolContext, ToolOutput, get_tool

VIOLATIONS = ("disallowed_tool", "call_budget", "network", "fs_scope", "fs_write")
"""Every violation kind, in the order a call is checked for them."""


@dataclass(frozen=True)
class CallOutcome:
    """One call as stored in a turn's ``calls``.

    Attributes:
        name, arguments, id: the call as the model made it.
        status: ``ok``, ``error`` (the tool's own failure), ``invalid_arguments`` (against the schema) or
            ``violation`` (not executed).
        violation: the permission broken (``VIOLATIONS``), or None.
        result: what the model is shown.
        wall_s: seconds the tool ran (0 when it did not run).
    """

    name: str
    arguments: dict[str, Any]
    status: str
    violation: str | None
    result: str
    wall_s: float
    id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _guarded(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    try:
        return tool.run(args, ctx)
    except Exception as e:  # a tool's failure is a result the model sees, never a crash of the run
        return ToolOutput(False, f"error: {type(e).__name__}: {e}")


class ToolBox:
    """The offered tools of a protocol with its permissions; ``execute`` checks and runs one call.

    Args:
        protocol: a loaded protocol that offers tools (``LoadedProtocol.tools``).
    """

    def __init__(self, protocol: LoadedProtocol):
        t = protocol.spec.tools
        self.spec = t
        self.offered = {d["name"]: d for d in protocol.tools}
        self.impl: dict[str, Tool] = {n: get_tool(d["implementation"]) for n, d in self.offered.items()}
        self.allowed = set(t.allowed) if t.offered else set(self.offered)
        self.validators = {n: jsonschema.Draft202012Validator(d["parameters"]) for n, d in self.offered.items()}
        self.ctx = ToolContext(protocol.task_dir, t.fs_write, t.network, t.timeout_s, t.cpu_s, t.memory_mb)

    def workspace(self) -> Path | None:
        """A sample's own copy of the task directory (a new temporary directory, ``evalgate-task-*``) when the
        protocol lets tools write there, else None (the protocol's directory is read in place, never written).

        With ``fs_write`` every sample works in a copy of its own, as an agentic benchmark gives each task a fresh
        environment: the protocol's directory (its content is in the protocol hash) is never written, and what
        one sample writes is never there for another sample, item, run or checkpoint (adversary, third pass: a
        sample wrote its answer for the next one to read, and a private item's text could be left on disk in
        clear). ``release`` removes the copy."""
        if not (self.ctx.fs_write and self.ctx.task_dir is not None):
            return None
        copy = Path(tempfile.mkdtemp(prefix="evalgate-task-")) / "task"
        shutil.copytree(self.ctx.task_dir, copy, symlinks=True)
        return copy

    @staticmethod
    def release(workspace: Path | None) -> None:
        """Remove a copy ``workspace`` made (None: nothing to remove)."""
        if workspace is not None:
            shutil.rmtree(workspace.parent, ignore_errors=True)

    def restore(self, workspace: Path | None, calls: list[dict[str, Any]]) -> None:
        """Write into ``workspace`` again what a stored turn's calls wrote there (``calls``: the turn's stored
        outcomes), so a sample resumed from stored turns finds its copy as it left it. Only calls of the built-in
        ``write_file`` that succeeded are redone; nothing when there is no copy."""
        for c in calls if workspace is not None else []:
            impl = self.impl.get(c["name"])
            if impl is not None and impl.name == "write_file" and c["status"] == "ok":
                _guarded(impl, c["arguments"], replace(self.ctx, task_dir=workspace))

    def _run(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run a tool; its exception is an error result. ``python`` and ``http_get`` enforce ``timeout_s``
        themselves (the sandbox kills the program); any other tool runs in a worker thread and a call still
        running at ``timeout_s`` gives a timeout result (Python cannot stop the thread: it is left to finish)."""
        if tool.name in ("python", "http_get"):
            return _guarded(tool, args, ctx)
        pool = ThreadPoolExecutor(max_workers=1)
        try:
            return pool.submit(_guarded, tool, args, ctx).result(timeout=ctx.timeout_s)
        except FutureTimeout:
            return ToolOutput(False, f"error: timed out after {self.ctx.timeout_s:g} s")
        finally:
            pool.shutdown(wait=False)

    def violation(self, call: ToolCall, calls_before: int, ctx: ToolContext | None = None) -> tuple[str, str] | None:
        """The first permission ``call`` breaks and the message the model gets, or None (``ctx``: the sample's,
        default the protocol's)."""
        t = self.spec
        if call.name not in self.allowed:
            return "disallowed_tool", (f"refused: tool {call.name!r} is not allowed here; allowed tools: "
                                       f"{', '.join(sorted(self.allowed)) or 'none'}")
        if calls_before >= t.max_calls:
            return "call_budget", f"refused: the budget of {t.max_calls} tool calls per sample is spent"
        check = self.impl[call.name].check
        kind = check(call.arguments, ctx or self.ctx) if check else None
        if kind is None:
            return None
        return kind, {"network": "refused: network access is not permitted",
                      "fs_scope": "refused: that path is outside the task directory",
                      "fs_write": "refused: writing files is not permitted"}.get(kind, f"refused: {kind}")

    def execute(self, call: ToolCall, calls_before: int, workspace: Path | None = None) -> CallOutcome:
        """Check ``call`` (the sample made ``calls_before`` calls before it) and run it if allowed, on the sample's
        ``workspace`` (its copy of the task directory, from ``workspace()``) when it has one."""
        ctx = self.ctx if workspace is None else replace(self.ctx, task_dir=workspace)
        found = self.violation(call, calls_before, ctx)
        if found is not None:
            return CallOutcome(call.name, call.arguments, "violation", found[0], found[1], 0.0, call.id)
        errors = sorted(self.validators[call.name].iter_errors(call.arguments), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            where = "/".join(map(str, e.path)) or "the arguments"
            return CallOutcome(call.name, call.arguments, "invalid_arguments", None,
                               f"error: invalid arguments ({where}: {e.message})", 0.0, call.id)
        t0 = time.perf_counter()
        out = self._run(self.impl[call.name], call.arguments, ctx)
        return CallOutcome(call.name, call.arguments, "ok" if out.ok else "error", None, out.text,
                           time.perf_counter() - t0, call.id)
