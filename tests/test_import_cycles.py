"""Import cycles and loose root modules, with ``tools/codeshape.py`` (every import statement, module level and inside
functions, walked with ``ast``; cycles are strongly connected components, Tarjan 1972): ``make lint`` runs
``codeshape.py --check``, which must find no package cycle and no loose module at the root."""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import io
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO
from tests.helpers import source


@functools.cache
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


def test_packages_collapse_to_their_top_level_name() -> None:
    cs = _codeshape()
    graph = {"evalgate": {"evalgate.core.errors"}, "evalgate.gate.reads": {"evalgate.runner.plan", "evalgate.gate"},
             "evalgate.runner.plan": {"evalgate.core.errors"}, "evalgate.core.errors": set(),
             "evalgate.cli": {"evalgate.commands.run"}, "evalgate.commands.run": {"evalgate.gate.reads"}}
    assert cs.package_graph(graph) == {"evalgate.gate": {"evalgate.runner"}, "evalgate.runner": {"evalgate.core"},
                                       "evalgate.core": set(), "evalgate.cli": {"evalgate.commands"},
                                       "evalgate.commands": {"evalgate.gate"}}


def _check(pkg: Path) -> tuple[int, str]:
    """``codeshape.py --top 1 --check`` on the package folder ``pkg``, in this process (the shared parse):
    its exit status and what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = _codeshape().main(["--top", "1", "--check"], pkg, source.tree)
    return status, out.getvalue()


def test_the_tree_has_no_package_cycle_and_no_loose_root_module() -> None:
    status, out = _check(REPO / "evalgate")
    assert status == 0, out
    assert "package import cycles (imports inside functions counted): 0" in out
    assert "loose root modules (beyond __init__.py, cli.py, workspace.py): 0" in out


def test_the_check_fails_on_an_in_function_cycle_and_a_loose_module(tmp_path: Path) -> None:
    shutil.copytree(REPO / "evalgate", tmp_path / "evalgate", ignore=shutil.ignore_patterns("__pycache__", "templates"))
    passk = tmp_path / "evalgate" / "scoring" / "passk.py"   # scoring is below the gate, which imports it
    passk.write_text(passk.read_text() + "\n\ndef _later():\n    from evalgate.gate import policy  # noqa\n")
    (tmp_path / "evalgate" / "loose.py").write_text('"""A module left at the root."""\n')
    status, out = _check(tmp_path / "evalgate")
    assert status == 1, out
    assert "package import cycles (imports inside functions counted): 1" in out
    edge = next(line for line in out.splitlines() if line.strip().startswith("evalgate.scoring -> evalgate.gate:"))
    assert "evalgate.scoring.passk -> evalgate.gate.policy" in edge
    assert "loose root modules (beyond __init__.py, cli.py, workspace.py): 1\n  evalgate/loose.py" in out


def test_the_script_reads_the_package_beside_it_and_exits_by_the_check(tmp_path: Path) -> None:
    """As ``make lint`` runs it: a script in ``tools/`` that reads ``../evalgate`` and exits 1 on a package cycle
    (a two-package tree: ``a`` imports ``b`` at module level, ``b`` imports ``a`` inside a function), 0 without."""
    shutil.copytree(REPO / "tools", tmp_path / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    files = {"__init__.py": "", "a/__init__.py": "", "a/x.py": "import evalgate.b.y\n", "b/__init__.py": "",
             "b/y.py": "def f():\n    from evalgate.a import x\n"}
    for name, text in files.items():
        (tmp_path / "evalgate" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "evalgate" / name).write_text(text)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(tmp_path / "tools" / "codeshape.py"), "--check"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)

    r = run()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "package import cycles (imports inside functions counted): 1\n  evalgate.a <-> evalgate.b" in r.stdout
    (tmp_path / "evalgate" / "b" / "y.py").write_text("def f():\n    return 1\n")
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "package import cycles (imports inside functions counted): 0" in r.stdout


def test_lazy_package_namespaces_name_real_objects_and_no_submodule() -> None:
    # a package __init__ that names its submodules' objects lazily (core/lazy.py): every name resolves to what the
    # submodule defines, and none is also a submodule's name (importing that submodule would replace the object)
    import importlib
    import pkgutil

    checked = 0
    for init in sorted((REPO / "evalgate").rglob("__init__.py")):
        pkg_name = ".".join(init.parent.relative_to(REPO).parts)
        pkg = importlib.import_module(pkg_name)
        where = getattr(pkg, "_WHERE", None)
        if where is None or "lazy.load" not in init.read_text():
            continue
        subs = {m.name for m in pkgutil.iter_modules([str(init.parent)])}
        assert not set(where) & subs, f"{pkg_name}: {sorted(set(where) & subs)} are also submodules"
        for name, mod in where.items():
            full = mod if mod.startswith("evalgate.") else f"{pkg_name}.{mod}"
            assert getattr(pkg, name) is getattr(importlib.import_module(full), name), f"{pkg_name}.{name}"
        checked += 1
    assert checked >= 5
