"""What an agentic protocol needs from the backend and the chat template, checked before the split is read.

A run whose protocol cannot work with the chosen backend or checkpoint must be refused before anything is read,
logged or spent (``evalgate.runner.plan.prepare`` calls ``check_agentic_setup`` before it admits the read):

- ``tools.format: openai`` reads the server's structured ``tool_calls``, which only the ``openai`` backend (and
  ``replay``, which plays recorded ones back) returns;
- the native formats ``hermes`` and ``llama3`` show the tools through the chat template
  (``apply_chat_template(tools=...)``); a template that never reads the ``tools`` variable drops them without a
  word (SmolLM2's does), so the model would be asked to call tools it was never shown;
- every offered tool's implementation loads (an entry point that is not a ``Tool`` is refused here, not at the
  first turn);
- ``execution.isolation: strict`` holds for the ``python`` tool as for the humaneval scorer: the machine's code
  sandbox must have every layer (``sandbox.require_strict``), or the run is refused.
"""

from __future__ import annotations

from typing import Any

import jinja2
import jinja2.meta

from evalgate.core.errors import BadInput
from evalgate.protocol.spec import LoadedProtocol


def structured_call_backends() -> list[str]:
    """Backends whose entry says they return structured ``tool_calls`` (what ``tools.format: openai`` reads)."""
    from evalgate.backends.base import BACKENDS

    return [name for name in BACKENDS.names() if BACKENDS[name].structured_tool_calls]


def template_reads_tools(source: str) -> bool:
    """Whether a chat template's jinja source reads the ``tools`` variable (HF's name for the offered tools).

    Raises:
        BadInput: the source is not a valid jinja template.
    """
    try:
        ast = jinja2.Environment().parse(source)
    except jinja2.TemplateSyntaxError as e:
        raise BadInput(f"the chat template is not a valid jinja template (line {e.lineno}: {e.message})") from e
    return "tools" in jinja2.meta.find_undeclared_variables(ast)


def check_agentic_setup(protocol: LoadedProtocol, backend: str, model_dir: Any) -> None:
    """Refuse a tools section the backend or the chat template cannot carry out (see the module docstring).

    Args:
        protocol: the loaded protocol (nothing is checked when it offers no tools).
        backend: the backend's registered name.
        model_dir: the checkpoint's directory; its tokenizer is loaded only for a native format under
            ``chat_template: model``.

    Raises:
        BadInput: naming the field, the backend or template, and what to change.
    """
    tools = protocol.spec.tools
    if not tools.agentic:
        return
    from evalgate.runner.agent.permissions import ToolBox

    box = ToolBox(protocol)  # loads every offered tool's implementation and compiles its JSON Schema
    where = f"protocol {protocol.ref} ({protocol.path})"
    if protocol.spec.execution.isolation == "strict" and any(t.name == "python" for t in box.impl.values()):
        # the python tool runs the model's programs in the same sandbox as humaneval's: strict holds for it too
        from evalgate.core.sandbox import require_strict

        require_strict(tools.network, f"{protocol.path}: execution.isolation (the python tool)")
    structured = structured_call_backends()
    if tools.format == "openai" and backend not in structured:
        raise BadInput(f"{where}: tools.format: openai needs structured tool_calls, which only the "
                       f"{', '.join(structured)} backends return, not {backend}; use --backend openai, or a protocol "
                       "with tools.format text, hermes or llama3")
    if tools.format in ("hermes", "llama3") and protocol.chat_template != "none":
        if protocol.chat_template == "model":
            from evalgate.checkpoints.model import load_tokenizer
            from evalgate.protocol.prompts import chat_template_source

            source, which = chat_template_source(load_tokenizer(model_dir)) or "", f"the chat template of {model_dir}"
        else:
            source, which = protocol.chat_template, "the protocol's chat template"
        if source and not template_reads_tools(source):
            raise BadInput(f"{where}: tools.format: {tools.format} shows the tools through the chat template, but "
                           f"{which} never reads 'tools', so the model would not see them; use a chat template "
                           "that renders tools (prompt.chat_template: FILE), or tools.format: text")
