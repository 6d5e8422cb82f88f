"""Reading tool calls out of a model turn, in the protocol's ``tools.format``.

- ``text``: every fenced ````python`` (or ````py``) block is a call to ``python`` with ``{"code": block}``
  (program-aided style, Gao et al. 2023, PAL); a block opened and never closed is a parse error.
- ``hermes``: every ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes 2 Pro, Qwen2.5 chat
  templates); an unclosed tag or a body that is not such an object is a parse error.
- ``llama3``: the whole reply (after an optional ``<|python_tag|>``) is ``{"name": ..., "parameters": {...}}``, or
  several joined by ``;`` (Llama 3.1's JSON tool calling, as in its model card and vLLM's ``llama3_json`` parser);
  a reply that starts with ``{`` but is not such an object is a parse error.
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
_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


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
    """A ToolCall from a decoded ``{"name", args_key}`` object, or what is wrong with it."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return 'a call must be a JSON object with a string "name"'
    args = obj.get(args_key, {})
    if isinstance(args, str):  # some models encode the arguments object as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return f'"{args_key}" is a string that is not JSON'
    if not isinstance(args, dict):
        return f'"{args_key}" must be a JSON object'
    return ToolCall(obj["name"], args)


def _decode(body: str, args_key: str) -> ToolCall | str:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return f"not JSON ({e.msg} at char {e.pos})"
    return _call(obj, args_key)


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


def parse_hermes(text: str) -> ParsedTurn:
    """Calls of the ``hermes`` format (``<tool_call>`` JSON bodies with ``name`` and ``arguments``)."""
    bodies = _HERMES.findall(text)
    if text.count("<tool_call>") > len(bodies):
        return ParsedTurn(error="unparsable <tool_call>: opened and never closed with </tool_call>")
    return _collect([_decode(b.strip(), "arguments") for b in bodies], "<tool_call>")


def parse_llama3(text: str) -> ParsedTurn:
    """Calls of the ``llama3`` format: the reply is one JSON call (``name``, ``parameters``) or several joined by
    ``;``."""
    body = text.strip().removeprefix("<|python_tag|>").strip()
    if not body.startswith("{"):
        return ParsedTurn()
    try:
        return _collect([_call(json.loads(body), "parameters")], "JSON tool call")
    except json.JSONDecodeError:
        pass
    parts = [p.strip() for p in body.split(";") if p.strip()]
    return _collect([_decode(p, "parameters") for p in parts], "JSON tool call")


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
