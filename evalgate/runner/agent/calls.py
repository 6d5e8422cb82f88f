"""Reading tool calls out of a model turn, in the protocol's ``tools.format``.

- ``text``: every fenced ````python`` (or ````py``) block is a call to ``python`` with ``{"code": block}``
  (program-aided style, Gao et al. 2023, PAL); a block opened and never closed is a parse error.
- ``hermes``: every ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes 2 Pro, Qwen2.5 chat
  templates); an unclosed tag or a body that is not such an object is a parse error. The body is read as JSON
  from the opening tag on, so a ``</tool_call>`` (or ``<tool_call>``) inside a JSON string argument is part of the
  argument, not the end of the call (vllm-project/vllm#45167: a regex up to the first ``</tool_call>`` cut it).
- ``llama3``: the whole reply (after an optional ``<|python_tag|>``) is ``{"name": ..., "parameters": {...}}``, or
  several such objects separated by ``;`` and/or white space (a newline, as models write them:
  vllm-project/vllm#49923) (Llama 3.1's JSON tool calling, as in its model card and vLLM's ``llama3_json``
  parser). A call written with ``arguments`` instead of ``parameters`` gets those arguments, as vLLM's parser reads
  it (ai-dynamo/dynamo#9536); with both keys, ``parameters``. A reply that starts with ``{`` but is not made of
  such objects is a parse error.
- ``openai``: the server's structured ``tool_calls`` (arguments as JSON text; text that is not a JSON object is a
  parse error).

A turn without calls and without a parse error is the sample's final answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```(?:python|py)[ \t]*\n")
_HERMES_OPEN, _HERMES_CLOSE = "<tool_call>", "</tool_call>"
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"\s*")
_LLAMA3_SEP = re.compile(r"[\s;]*")


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class ParsedTurn:
    """The calls of one turn, or why they could not be read (``error``; then ``calls`` is empty)."""

    calls: tuple[ToolCall, ...] = ()
    error: str | None = None

    @property
    def final(self) -> bool:
        """True when the turn is an answer: no call and nothing unparsable."""
        return not self.calls and self.error is None


def _call(obj: Any, args_key: str) -> ToolCall | str:
    """A ToolCall from a decoded ``{"name", args_key}`` object, or what is wrong with it. A llama3 call
    (``args_key`` ``parameters``) written with ``arguments`` instead gets those."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return 'a call must be a JSON object with a string "name"'
    if args_key == "parameters" and "parameters" not in obj and "arguments" in obj:
        args_key = "arguments"
    args = obj.get(args_key, {})
    if isinstance(args, str):  # some models encode the arguments object as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return f'"{args_key}" is a string that is not JSON'
    if not isinstance(args, dict):
        return f'"{args_key}" must be a JSON object'
    return ToolCall(obj["name"], args)


def _collect(parts: Sequence[ToolCall | str], what: str) -> ParsedTurn:
    errors = [p for p in parts if isinstance(p, str)]
    if errors:
        return ParsedTurn(error=f"unparsable {what}: {errors[0]}")
    return ParsedTurn(tuple(p for p in parts if isinstance(p, ToolCall)))


def parse_text(text: str) -> ParsedTurn:
    """Calls of the ``text`` format: one ``python`` call per closed fenced python block."""
    blocks = _FENCE.findall(text)
    if len(_OPEN_FENCE.findall(text)) > len(blocks):
        return ParsedTurn(error="unparsable call: a ```python block is opened and never closed with ```")
    return ParsedTurn(tuple(ToolCall("python", {"code": b}) for b in blocks))


def _hermes_call(text: str, start: int) -> tuple[ToolCall | str, int]:
    """The call whose ``<tool_call>`` ends at ``start``, read as JSON (a closing tag inside a JSON string is part
    of the string), and the index after its ``</tool_call>``; or what is wrong and where to go on (-1: the end)."""
    at = _SPACE.match(text, start).end()  # type: ignore[union-attr]
    try:
        obj, end = _DECODER.raw_decode(text, at)
    except json.JSONDecodeError as e:
        close = text.find(_HERMES_CLOSE, start)
        if close < 0:
            return "opened and never closed with </tool_call>", -1
        return f"not JSON ({e.msg} at char {e.pos - at})", close + len(_HERMES_CLOSE)
    end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if not text.startswith(_HERMES_CLOSE, end):
        if text.find(_HERMES_CLOSE, end) < 0:
            return "opened and never closed with </tool_call>", -1
        return "text after the JSON object before </tool_call>", text.find(_HERMES_CLOSE, end) + len(_HERMES_CLOSE)
    return _call(obj, "arguments"), end + len(_HERMES_CLOSE)


def parse_hermes(text: str) -> ParsedTurn:
    """Calls of the ``hermes`` format (``<tool_call>`` JSON bodies with ``name`` and ``arguments``; a
    ``</tool_call>`` inside a JSON string belongs to the string)."""
    parts: list[ToolCall | str] = []
    pos = text.find(_HERMES_OPEN)
    while pos >= 0:
        call, nxt = _hermes_call(text, pos + len(_HERMES_OPEN))
        parts.append(call)
        if nxt < 0:
            break
        pos = text.find(_HERMES_OPEN, nxt)
    return _collect(parts, "<tool_call>")


def parse_llama3(text: str) -> ParsedTurn:
    """Calls of the ``llama3`` format: the reply is one JSON call (``name``, ``parameters``, or ``arguments``) or
    several separated by ``;`` and/or white space."""
    body = text.strip().removeprefix("<|python_tag|>").strip()
    if not body.startswith("{"):
        return ParsedTurn()
    parts: list[ToolCall | str] = []
    pos = 0
    while pos < len(body):
        try:
            obj, end = _DECODER.raw_decode(body, pos)
        except json.JSONDecodeError as e:
            return _collect([f"not JSON ({e.msg} at char {e.pos})"], "JSON tool call")
        parts.append(_call(obj, "parameters"))
        pos = _LLAMA3_SEP.match(body, end).end()  # type: ignore[union-attr]
        if pos < len(body) and body[pos] != "{":
            return _collect([*parts, f"text after a call at char {pos}: {body[pos:pos + 20]!r}"], "JSON tool call")
    return _collect(parts, "JSON tool call")


def parse_openai(tool_calls: Sequence[dict[str, Any]] | None) -> ParsedTurn:
    """Calls an OpenAI-style server returned (``{"id", "name", "arguments"}``, arguments as JSON text)."""
    out: list[ToolCall | str] = []
    for tc in tool_calls or ():
        c = _call({"name": tc.get("name"), "arguments": tc.get("arguments") or "{}"}, "arguments")
        out.append(ToolCall(c.name, c.arguments, tc.get("id")) if isinstance(c, ToolCall) else c)
    return _collect(out, "tool_calls")


def parse_turn(fmt: str, text: str, tool_calls: Sequence[dict[str, Any]] | None = None) -> ParsedTurn:
    """The calls of one turn in format ``fmt`` (``text``, ``hermes``, ``llama3``, ``openai``)."""
    if fmt == "text":
        return parse_text(text)
    if fmt == "hermes":
        return parse_hermes(text)
    if fmt == "llama3":
        return parse_llama3(text)
    return parse_openai(tool_calls)
