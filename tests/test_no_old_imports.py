"""No evalgate, test, bench or tool file uses an old module path (issue 43): new code must import the new homes.

The old paths work for users for one release through ``evalgate.core.compat``; inside the repository they would hide
a file placed by the old layout (e.g. a branch rebased onto the move).
"""

from __future__ import annotations

import ast
from pathlib import Path

from evalgate.core.compat import MOVED, new_name
from tests.helpers import source

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINT_GROUPS = {"evalgate.report_writers"}  # a plugin group, named like the old module
SKIP = {ROOT / "evalgate" / "core" / "compat.py", Path(__file__).resolve(), ROOT / "tests" / "test_compat.py"}


def _old_paths_in(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    tree = source.tree(path)
    candidates: list[ast.stmt | ast.expr] = [*source.nodes(tree, ast.Import), *source.nodes(tree, ast.ImportFrom),
                                             *source.nodes(tree, ast.Constant)]
    for node in candidates:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if new_name(node.module) else [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("evalgate."):
            # "module:attr" registry entries, mock.patch targets, importlib.import_module arguments
            if node.value not in ENTRY_POINT_GROUPS:
                names = [node.value.split(":")[0]]
        found += [f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if new_name(n) is not None]
    return found


def test_no_file_uses_an_old_module_path() -> None:
    bad: list[str] = []
    for top in ("evalgate", "tests", "bench", "tools"):
        for path in source.trees(top):
            if path not in SKIP:
                bad += _old_paths_in(path)
    assert not bad, "old module paths (see evalgate/core/compat.py MOVED for the new ones):\n" + "\n".join(bad)


def test_the_scan_sees_each_form(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text('import evalgate.accesslog\nfrom evalgate import rating\nfrom evalgate.report import write_all\n'
                   'ENTRY = "evalgate.scoring.judge:JudgeScorer"\nPATCH = "evalgate.run.evaluate"\n'
                   'GROUP = "evalgate.report_writers"\nfrom evalgate.protocol import Protocol\n'
                   'import evalgate.runner.evaluate\nNEW = "evalgate.rlhf.judge:JudgeScorer"\n')
    found = [f.split(": ")[1] for f in _old_paths_in(src, tmp_path)]
    assert sorted(found) == sorted(["evalgate.accesslog", "evalgate.rating", "evalgate.report",
                                    "evalgate.scoring.judge", "evalgate.run.evaluate"])
    assert "evalgate.protocol" not in MOVED  # it became a package of the same name, which keeps its names
