"""The vLLM lane's module marks: its tests run in .venv-vllm (`make test-vllm`) and are skipped, saying why, where
vLLM's engine does not import. Importing this sets a small CPU KV cache (GiB; on CPU vLLM's default reserves 90 % of
the memory), runs vLLM's engine core in the process that starts the engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``,
below) and, under pytest-xdist, gives each worker its cores for vLLM's CPU threads (``bind_worker_cores``), unless the
environment sets them."""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

import pytest

try:
    from vllm import LLM  # noqa: F401

    ENGINE_MISSING = None
except Exception as e:  # noqa: BLE001 - any failure to import the engine is a reason to skip, stated
    ENGINE_MISSING = f"{type(e).__name__}: {e}"

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
# vLLM's default starts an engine as two more spawned processes (EngineCore, then its Worker), each importing torch
# and vLLM again: about 20 of an eager engine's 32 s of CPU here (docs/BENCHMARKS.md). With 0 the engine core and
# its worker run in the process that starts the engine (vllm.envs; vLLM's InprocClient and UniProcExecutor), which
# has imported vLLM already. The samples are the same (bench/vllm_engine_start.py checks it); the test of a CLI run
# in a subprocess keeps vLLM's default, as users run it.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def bind_worker_cores(env: MutableMapping[str, str] | None = None, cores: list[int] | None = None) -> None:
    """Under pytest-xdist, gives worker k of n the k-th of n equal blocks of ``cores`` (default: the cores this
    process may use) as ``VLLM_CPU_OMP_THREADS_BIND`` in ``env`` (default ``os.environ``), which every engine the
    worker starts inherits (in process, ``vllm serve``, CLI subprocesses, data-parallel workers). Without it each
    engine binds its threads itself, and on a 2-core machine vLLM's automatic binding
    (vllm/utils/ompmultiprocessing.py: one core kept for the scheduler, the threads on the rest) puts both workers'
    engines on the same core. Nothing when not under xdist, with fewer cores than workers, or when the variable is
    set already; vLLM's GPU build ignores the variable."""
    env = os.environ if env is None else env
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    worker, count = env.get("PYTEST_XDIST_WORKER", ""), int(env.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2 or len(cores) < count or "VLLM_CPU_OMP_THREADS_BIND" in env:
        return
    per, k = len(cores) // count, int(worker[2:])
    env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, cores[k * per:(k + 1) * per]))


bind_worker_cores()


def lane_marks(*extra: Any) -> list[Any]:
    """A vLLM-lane module's ``pytestmark``: ``vllm_engine``, a 15-minute timeout (a test's own timeout mark wins),
    the ``extra`` marks, and the skip when the engine is missing. An engine starts in about 35 s on a quiet machine
    but took over 300 s (pytest-timeout's default) at load average 25-35 with the lane's two workers."""
    return [pytest.mark.vllm_engine, pytest.mark.timeout(900), *extra, pytest.mark.skipif(
        ENGINE_MISSING is not None,
        reason=f"vLLM's engine cannot be imported in this environment ({ENGINE_MISSING}); `make test` runs this file "
               "in .venv-vllm, which `make setup` installs (make setup-vllm)")]
