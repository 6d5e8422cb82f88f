"""A real installed distribution for plugin tests: a ``NAME-0.1.dist-info`` with ``entry_points.txt`` and the
plugin's modules, in a directory put first on ``sys.path``, so ``importlib.metadata.entry_points`` finds it exactly
as it finds a pip-installed package (the venv's editable evalgate points at /work/main, so the project's own entry
points cannot be used for this)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


def install_dist(root: Path, monkeypatch: pytest.MonkeyPatch, name: str, modules: dict[str, str],
                 entry_points: dict[str, dict[str, str]], registries: tuple = ()) -> Path:
    """Write ``modules`` (module name -> source) and a dist-info declaring ``entry_points`` (group -> name ->
    ``module:attr``) under ``root``, put ``root`` first on ``sys.path`` (undone by ``monkeypatch``), and make each
    of ``registries`` read its entry points again (now and after the test)."""
    root.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source, encoding="utf-8")
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    lines = []
    for group, names in entry_points.items():
        lines += [f"[{group}]", *(f"{n} = {ref}" for n, ref in names.items()), ""]
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    for registry in registries:
        registry.refresh()

    def forget() -> None:
        for module in modules:
            sys.modules.pop(module, None)
        for registry in registries:
            registry.refresh()

    _FORGET.append(forget)
    return root


_FORGET: list = []


@pytest.fixture(autouse=True)
def _forget_plugins():
    """Drop the plugins' modules and registries' plugin entries after each test that installed one (runs after
    ``monkeypatch`` has put ``sys.path`` back; a test module imports this fixture to use ``install_dist``)."""
    yield
    while _FORGET:
        _FORGET.pop()()
