"""Code that compares tier names uses the ``Tier`` enum (``evalgate.core.enums``), not bare strings: a typo there is
an ``AttributeError``, where ``tier == "privat"`` is silently false. A ``Tier`` member equals its string, so stored
rows, manifests and ``--json`` documents are unchanged.

Counted in ``evalgate/`` (by the syntax tree, not by text): a string literal that is a tier name and is an operand
of a comparison (``==``, ``!=``, ``in``, ``not in``; also an element of a tuple, list or set so compared), the value
of a keyword argument ``tier=``, a key of a dict literal in a comparison's place, or an element of a module-level
``*TIER*`` constant. Left out: the enum's own module and the manifest's parsing code (its ``Literal`` of the
names, which pydantic checks a manifest file against)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import source

ROOT = Path(__file__).resolve().parents[1] / "evalgate"
TIER_NAMES = {"smoke", "dev", "public", "private", "human-audit"}  # docs/SPLITS.md's five tiers
EXEMPT = {"core/enums.py"}


def _names(node: ast.AST) -> list[ast.Constant]:
    """The tier-name string constants ``node`` is, or holds as a tuple / list / set literal."""
    if isinstance(node, ast.Constant) and node.value in TIER_NAMES:
        return [node]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [c for e in node.elts for c in _names(e)]
    return []


def bare_tier_literals(tree: ast.Module) -> list[int]:
    """Line numbers of the tier names this module compares or passes as ``tier=`` as bare strings."""
    hits: list[ast.Constant] = []
    for compare in source.nodes(tree, ast.Compare):
        for operand in (compare.left, *compare.comparators):
            hits += _names(operand)
    hits += [c for kw in source.nodes(tree, ast.keyword) if kw.arg == "tier" for c in _names(kw.value)]
    for stmt in tree.body:  # TIERS = ("smoke", ...), SHARED_TIERS = (...)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and "TIER" in t.id for t in targets) and stmt.value is not None:
            hits += _names(stmt.value)
    return sorted(c.lineno for c in hits)


def test_the_guard_counts_what_it_says() -> None:
    src = ('TIERS = ("smoke", "dev")\nOTHER = ("private",)\n'
           'def f(m, store):\n    if m.tier == "private" or "dev" != m.tier: pass\n'
           '    if m.tier in ("public", "human-audit", "x"): pass\n'
           '    store.runs(tier="private")\n    print("dev")\n    {"dev": 1}["dev"]\n')
    # line 1: two names; line 4: two; line 5: two (not "x"); line 6: one; OTHER, print and subscripts: not counted
    assert bare_tier_literals(ast.parse(src)) == [1, 1, 4, 4, 5, 5, 6]


def test_no_bare_tier_name_is_compared_outside_the_enum() -> None:
    found = {}
    for path, tree in source.trees("evalgate").items():
        rel = path.relative_to(ROOT).as_posix()
        if rel in EXEMPT:
            continue
        lines = bare_tier_literals(tree)
        if lines:
            found[rel] = lines
    assert found == {}, f"compare tier names through evalgate.core.enums.Tier (Tier.PRIVATE, ...): {found}"
