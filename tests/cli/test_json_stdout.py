"""``--json`` commands write only their JSON document on stdout, whatever else the process or its children write
there (vLLM's engine core is a child process that inherits file descriptor 1 and logs to it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO

NOISY = textwrap.dedent('''
    import logging, multiprocessing as mp, os, subprocess, sys
    import click
    from evalgate.commands import dump, handle_errors

    def child():
        os.write(1, b"child log line on fd 1\\n")
        print("child print", flush=True)

    @click.command()
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--fail", is_flag=True)
    @handle_errors
    def cmd(as_json, fail):
        logging.basicConfig(stream=sys.stdout, level=logging.INFO, force=True)
        logging.getLogger("engine").info("INFO engine log line")
        print("library print")
        os.write(1, b"raw write on fd 1\\n")
        p = mp.get_context("spawn").Process(target=child)
        p.start(); p.join()
        subprocess.run([sys.executable, "-c", "print('grandchild print')"], check=True)
        if fail:
            raise RuntimeError("boom")
        dump({"ok": True})

    if __name__ == "__main__":
        cmd()
''')


pytestmark = pytest.mark.integration  # a fresh interpreter (a CLI process and its children) per check

def _run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "noisy.py"
    script.write_text(NOISY)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_json_stdout_holds_only_the_document_while_children_write_to_fd_1(tmp_path) -> None:
    r = _run(tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ok": True}
    for line in ("INFO engine log line", "library print", "raw write on fd 1", "child log line on fd 1",
                 "child print", "grandchild print"):
        assert line in r.stderr, line


def test_json_error_document_alone_on_stdout(tmp_path) -> None:
    r = _run(tmp_path, "--json", "--fail")
    assert r.returncode == 3
    assert json.loads(r.stdout) == {"error": "RuntimeError: boom", "exit_code": 3}
    assert "child print" in r.stderr


def test_without_json_stdout_is_left_alone(tmp_path) -> None:
    r = _run(tmp_path)
    assert r.returncode == 0
    assert "library print" in r.stdout and "child print" in r.stdout and '"ok": true' in r.stdout
