"""What the CLI writes besides its result: quiet exit when stdout is closed early, no progress bars under --json."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run evalgate with stdout on a pipe whose reader is already gone, as after ``| head -1`` has read its line."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, "-m", "evalgate.cli", *args], stdout=w, stderr=subprocess.PIPE,
                              text=True, env=os.environ.copy(), cwd=REPO, timeout=300)
    finally:
        os.close(w)


@pytest.mark.parametrize("args", [["audit"], ["audit", "verify"], ["protocol", "docs"]],
                         ids=["audit", "audit-verify", "protocol-docs"])
def test_closed_stdout_exits_quietly(home, args: list[str]) -> None:
    p = run_into_closed_pipe(*args)
    assert p.stderr == ""  # no traceback, no "internal error", no "Exception ignored"
    assert p.returncode == 141  # 128 + SIGPIPE, as a shell reports `yes | head -1`; not 3 (internal error)
