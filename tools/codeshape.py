"""Print the shape of the evalgate package: the longest functions and the import cycles between its modules.

Usage: python tools/codeshape.py [--top N]   (run from the repository root; reads evalgate/ with ``ast`` only)

An import cycle is a strongly connected component of more than one module in the graph "module A imports module B"
(imports inside functions count too: they are cycles all the same, only deferred).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "evalgate"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(tree: ast.AST, mod: str, is_pkg: bool, known: set[str]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n and n != mod:
                out.add(n)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    files = sorted(PKG.rglob("*.py"))
    known = {module_name(f) for f in files}
    graph: dict[str, set[str]] = {}
    funcs: list[tuple[int, str]] = []
    for f in files:
        tree = ast.parse(f.read_text())
        mod = module_name(f)
        graph[mod] = imports(tree, mod, f.name == "__init__.py", known)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                funcs.append((n, f"{f.relative_to(PKG.parent)}:{node.lineno} {node.name}"))
    print(f"longest functions (lines, of {len(funcs)}):")
    for n, where in sorted(funcs, reverse=True)[: args.top]:
        print(f"  {n:4d}  {where}")
    found = cycles(graph)
    print(f"import cycles: {len(found)}")
    for c in found:
        print("  " + " <-> ".join(c))


if __name__ == "__main__":
    main()
