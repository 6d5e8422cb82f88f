"""Helpers for tests that start a local model server (``transformers serve`` in tests/conftest.py, ``vllm serve``
in tests/backends/test_vllm_engine.py): a free port, and waiting for the server's /health."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(proc: subprocess.Popen, port: int, log: Path, what: str, timeout_s: float, poll_s: float,
                 tail: int) -> None:
    """Return once ``http://127.0.0.1:PORT/health`` answers 200; fail the test (with the last ``tail`` characters
    of ``log``) if ``proc`` exits first or ``timeout_s`` seconds pass."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} did not come up:\n{log.read_text()[-tail:]}")
        time.sleep(poll_s)
