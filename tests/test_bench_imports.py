"""Every name a ``bench/`` script imports from evalgate exists: the scripts are the source of docs/BENCHMARKS.md's
figures and are rerun to check them, yet nothing else runs them, so a renamed or removed function broke two of them
unseen (``bench/memory_store.py`` and ``bench/accesslog_append.py`` imported ``core.environment.activate`` after it
was removed)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

from tests.helpers.source import REPO, nodes, tree

pytestmark = pytest.mark.integration  # imports every module the scripts use, torch's and sklearn's among them


def _top_level_names(path: Path) -> set[str]:
    """The names a module file defines or imports at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _submodule(module: str, name: str) -> bool:
    """Whether ``module.name`` is a module (False where ``module`` is not a package)."""
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except ModuleNotFoundError:
        return False


def missing_names(module: str, names: list[str]) -> list[str]:
    """The ``names`` that ``module`` (an evalgate module) does not provide, as attributes or submodules. A module
    whose import needs a package this environment lacks (``evalgate.backends.vllm`` without vLLM) is read from its
    source instead: the names it defines or imports at its top level.

    Raises:
        ImportError: the module, or an evalgate module it imports, does not exist.
    """
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        if (e.name or "evalgate").split(".")[0] == "evalgate":
            raise
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        defined = _top_level_names(Path(spec.origin))
        return [n for n in names if n not in defined and not _submodule(module, n)]
    return [n for n in names if not hasattr(mod, n) and not _submodule(module, n)]


def test_the_missing_name_check_finds_a_removed_function_and_reads_a_module_it_cannot_import() -> None:
    assert missing_names("evalgate.core.environment", ["Environment", "activate"]) == ["activate"]
    assert missing_names("evalgate.store", ["Store", "rows"]) == []  # a class and a submodule
    with pytest.raises(ImportError):
        missing_names("evalgate.no_such_module", ["x"])
    # vLLM is not installed in the main environment: evalgate.backends.vllm is read from its source
    if importlib.util.find_spec("vllm") is None:
        assert missing_names("evalgate.backends.vllm", ["VLLMBackend", "no_such_name"]) == ["no_such_name"]


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "bench").glob("*.py")))
def test_a_bench_script_imports_only_names_evalgate_has(script: str) -> None:
    wrong = []
    for node in nodes(tree(REPO / "bench" / script), ast.ImportFrom):
        if node.level == 0 and node.module and node.module.split(".")[0] == "evalgate":
            gone = missing_names(node.module, [a.name for a in node.names])
            wrong += [f"line {node.lineno}: from {node.module} import {n}" for n in gone]
    assert not wrong, f"bench/{script} imports names evalgate does not have: {wrong}"
