"""A CLI in a process of its own, stopped by a real signal at a known point: the child writes a marker file where
it waits (a patched step that sleeps), the test signals it there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def as_from_a_terminal() -> None:
    """``preexec_fn`` of a child that a test stops with Ctrl-C: SIGINT at its default action, as in a process started
    from a terminal's foreground. A test run started in a shell's background (``make test &``, ``nohup ... &``)
    inherits SIGINT ignored, and Python then leaves it ignored: the child would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def signal_at_marker(code: str, args: list[str], marker: Path, sig: int, cwd: Path,
                     wait_s: float = 120) -> tuple[int, str, str]:
    """Run ``python -c code *args`` (``PYTHONPATH`` the checkout ``cwd``), wait until ``marker`` exists, send ``sig``
    and wait for the exit.

    Returns:
        (exit status, stdout, stderr); a status of -N is death by signal N.

    Raises:
        AssertionError: the child ended, or ``wait_s`` passed, before it wrote the marker (its output attached).
    """
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(cwd)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + wait_s
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate(timeout=30)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err
