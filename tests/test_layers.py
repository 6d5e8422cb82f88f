"""The layer contracts of docs/ARCHITECTURE.md ([tool.importlinter] in pyproject.toml) hold: the same check as
``make lint``, so a crossing fails the test suite too."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO as ROOT


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "lint-imports is not installed (the dev extra: pip install -e '.[dev]')"
    r = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert f"{len(contracts)} kept, 0 broken" in r.stdout


def test_a_crossing_is_caught(tmp_path):
    # the contract is not vacuous: a library module importing a command breaks it
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    pkg = tmp_path / "evalgate"
    shutil.copytree(ROOT / "evalgate", pkg, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    stats = pkg / "core" / "stats.py"
    stats.write_text(stats.read_text() + "\nfrom evalgate.commands import dump  # noqa\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = evalgate\n\n[importlinter:contract:c]\nname = c\ntype = forbidden\n"
        f"source_modules =\n    {cfg['contracts'][0]['source_modules'][0]}\n"
        "forbidden_modules =\n    evalgate.commands\nignore_imports =\n    evalgate.cli -> evalgate.commands\n"
        "    evalgate.cli -> evalgate.commands.*\n")
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe
    r = subprocess.run([exe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1 and "evalgate.core.stats -> evalgate.commands" in r.stdout, r.stdout[-2000:]


def test_the_layers_contract_catches_an_upward_import(tmp_path):
    # the domain layers contract as written in pyproject.toml, run on a copy where core imports the gate
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in cfg["contracts"] if c["type"] == "layers" and "containers" not in c)
    assert layers["layers"][-1] == "evalgate.core" and "evalgate.gate" in " ".join(layers["layers"])
    pkg = tmp_path / "evalgate"
    shutil.copytree(ROOT / "evalgate", pkg, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    stats = pkg / "core" / "stats.py"
    stats.write_text(stats.read_text() + "\n\ndef _f():\n    from evalgate.gate import policy  # noqa\n")
    body = "".join(f"    {layer}\n" for layer in layers["layers"])
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = evalgate\n\n[importlinter:contract:l]\nname = l\ntype = layers\n"
        f"layers =\n{body}")
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe
    r = subprocess.run([exe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1 and "evalgate.core.stats -> evalgate.gate.policy" in r.stdout, r.stdout[-2000:]
