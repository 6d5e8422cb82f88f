"""A sample's conversation as the prompt of its next turn, and the messages a turn adds in each call format."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.protocol.prompts import apply_chat, render_template_text
from evalgate.protocol.spec import LoadedProtocol


def function_schemas(protocol: LoadedProtocol) -> list[dict[str, Any]]:
    """The offered tools as OpenAI function schemas (``{"type": "function", "function": {...}}``), the form
    ``apply_chat_template(tools=...)`` and OpenAI's ``tools`` take."""
    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["parameters"]}} for t in protocol.tools]


def first_messages(protocol: LoadedProtocol, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation before the first turn: the system prompt (if any), the few-shot turns and the item's user
    turn."""
    p = protocol.spec.prompt
    msgs: list[dict[str, Any]] = [{"role": "system", "content": p.system_prompt}] if p.system_prompt else []
    for shot in protocol.fewshot:
        msgs.append({"role": "user", "content": render_template_text(protocol.template, shot)})
        msgs.append({"role": "assistant", "content": str(shot[p.fewshot_target_field])})
    msgs.append({"role": "user", "content": render_template_text(protocol.template, item)})
    return msgs


def render_conversation(protocol: LoadedProtocol, messages: Sequence[dict[str, Any]], tokenizer: Any) -> str:
    """The prompt text of the next turn.

    With ``chat_template: none`` the message contents joined by blank lines; otherwise the chat template applied
    with ``add_generation_prompt=True`` (and ``tools=`` for the native formats ``hermes`` / ``llama3``). A system
    message the template rejects is merged into the first user turn.

    Raises:
        BadInput: a chat template is needed and the checkpoint has no tokenizer or template.
    """
    if protocol.chat_template == "none":
        return "\n\n".join(str(m["content"]) for m in messages)
    if tokenizer is None:
        raise BadInput("this protocol applies a chat template, which needs the checkpoint's tokenizer")
    tools = function_schemas(protocol) if protocol.spec.tools.format in ("hermes", "llama3") else None
    msgs = [{k: v for k, v in m.items() if k != "tool_calls"} for m in messages]
    try:
        return apply_chat(tokenizer, protocol, msgs, tools)
    except BadInput:
        raise
    except Exception:  # the template rejects a system role: merge it into the first user turn
        if not msgs or msgs[0]["role"] != "system":
            raise
        merged = [{"role": "user", "content": f"{msgs[0]['content']}\n\n{msgs[1]['content']}"}, *msgs[2:]]
        return apply_chat(tokenizer, protocol, merged, tools)


def assistant_message(fmt: str, text: str, calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn as the conversation keeps it: the generated text (the native formats' call markup
    included); under ``openai`` also its structured ``tool_calls``."""
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if fmt == "openai" and calls:
        msg["tool_calls"] = [{"id": c.get("id") or f"call_{i}", "type": "function",
                              "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                             for i, c in enumerate(calls)]
    return msg


def result_message(fmt: str, call: dict[str, Any], index: int) -> dict[str, Any]:
    """A call's result as the next message: under ``text`` a user turn holding a fenced ``output`` block
    (program-aided style); otherwise a ``tool`` message."""
    if fmt == "text":
        return {"role": "user", "content": f"```output\n{call['result']}\n```"}
    msg = {"role": "tool", "name": call["name"], "content": call["result"]}
    if fmt == "openai":
        msg["tool_call_id"] = call.get("id") or f"call_{index}"
    return msg


def parse_error_message(fmt: str, error: str) -> dict[str, Any]:
    """What the model is told after an unparsable call (a user turn in every format)."""
    how = {"text": "put Python code in a ```python block",
           "hermes": 'write <tool_call>{"name": ..., "arguments": {...}}</tool_call>',
           "llama3": 'reply with {"name": ..., "parameters": {...}}',
           "openai": "send tool_calls whose arguments are a JSON object"}[fmt]
    return {"role": "user", "content": f"error: {error}; to call a tool, {how}"}
