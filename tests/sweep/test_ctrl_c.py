"""Ctrl-C during a Ray sweep is a flag the driver's wait checks, not an exception raised wherever the main thread is
(``ray_cluster._ctrl_c_sets``): a KeyboardInterrupt raised inside a finalizer the collector ran is reported as
ignored and lost, and the full test suite once saw the Ctrl-C test's sweep return normally. No Ray here: the wait
over plain futures, SIGINT sent to this process as a terminal sends it."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from evalgate.sweep.ray_cluster import _ctrl_c_sets, _wait_all


def test_sigint_during_the_wait_raises_once_the_wait_looks_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    release = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        t = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt), _ctrl_c_sets(stop := threading.Event()):
                futures = [pool.submit(release.wait, 30), pool.submit(os.kill, os.getpid(), signal.SIGINT)]
                _wait_all(futures, stop, poll_s=0.05)
        finally:
            release.set()
    assert stop.is_set() and time.monotonic() - t < 10  # seen at a poll, not when the 30 s unit ended
    assert signal.getsignal(signal.SIGINT) is before


def test_sigint_while_a_finalizer_runs_is_not_lost() -> None:
    """The signal lands while the main thread runs a finalizer (here: SIGINT sent from inside ``__del__``, so the
    default handler would raise in it, where Python reports it as ignored). The flag keeps it."""

    class Dropped:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, inside the finalizer

    def unit() -> None:
        time.sleep(0.3)

    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(KeyboardInterrupt), _ctrl_c_sets(stop := threading.Event()):
            futures = [pool.submit(unit)]
            Dropped()  # finalized at once (no reference kept)
            gc.collect()
            _wait_all(futures, stop, poll_s=0.05)


def test_a_finished_sweep_without_ctrl_c_returns_and_a_units_error_is_raised() -> None:
    with ThreadPoolExecutor(2) as pool:
        with _ctrl_c_sets(stop := threading.Event()):
            _wait_all([pool.submit(lambda: None), pool.submit(lambda: None)], stop, poll_s=0.05)
        bad = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError), _ctrl_c_sets(stop):
            _wait_all([bad], stop, poll_s=0.05)
