"""A pytest plugin (``-p cpu_per_test_plugin``, with bench/ on PYTHONPATH) that appends, at the end of the session,
each test's CPU seconds to the file named by ``EVALGATE_BENCH_TEST_CPU`` (default ``test-cpu.txt``): the user +
system time of the pytest process and of the subprocesses it waited for (``RUSAGE_SELF`` + ``RUSAGE_CHILDREN``)
across the test's set-up, call and tear-down, with its wall seconds, largest first, then the total. CPU seconds
are what a loaded machine leaves comparable: a test's wall time there is mostly waiting for a core. Use it without
pytest-xdist (``-p no:xdist`` or no ``-n``): each worker would write its own rows."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest

_ROWS: list[tuple[float, float, str]] = []


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    cpu, wall = _cpu_s(), time.perf_counter()
    yield
    _ROWS.append((_cpu_s() - cpu, time.perf_counter() - wall, item.nodeid))


def pytest_sessionfinish(session: pytest.Session) -> None:
    with open(os.environ.get("EVALGATE_BENCH_TEST_CPU", "test-cpu.txt"), "a") as fh:
        for cpu, wall, nodeid in sorted(_ROWS, reverse=True):
            fh.write(f"{cpu:8.1f} s CPU {wall:8.1f} s wall  {nodeid}\n")
        fh.write(f"total {sum(r[0] for r in _ROWS):.1f} s CPU, {sum(r[1] for r in _ROWS):.1f} s wall\n")
