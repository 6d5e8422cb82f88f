"""Error messages for user-written YAML files (protocols, gate policies) validated by pydantic models: one line per
problem, ``file:line: field: what``, and for a misspelt key the nearest known key of that section."""

from __future__ import annotations

import copy
import difflib
import functools
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

NAME_AT_VERSION = r"^[^@\s]+@[^@\s]+$"
"""The pattern of a protocol reference, ``name@version`` (a gate policy's ``protocol``)."""
SIMPLE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""The pattern of a protocol's ``name`` and ``version`` and a split's name."""
_PATTERN_WORDS = {NAME_AT_VERSION: "name@version, a protocol's name and version as its file says them "
                                   "(e.g. 'addition@1')",
                  SIMPLE_NAME: "letters, digits, '.', '_' and '-', starting with a letter or digit"}
"""What a pattern asks for, in words, for the error message (pydantic's names the regular expression)."""


class FieldProblem(ValueError):
    """A cross-field check that failed; ``field`` names the key the message is about (dotted for a nested key:
    ``rules.min_improvement``), so the error can give the line of that key rather than of its enclosing section."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class _Loader(yaml.CSafeLoader):
    """PyYAML's safe loader on libyaml's parser (``CSafeLoader``: 0.28 ms a file here where the pure-Python one took
    3.2 ms, bench/yaml_parse.py), with every value that cannot be built turned into a ``ConstructorError`` at its
    node: a date-shaped scalar that is no date (``2026-13-45`` makes ``datetime.date`` raise ValueError). A string
    escape of a lone UTF-16 surrogate (``"\\ud800"``, which no UTF-8 file or database can store) is refused by
    libyaml's scanner itself, as invalid syntax at its line."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as e:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {str(getattr(node, 'value', ''))[:40]!r} ({e}); quote it to keep it as "
                "text", node.start_mark) from e


MAX_DEPTH = 64  # nesting levels of a user's file; PyYAML's composer recurses per level (seconds at a few thousand)


def _check_depth(text: str) -> None:
    """Raise ``ConstructorError`` at the first collection nested deeper than ``MAX_DEPTH``, found by PyYAML's
    event parser, which keeps its own stack and does not recurse."""
    depth = 0
    for ev in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise yaml.constructor.ConstructorError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep; flatten it",
                    ev.start_mark)  # type: ignore[arg-type]  # libyaml's Mark: the same line and column
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


_CACHED_CHARS = 1 << 16  # larger texts are parsed each time rather than kept


@functools.lru_cache(maxsize=128)
def _parse(text: str) -> Any:
    """``text`` depth-checked (``_check_depth``) and parsed with ``_Loader``, remembered by content: one command
    reads the same manifest or protocol many times (a gate reads a split's manifest for each run it considers),
    and PyYAML's pure-Python parser takes milliseconds a file. Errors are not remembered (each call raises again);
    callers get a deep copy of the result, so none sees another's changes.

    Raises:
        yaml.YAMLError: malformed YAML, a value that cannot be built, or nesting deeper than ``MAX_DEPTH``.
        RecursionError: nesting too deep for the composer before the depth check could say so.
    """
    _check_depth(text)
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def _yaml_error(path: Path, what: str, e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if isinstance(e, yaml.constructor.ConstructorError) and e.context is None:  # ours: a value, not the syntax
        return f"{where}: {what}: {problem}"
    ctx, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
    context = f" ({ctx} at line {cmark.line + 1})" if ctx and cmark else ""
    return f"{where}: {what} is not valid YAML: {problem}{context}; fix the syntax"


def load_yaml_mapping(path: Path, text: str, what: str) -> dict[str, Any]:
    """Parse a user's YAML file that must hold a mapping.

    Args:
        path: the file, as the user named it (for messages).
        text: its content.
        what: the kind of file (``protocol``, ``gate policy``).

    Raises:
        BadInput: malformed YAML, as ``file:line: <what> is not valid YAML: <problem> (<context> at line
            N); fix the syntax`` -- one line, not PyYAML's multi-line dump (a lone-surrogate escape is such a
            syntax error); a value that cannot be built (a date-shaped ``2026-13-45``), naming its line; nesting
            deeper than ``MAX_DEPTH``; or a document that is not a mapping.
    """
    from evalgate.core.errors import BadInput

    try:
        raw = copy.deepcopy(_parse(text)) if len(text) <= _CACHED_CHARS else _parse.__wrapped__(text)
    except yaml.YAMLError as e:
        raise BadInput(_yaml_error(path, what, e)) from e
    except RecursionError:
        raise BadInput(f"{path}: {what} is nested too deeply to read; flatten it") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: a {what} file must be a YAML mapping of keys to values, not "
                       f"{type(raw).__name__ if raw is not None else 'an empty document'}")
    return raw


