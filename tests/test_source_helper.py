"""``tests/helpers/source.py``, the one parse the source-reading tests share: its index holds every node
``ast.walk`` finds, and its cache hands back a file's tree until the file's text changes."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.helpers import source


def _by_type(found: list[ast.AST]) -> Counter[str]:
    return Counter(type(n).__name__ for n in found)


def test_the_index_holds_what_ast_walk_finds() -> None:
    text = ("import a, b.c\nfrom .d import (e as f)\n@deco(x=1)\nclass K(Base, metaclass=M):\n"
            "    def g(self, *args, y: int = 2, **kw) -> None:\n        return [h(i) for i in range(3) if i]\n"
            "x = {'k': (1, 2)}[\"k\"] if a < b <= c else lambda: f'{x!r:>4}'\n")
    for tree in (ast.parse(text), source.tree(source.REPO / "evalgate" / "core" / "compat.py")):
        walked = list(ast.walk(tree))
        kinds = {type(n) for n in walked}
        indexed = [n for kind in kinds for n in source.nodes(tree, kind)]
        assert _by_type(indexed) == _by_type(walked)
        assert {id(n) for n in indexed} == {id(n) for n in walked}
    assert len(source.nodes(ast.parse(text), ast.Call)) == 3  # deco(x=1), h(i), range(3); nothing else is
    # a call: the lambda, the subscript and the f-string's conversion are not


def test_a_file_is_parsed_again_only_when_its_text_changes(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    first = source.tree(path)
    assert source.tree(path) is first
    copy = tmp_path / "copy.py"
    copy.write_text("x = 1\n")
    assert source.tree(copy) is first  # the same text, another path: the same tree
    path.write_text("x = 2\n")
    second = source.tree(path)
    assert second is not first and ast.literal_eval(second.body[0].value) == 2  # type: ignore[attr-defined]
    assert source.trees("tools")[source.REPO / "tools" / "codeshape.py"] is source.tree(
        source.REPO / "tools" / "codeshape.py")
