"""Import cycles among evalgate's modules, with ``tools/codeshape.py`` (every import statement, module level and
inside functions, walked with ``ast``; cycles are strongly connected components, Tarjan 1972)."""

from __future__ import annotations

import ast
import importlib.util
from types import ModuleType

from tests.conftest import REPO


def _codeshape() -> ModuleType:
    spec = importlib.util.spec_from_file_location("codeshape", REPO / "tools" / "codeshape.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_finder_sees_a_cycle() -> None:
    cs = _codeshape()
    assert cs.cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    known = {"evalgate", "evalgate.a", "evalgate.b"}
    tree = ast.parse("def f():\n    from evalgate import a\n")
    assert cs.imports(tree, "evalgate.b", False, known) >= {"evalgate.a"}


def test_gate_and_report_are_in_no_cycle() -> None:
    cs = _codeshape()
    files = sorted(cs.PKG.rglob("*.py"))
    known = {cs.module_name(f) for f in files}
    graph = {cs.module_name(f): cs.imports(ast.parse(f.read_text()), cs.module_name(f), f.name == "__init__.py",
                                           known) for f in files}
    bad = [c for c in cs.cycles(graph) if any(m.startswith("evalgate.gate",) for m in c)]
    assert bad == []
