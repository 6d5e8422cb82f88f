"""The built-in tools (``evalgate.tools`` registers them when first asked for one)."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from evalgate.tools.base import Tool, ToolContext, ToolOutput, inside

OUTPUT_CHARS = 4000
"""Characters of a tool's output shown to the model (the start; the rest is cut with a note)."""


def _cut(text: str) -> str:
    return text if len(text) <= OUTPUT_CHARS else text[:OUTPUT_CHARS] + f"\n[... {len(text) - OUTPUT_CHARS} chars cut]"


def _python(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    from evalgate.core.sandbox import run_code

    # The sandbox keeps stderr only; printing to it shows the model its program's output and errors, in order.
    program = "import sys\nsys.stdout = sys.stderr\n" + args["code"]
    res = run_code(program, timeout_s=ctx.timeout_s, cpu_s=ctx.cpu_s, memory_mb=ctx.memory_mb,
                   network=ctx.network, output_bytes=OUTPUT_CHARS)
    if res.status == "timeout":
        return ToolOutput(False, f"{res.stderr}\nerror: timed out after {ctx.timeout_s:g} s".lstrip())
    if res.status != "passed":
        return ToolOutput(False, res.stderr or f"error: the program ended with status {res.status}")
    return ToolOutput(True, res.stderr)


def _calculator(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    import simpleeval

    try:
        return ToolOutput(True, str(simpleeval.simple_eval(args["expression"])))
    except Exception as e:  # any failure of the expression is the model's to see
        return ToolOutput(False, f"error: {type(e).__name__}: {e}")


def _path_check(args: dict[str, Any], ctx: ToolContext) -> str | None:
    return None if inside(ctx.task_dir, args.get("path")) is not None else "fs_scope"


def _write_check(args: dict[str, Any], ctx: ToolContext) -> str | None:
    return _path_check(args, ctx) or (None if ctx.fs_write else "fs_write")


def _read_file(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    path = inside(ctx.task_dir, args["path"])
    assert path is not None  # _path_check ran first
    try:
        return ToolOutput(True, _cut(path.read_text(encoding="utf-8", errors="replace")))
    except OSError as e:
        return ToolOutput(False, f"error: {e.strerror or e}: {args['path']}")


def _write_file(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    path = inside(ctx.task_dir, args["path"])
    assert path is not None
    try:
        path.write_text(args["content"], encoding="utf-8")
    except OSError as e:
        return ToolOutput(False, f"error: {e.strerror or e}: {args['path']}")
    return ToolOutput(True, f"wrote {len(args['content'])} characters to {args['path']}")


def _http_get(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    url = args["url"]
    if not url.startswith(("http://", "https://")):
        return ToolOutput(False, "error: only http:// and https:// URLs are fetched")
    try:
        with urllib.request.urlopen(url, timeout=ctx.timeout_s) as r:  # noqa: S310 - scheme checked above
            body = r.read(OUTPUT_CHARS * 4).decode("utf-8", "replace")
            return ToolOutput(True, _cut(f"HTTP {r.status}\n{body}"))
    except urllib.error.HTTPError as e:
        return ToolOutput(False, f"error: HTTP {e.code}")
    except (urllib.error.URLError, OSError, ValueError) as e:
        return ToolOutput(False, f"error: {e}")


def _string_params(**props: str) -> dict[str, Any]:
    return {"type": "object", "properties": {k: {"type": "string", "description": d} for k, d in props.items()},
            "required": list(props), "additionalProperties": False}


PYTHON = Tool("python", "Run a Python program (standard library only, no network) and return what it prints.",
              _string_params(code="Python source; print() the values you need."), _python)
CALCULATOR = Tool("calculator", "Evaluate an arithmetic expression, e.g. (3 + 4) * 2 / 7.",
                  _string_params(expression="The arithmetic expression."), _calculator)
READ_FILE = Tool("read_file", "Read a text file of the task directory.",
                 _string_params(path="Path relative to the task directory."), _read_file, _path_check)
WRITE_FILE = Tool("write_file", "Write a text file in the task directory.",
                  _string_params(path="Path relative to the task directory.", content="The file's new content."),
                  _write_file, _write_check)
HTTP_GET = Tool("http_get", "Fetch a URL with HTTP GET and return the status and the start of the body.",
                _string_params(url="An http:// or https:// URL."), _http_get,
                lambda args, ctx: None if ctx.network else "network")
