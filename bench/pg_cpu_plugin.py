"""A pytest plugin for bench/store_suite_cpu.py (``-p pg_cpu_plugin``, with bench/ on PYTHONPATH): just before a
test server stops (``tests.helpers.postgres.PostgresServer.stop``), add the CPU seconds its processes used (the
postmaster's user + system time, its exited children's, and its live children's) to the file named by
``EVALGATE_BENCH_PG_CPU``, one number a line. The server is a daemon (``pg_ctl start``): the CPU time of the
pytest process's own children leaves it out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name: [state, ppid, ...]; utime, stime, cutime, cstime at 11-14."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds of the postmaster ``postmaster`` and every process it started, exited or running."""
    ticks = sum(int(x) for x in _stat(postmaster)[11:15])
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == postmaster:
                ticks += sum(int(x) for x in fields[11:15])
    return ticks / TICK


def pytest_configure(config: Any) -> None:
    from tests.helpers import postgres

    real = postgres.PostgresServer.stop

    def stop(self: Any) -> None:
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists() and (out := os.environ.get("EVALGATE_BENCH_PG_CPU")):
            with open(out, "a") as f:
                f.write(f"{server_cpu_s(int(pid_file.read_text().split()[0]))}\n")
        real(self)

    postgres.PostgresServer.stop = stop  # type: ignore[method-assign]
