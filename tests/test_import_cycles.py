"""Import cycles among evalgate's modules, found by walking every import statement (module level and inside
functions) with ``ast`` and taking the strongly connected components of the import graph (Tarjan 1972).

Run ``python tests/test_import_cycles.py`` to print every cycle."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> evalgate modules it imports. ``from pkg import sub`` counts as an import of ``pkg.sub`` when that
    is a module, else of ``pkg``."""
    mods: dict[str, Path] = {}
    for f in (root / "evalgate").rglob("*.py"):
        parts = list(f.relative_to(root).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    p = pkg.split(".")
                    base = ".".join(p[:len(p) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                r = resolve(t)
                if r and r != m:
                    edges[m].add(r)
    return edges


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """Strongly connected components of more than one module, each sorted."""
    edges = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_finder_sees_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "evalgate"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from evalgate.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from evalgate import a\n")
    (pkg / "c.py").write_text("import evalgate.a\n")
    assert import_cycles(tmp_path) == [["evalgate.a", "evalgate.b"]]


def test_gate_and_report_are_in_no_cycle() -> None:
    bad = [c for c in import_cycles() if any(m.startswith(("evalgate.gate", "evalgate.report")) for m in c)]
    assert bad == []


if __name__ == "__main__":
    cycles = import_cycles(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO)
    print("\n".join(" <-> ".join(c) for c in cycles) or "no import cycles")
