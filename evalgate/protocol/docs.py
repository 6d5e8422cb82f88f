"""The protocol file reference (``docs/PROTOCOL.md``), generated from the pydantic models in ``protocol/spec.py``,
and the scorer reference (``docs/SCORERS.md``), generated from the scorers' options models in ``scoring/base.py``
(the gate policy's, ``docs/GATE.md``, is ``gate/docs.py`` with the table writer here).

The models are the documentation: each field's docstring gives its meaning, unit and default, and this module
only lays them out as Markdown tables, one per section of the file, with each field's type, constraints and
default read from the model. ``evalgate protocol docs`` (``--scorers``, ``--gate``) prints them; a test checks that
the committed files match.
"""

from __future__ import annotations

import json
import re
import types
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from evalgate.core.registry import Registry
from evalgate.protocol import spec as protocol_module
from evalgate.protocol.spec import Protocol

DOC_PATH = "docs/PROTOCOL.md"
SCORERS_DOC_PATH = "docs/SCORERS.md"


def _md(text: str) -> str:
    """A docstring as one Markdown line: paragraphs joined, RST ``literals`` as `code`, pipes escaped."""
    text = re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split()))
    return text.replace("|", "\\|")


def _type(ann: Any) -> str:
    origin, args = get_origin(ann), get_args(ann)
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0])}s"
    if origin is dict:
        return "mapping"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return f"section [`{ann.__name__}`](#{ann.__name__.lower()})"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    return names.get(ann, str(ann))


def _constraints(field: FieldInfo) -> str:
    bounds = {annotated_types.Gt: (">", "gt"), annotated_types.Ge: (">=", "ge"),
              annotated_types.Lt: ("<", "lt"), annotated_types.Le: ("<=", "le")}
    out = []
    for m in field.metadata:
        for cls, (sym, attr) in bounds.items():
            if isinstance(m, cls):
                out.append(f"{sym} {getattr(m, attr)}")
        if isinstance(m, Registry):  # a name of a registry: its built-in names (plugins add theirs)
            out.append(f"a registered {m.kind}: {', '.join(f'`{n}`' for n in m.builtin_names())} or a plugin's")
        if getattr(m, "pattern", None):
            out.append(f"matches `{m.pattern}`".replace("|", "\\|"))  # a pipe would end the table cell
    return f" ({', '.join(out)})" if out else ""


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if isinstance(field.default, BaseModel):
        return "its section's defaults"
    return f"`{json.dumps(field.default)}`"


def _sections(model: type[BaseModel], key: str) -> list[tuple[str, type[BaseModel]]]:
    """(YAML key, model) for ``model`` and every nested section, depth first, in field order."""
    out = [(key, model)]
    for name, field in model.model_fields.items():
        ann = field.annotation
        if get_origin(ann) is list:  # a list of sections (tools.offered) is documented as its item's section
            ann = get_args(ann)[0]
        # an optional section (judge's ``baseline: JudgeBaseline | None``) is documented as its section
        for section in [ann, *get_args(ann)]:
            if isinstance(section, type) and issubclass(section, BaseModel):
                out.extend(_sections(section, name))
                break
    return out


def _checks(model: type[BaseModel]) -> list[str]:
    validators = model.__pydantic_decorators__.model_validators.values()
    return [_md(v.func.__doc__) for v in validators if v.func.__doc__]


def protocol_reference() -> str:
    """The Markdown reference of the protocol file format (the content of ``docs/PROTOCOL.md``).

    Returns:
        Markdown text: the protocol module's description, then one section per model (top level first) with a
        table of key, type (with constraints), default and meaning, then the checks made at load.
    """
    lines = [
        "# Protocol file reference",
        "",
        "<!-- Generated from the pydantic models in evalgate/protocol/spec.py by `evalgate protocol docs`;",
        f"     do not edit. Regenerate: evalgate protocol docs > {DOC_PATH} (a test checks it). -->",
        "",
    ]
    doc = (protocol_module.__doc__ or "").split("\n\n")
    lines += [_md(par) + "\n" for par in doc[1:] if par.strip()]
    lines += ["Unknown keys are errors: the message names the file, the line, the key and the nearest known "
              "key.", "", "An example: `protocols/humaneval-smoke.yaml`.", ""]
    for key, model in _sections(Protocol, ""):
        title = "Top level" if not key else f"`{key}`"
        lines += [f"## {model.__name__}", "", f"{title}: {_md(model.__doc__ or '')}", "",
                  "| key | type | default | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            kind = _type(field.annotation) + _constraints(field)
            lines.append(f"| `{name}` | {kind} | {_default(field)} | {_md(field.description or '')} |")
        checks = _checks(model)
        if checks:
            lines += ["", "Checked at load: " + " ".join(checks)]
        lines.append("")
    return "\n".join(lines)


def _fields_table(model: type[BaseModel]) -> list[str]:
    """Markdown table of a model's fields: key, type (with constraints), default, meaning."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        lines.append(f"| `{name}` | {_type(field.annotation) + _constraints(field)} | {_default(field)} | "
                     f"{_md(field.description or '')} |")
    return lines


def scorers_reference() -> str:
    """The Markdown reference of every registered scorer's ``scorer.options`` (``docs/SCORERS.md``).

    Returns:
        Markdown text: per scorer (by name), its options model's description and a table of key, type, default
        and meaning, or a line saying it takes none.
    """
    from evalgate.scoring.base import SCORERS

    lines = [
        "# Scorer options reference",
        "",
        "<!-- Generated from the scorers' options models in evalgate/scoring/base.py by",
        f"     `evalgate protocol docs --scorers`; do not edit. Regenerate: evalgate protocol docs --scorers > "
        f"{SCORERS_DOC_PATH}",
        "     (a test checks it). -->",
        "",
        "A protocol's `scorer.name` picks a scorer and `scorer.options` sets its options. The options are checked "
        "when the protocol is loaded, so `protocol freeze` refuses an unknown key (naming the file, the line and "
        "the nearest known key), a value of the wrong type (`\"no\"` is not a boolean), and a protocol the scorer "
        "cannot score (e.g. the `math` scorer with a stop sequence that can cut a number). The other sections of "
        "a protocol are in [PROTOCOL.md](PROTOCOL.md).",
        "",
    ]
    for name in sorted(SCORERS):
        model = SCORERS[name].options_model()
        lines += [f"## `{name}`", "", f"Options model `{model.__name__}`: {_md(model.__doc__ or '')}", ""]
        lines += _fields_table(model) if model.model_fields else ["Takes no options: `scorer.options` must be "
                                                                  "empty or absent."]
        lines.append("")
        for key, section in _sections(model, "")[1:]:  # nested sections (the judge's ``judge``, ``sampling``)
            lines += [f"### {section.__name__}", "", f"`scorer.options.{key}`: {_md(section.__doc__ or '')}", "",
                      *_fields_table(section), ""]
    return "\n".join(lines)

