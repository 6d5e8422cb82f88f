"""Prompt rendering: the protocol's jinja2 templates plus the model's chat template.

evalgate renders every prompt itself, for every backend, so the text an engine sees is the same whether it is
transformers, vLLM or a server, and it is recorded (hash plus one stored copy) with the run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import jinja2

from evalgate.errors import BadInput
from evalgate.protocol import LoadedProtocol

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


@dataclass(frozen=True)
class RenderedPrompt:
    """One rendered prompt.

    Attributes:
        item_id: the split item's id.
        text: full prompt text sent to the engine (chat template applied, response prefix appended).
        response_prefix: the rendered start of the assistant turn ("" if none); scorers prepend it to completions.
        sha256: hex sha256 of ``text``.
        system_merged: True when the system prompt was merged into the first user turn.
    """

    item_id: str
    text: str
    response_prefix: str
    sha256: str
    system_merged: bool = False


def _render(source: str, item: dict[str, Any], what: str) -> str:
    try:
        return _ENV.from_string(source).render(**item)
    except jinja2.UndefinedError as e:
        raise BadInput(f"{what}: {e.message} in item {item.get('id')!r}; the template uses a field the split's "
                       f"items do not have (fields: {', '.join(sorted(item))})") from e
    except jinja2.TemplateError as e:
        raise BadInput(f"{what}: jinja2 error: {e}") from e


def chat_template_source(tokenizer: Any) -> str | None:
    """The tokenizer's chat template text, or None."""
    tpl = getattr(tokenizer, "chat_template", None)
    return tpl if isinstance(tpl, str) else None


def chat_template_sha256(protocol: LoadedProtocol, tokenizer: Any) -> str | None:
    """sha256 of the chat template actually applied (the protocol's file, or the model's), None for ``none``."""
    src = protocol.chat_template
    if src == "none":
        return None
    if src == "model":
        src = chat_template_source(tokenizer) or ""
    return hashlib.sha256(src.encode()).hexdigest()


def _messages(protocol: LoadedProtocol, item: dict[str, Any]) -> list[dict[str, str]]:
    msgs: list[dict[str, str]] = []
    p = protocol.spec.prompt
    for shot in protocol.fewshot:
        if p.fewshot_target_field not in shot:
            raise BadInput(f"few-shot record lacks the target field {p.fewshot_target_field!r}: {shot}")
        msgs.append({"role": "user", "content": _render(protocol.template, shot, "prompt template (few-shot)")})
        msgs.append({"role": "assistant", "content": str(shot[p.fewshot_target_field])})
    msgs.append({"role": "user", "content": _render(protocol.template, item, "prompt template")})
    return msgs


def _apply_chat(tokenizer: Any, protocol: LoadedProtocol, msgs: list[dict[str, str]]) -> str:
    kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True}
    if protocol.chat_template != "model":
        kwargs["chat_template"] = protocol.chat_template
    elif not chat_template_source(tokenizer):
        raise BadInput("protocol asks for the model's chat template (chat_template: model) but the checkpoint's "
                       "tokenizer has none; set chat_template: none or give a template file")
    return tokenizer.apply_chat_template(msgs, **kwargs)


def render_prompt(protocol: LoadedProtocol, item: dict[str, Any], tokenizer: Any | None) -> RenderedPrompt:
    """Render one item.

    With ``chat_template: none`` the text is the system prompt (if any, followed by a blank line), the few-shot
    exemplars and the user turn, joined by blank lines. Otherwise the chat template is applied with
    ``add_generation_prompt=True``. A system prompt that the chat template rejects (raises) or drops (its text is
    absent from the output) is merged into the first user turn, or fails the run, as ``prompt.system_role`` says.

    Raises:
        BadInput: template error, missing field, system role refused under ``system_role: fail``.
    """
    p = protocol.spec.prompt
    msgs = _messages(protocol, item)
    merged = False
    if protocol.chat_template == "none":
        parts = [p.system_prompt] if p.system_prompt else []
        for m in msgs:
            parts.append(m["content"])
        text = "\n\n".join(parts)
    else:
        if tokenizer is None:
            raise BadInput("this protocol applies a chat template, which needs the checkpoint's tokenizer")
        if p.system_prompt:
            text = None
            try:
                text = _apply_chat(tokenizer, protocol, [{"role": "system", "content": p.system_prompt}, *msgs])
            except BadInput:
                raise
            except Exception as e:  # jinja2 raise_exception in the template: system role not supported
                reason = f"the chat template rejects a system role ({e})"
            else:
                reason = "the chat template drops the system prompt"
            if text is None or p.system_prompt not in text:
                if p.system_role == "fail":
                    raise BadInput(f"{reason}; the protocol says system_role: fail. Use system_role: merge to "
                                   "prepend the system text to the first user turn, or remove system_prompt")
                msgs[0] = {"role": "user", "content": f"{p.system_prompt}\n\n{msgs[0]['content']}"}
                merged = True
                text = _apply_chat(tokenizer, protocol, msgs)
        else:
            text = _apply_chat(tokenizer, protocol, msgs)
    prefix = _render(p.response_prefix, item, "response_prefix") if p.response_prefix else ""
    text = text + prefix
    return RenderedPrompt(str(item["id"]), text, prefix, hashlib.sha256(text.encode()).hexdigest(), merged)
