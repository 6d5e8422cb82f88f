"""The repository's Python files parsed once per test process, for the tests that read the source (old import
paths, the environment handed down, tier literals, ``StrictModel``, the one door, ``tools/codeshape.py``).

A parse is keyed by the file's text, so a copy of the tree (a test that plants a cycle in a copy) reuses the parse
of every file it did not change; the nodes are indexed by type in one walk per file. The trees are shared:
callers must not change them.

The trees hold no reference cycle, so they are kept out of the cyclic garbage collector's sight, as
``tests/conftest.py`` keeps what collection imported: parsed with the collector paused (its passes over the growing
set of kept trees cost twice the parse), then frozen (``gc.freeze``) with their index, after a collection that
leaves nothing else to freeze but what is alive (each later full collection would scan the ~600,000 nodes again,
0.9 s, and the first two young ones as much)."""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T", bound=ast.AST)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@functools.cache
def _parse(text: str) -> ast.Module:
    with _collector_paused():
        return ast.parse(text)


def tree(path: Path) -> ast.Module:
    """The syntax tree of the Python file ``path`` (read as UTF-8), parsed once per distinct text.

    Raises:
        SyntaxError: the file is not valid Python.
        OSError: the file cannot be read.
    """
    return _parse(path.read_text(encoding="utf-8"))


@functools.cache
def trees(top: str) -> dict[Path, ast.Module]:
    """Every ``*.py`` file under the repository folder ``top`` (``"evalgate"``, ``"tests"``...), sorted by path,
    with its syntax tree (its nodes indexed for :func:`nodes`)."""
    gc.collect()
    with _collector_paused():
        out = {p: tree(p) for p in sorted((REPO / top).rglob("*.py"))}
        for module in out.values():
            _index(module)
    gc.freeze()
    return out


@functools.cache
def _index(module: ast.AST) -> dict[type, list[ast.AST]]:
    out: dict[type, list[ast.AST]] = {}
    stack = [module]  # ast.walk's generators of generators take four times as long
    while stack:
        node = stack.pop()
        out.setdefault(type(node), []).append(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))
    return out


def nodes(module: ast.AST, kind: type[T]) -> list[T]:
    """The nodes of exactly the type ``kind`` in ``module`` (a tree from :func:`tree`, or a node of one), all of
    them, in no set order (sort where order matters)."""
    return _index(module).get(kind, [])  # type: ignore[return-value]


@functools.cache
def unparsed(node: ast.AST) -> str:
    """``ast.unparse(node)``, computed once per node."""
    return ast.unparse(node)