def yaml_line(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at pydantic error location ``loc`` (deepest node that exists)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if kv[0].value == part), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _as_model(ann: Any) -> type[BaseModel] | None:
    """The model an annotation is (``Model`` or ``Model | None``), else None."""
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(ann) if a is not type(None)]
        ann = rest[0] if len(rest) == 1 else None
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _model_for(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model of the section that holds the key at ``loc`` (None where that is not a model). An int in ``loc``
    is an entry of a list of sections (a gate policy's ``proxy_protocols``, a protocol's ``tools.offered``)."""
    ann: Any = root
    for part in loc[:-1]:
        model = _as_model(ann)
        if model is not None and isinstance(part, str) and part in model.model_fields:
            ann = model.model_fields[part].annotation
        elif isinstance(part, int) and typing.get_origin(ann) in (list, tuple, Sequence):
            ann = typing.get_args(ann)[0]
        else:
            return None
    return _as_model(ann)


def format_validation_error(path: Path, text: str, err: ValidationError, root: type[BaseModel], what: str,
                            prefix: tuple[str, ...] = ()) -> str:
    """One message per problem: ``file:line: field: what (nearest known key)``; a key the section's model lists in
    its ``RENAMED`` class attribute (old name -> new) names the new key.

    Args:
        path: the file, as the user named it.
        text: its content (for the line numbers).
        err: pydantic's error from validating the parsed YAML (or the part of it at ``prefix``) with ``root``.
        root: the model validated: the file's top-level model (``Protocol``, ``GatePolicy``), or the model of the
            part at ``prefix`` (a scorer's options model at ``("scorer", "options")``).
        what: the kind of file, for the first line (``protocol``, ``gate policy``).
        prefix: where in the file the validated part sits; () for the whole file.
    """
    lines = []
    for e in err.errors():
        rel = tuple(e["loc"])
        loc = (*prefix, *rel)
        problem = (e.get("ctx") or {}).get("error")
        if isinstance(problem, FieldProblem) and (not loc or loc[-1] != problem.field):
            loc = (*loc, *problem.field.split("."))  # a dotted field (``rules.min_improvement``): its key's line
        where = ".".join(str(p) for p in loc) or "(top level)"
        line = yaml_line(text, loc)
        head = f"{path}:{line}" if line else str(path)
        msg = e["msg"].removeprefix("Value error, ")
        pattern = str((e.get("ctx") or {}).get("pattern")) if e["type"] == "string_pattern_mismatch" else ""
        if words := _PATTERN_WORDS.get(pattern):
            msg = f"{e['input']!r} is not {words}"
        if e["type"] == "extra_forbidden":
            model = _model_for(root, rel)
            known = list(model.model_fields) if model else []
            renamed = getattr(model, "RENAMED", {}).get(str(loc[-1]))
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = (f"; did you mean '{close[0]}'?" if close else
                    f"; known keys: {', '.join(known)}" if known else "; this section takes no keys")
            msg = (f"'{loc[-1]}' was renamed to '{renamed}'; rename the key" if renamed else
                   f"unknown key '{loc[-1]}'{hint}")
        lines.append(f"{head}: {where}: {msg}")
    return f"invalid {what}:\n  " + "\n  ".join(lines)
