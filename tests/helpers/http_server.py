"""A test's local HTTP server in a thread."""

from __future__ import annotations

import socketserver
import threading

SHUTDOWN_POLL_S = 0.02
"""How often the serving thread looks for ``shutdown()``: socketserver's default (0.5 s) made each test that stops
its server wait up to half a second for it."""


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Start ``server.serve_forever`` in a daemon thread that notices ``server.shutdown()`` within
    ``SHUTDOWN_POLL_S`` seconds; returns the thread (started)."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True)
    thread.start()
    return thread
