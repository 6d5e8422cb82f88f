"""Running a sweep's units on a Ray cluster (``evalgate sweep --ray auto|ADDRESS``); imported only with ``--ray``.

One Ray actor per unit (``num_gpus`` = the vLLM tensor-parallel size or 1 for hf on a GPU; ``num_cpus`` = 1 for CPU
backends) holds the unit's engine. The driver (this process) alone reads the split, decrypts private items, logs the
read (with the node and worker the items go to), writes the store and scores: it sends the worker rendered prompts
and sampling requests in small chunks (actor method arguments, in memory), and stores each chunk's completions as it
comes back (``ray.wait``), so a killed worker loses only its unfinished chunks and a killed driver only what was in
flight; a rerun generates only what the store lacks. A worker that dies is replaced by a new actor, which gets the
requests not yet returned (up to ``max_retries`` times per unit), and the resend is logged as a read.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalgate.backends.base import BackendOptions, GenerationRequest, GenerationResult, backend_entry
from evalgate.core.errors import BadInput, EngineError, MissingExtra
from evalgate.core.version import install_hint
from evalgate.runner.evaluate import marking_stops
from evalgate.runner.generate import generate_missing
from evalgate.runner.plan import RunOptions, RunPlan
from evalgate.runner.record import start
from evalgate.store import Store
from evalgate.sweep.steps import Observed, OnStored, fail, finish_unit, prepare_unit
from evalgate.sweep.units import Board, Unit
from evalgate.sweep.worker import GenerationWorker


def connect(address: str) -> Any:
    """The ``ray`` module, connected to the cluster at ``address`` (``auto``: the one running on this machine, as
    ``ray start --head`` leaves it); an already connected process keeps its connection.

    Raises:
        MissingExtra: Ray is not installed.
        BadInput: no cluster at ``address``.
    """
    try:
        import ray
    except ImportError as e:
        raise MissingExtra(f"--ray needs Ray ({e}): {install_hint('ray')}") from e
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as e:
            raise BadInput(f"--ray {address}: no Ray cluster there ({e}); start one with 'ray start --head' (then "
                           "--ray auto) or pass the head's address, e.g. --ray ray://head:10001") from e
    return ray


def unit_resources(options: RunOptions, backend_options: BackendOptions) -> dict[str, float]:
    """The Ray resources one unit's actor asks for: the backend entry's ``resources`` (vllm ``num_gpus`` =
    ``tensor_parallel_size``; hf on a GPU one GPU; otherwise, hf on cpu or openai, one CPU)."""
    return backend_entry(options.backend).resources(backend_options)


class Cancellation:
    """What the unit threads share: Ctrl-C's flag, the workers to kill so their waits end, and the lock that lets
    one thread at a time prepare its unit."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.preparing = threading.Lock()
        self._lock = threading.Lock()
        self._actors: dict[int, Any] = {}

    def is_set(self) -> bool:
        return self.event.is_set()

    def watch(self, backend: RayBackend, actor: Any) -> None:
        with self._lock:
            self._actors[id(backend)] = actor

    def cancel(self, ray: Any) -> None:
        """Set the flag and kill every watched worker (their units' threads then see the sweep was stopped)."""
        self.event.set()
        with self._lock:
            for actor in self._actors.values():
                ray.kill(actor)


@functools.cache
def _actor_class(ray: Any) -> Any:
    return ray.remote(GenerationWorker)


def _died(ray: Any) -> tuple[type[BaseException], ...]:
    """The errors that mean the unit's worker (or its node) is gone."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.NodeDiedError, e.ActorUnavailableError)


class RayBackend:
    """The driver's side of a unit's actor, as a ``Backend``: ``generate`` sends the requests in chunks and calls
    ``on_result`` (which stores them) for each request as its chunk returns; a dead worker is replaced and sent the
    requests it had not returned.

    Args:
        ray: the connected ``ray`` module.
        plan: the unit's run plan (its access manager logs resends).
        unit: the unit (attempts, resent, node and worker are recorded on it).
        chunk: requests per actor call (results come back per call).
        max_retries: workers that may die for this unit before it fails.
        cancelled: set by Ctrl-C; a worker killed then ends the unit as interrupted, not retried.
    """

    name = "ray"

    def __init__(self, ray: Any, plan: RunPlan, unit: Unit, chunk: int, max_retries: int,
                 cancelled: Cancellation):
        self.ray, self.plan, self.unit, self.chunk = ray, plan, unit, chunk
        self.max_retries, self.cancelled = max_retries, cancelled
        self.actor: Any = None
        self._info: dict[str, Any] = {}

    @property
    def options(self) -> BackendOptions:
        return self.plan.backend_options

    def spawn(self) -> str:
        """Start a worker for the unit (waits until Ray places it); returns the access-log detail naming it."""
        resources = unit_resources(self.plan.options, self.plan.backend_options)
        self.actor = _actor_class(self.ray).options(max_restarts=0, max_task_retries=0, **resources).remote(
            self.plan.options.backend, str(self.plan.checkpoint.model_dir), self.plan.backend_options)
        self.cancelled.watch(self, self.actor)
        self.unit.node_id, self.unit.worker_pid = self.ray.get(self.actor.where.remote())
        self.unit.attempts += 1
        return f"items sent in memory to ray node {self.unit.node_id} (worker pid {self.unit.worker_pid})"

    def close(self) -> None:
        """End the worker (its engine and the prompts it holds)."""
        if self.actor is not None:
            self.ray.kill(self.actor)
            self.actor = None

    def _respawn(self, todo: int, why: BaseException) -> None:
        """Replace a dead worker and log the resend of its unreturned items as a read.

        Raises:
            KeyboardInterrupt: the sweep was cancelled (Ctrl-C).
            EngineError: more than ``max_retries`` workers died for this unit.
        """
        if self.cancelled.is_set():
            raise KeyboardInterrupt
        if self.unit.attempts > self.max_retries:
            raise EngineError(f"{self.unit.name}: {self.unit.attempts} Ray workers died ({type(why).__name__}: "
                              f"{why}); its stored generations are kept: rerun the sweep to generate the rest")
        self.actor, self.unit.resent = None, self.unit.resent + todo
        detail = self.spawn()
        p = self.plan
        p.access.log_read(p.manifest, p.actor, p.options.purpose, cached=False, checkpoint_digest=p.checkpoint.digest,
                          protocol_hash=p.protocol.sha256, run_id=p.run_id,
                          detail=f"resent {todo} requests after a worker died: {detail}")

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        todo = {r.key: r for r in requests}
        out: list[GenerationResult] = []
        while todo:
            if self.actor is None:
                self.spawn()
            pending = list(todo.values())
            refs = {self.actor.generate.remote(pending[i:i + self.chunk]): i for i in range(0, len(pending),
                                                                                            self.chunk)}
            try:
                while refs:
                    ready, _ = self.ray.wait(list(refs), num_returns=1)
                    refs.pop(ready[0])
                    results, self._info = self.ray.get(ready[0])
                    for res in results:
                        if on_result is not None:
                            on_result(res)
                        out.append(res)
                        del todo[res.request.key]
            except _died(self.ray) as e:
                self._respawn(len(todo), e)
        return out

    def info(self) -> dict[str, Any]:
        return {**self._info, "ray_node": self.unit.node_id, "ray_attempts": self.unit.attempts}


def _run_unit(ray: Any, unit: Unit, protocol_path: str | Path, options: RunOptions, store: Store, board: Board,
              chunk: int, max_retries: int, cancelled: Cancellation, on_stored: OnStored | None) -> None:
    """One unit in a driver thread: prepare, start a worker, log the read naming it, generate through it, score."""
    t0, backend = time.perf_counter(), None
    try:
        with cancelled.preparing:  # one at a time: the store is one writer, and transformers' lazy imports race
            plan = prepare_unit(unit, protocol_path, options, store)
        if cancelled.is_set():
            raise KeyboardInterrupt
        backend = RayBackend(ray, plan, unit, chunk, max_retries, cancelled) if plan.missing else None
        started = start(plan, backend.spawn() if backend else None)
        board.refresh()
        with marking_stops(plan):
            generated = generate_missing(plan, Observed(backend, unit, board, on_stored) if backend else None)
    except Exception as e:  # noqa: BLE001 - a unit's failure is recorded on it; the other units go on
        if not cancelled.is_set():
            fail(unit, e, board)
            return
        unit.status, unit.error = "interrupted", "stopped by the user (Ctrl-C)"
        board.refresh(finished=True)
        return
    except KeyboardInterrupt:
        unit.status, unit.error = "interrupted", "stopped by the user (Ctrl-C)"
        board.refresh(finished=True)
        return
    finally:
        if backend is not None:
            backend.close()
    unit.generate_s = generated.generate_s
    finish_unit(unit, plan, started, generated, board, t0)


@contextmanager
def _ctrl_c_sets(stop: threading.Event) -> Iterator[None]:
    """Within the block, SIGINT sets ``stop`` instead of raising where the main thread happens to be (in the main
    thread only: elsewhere Python delivers no signal). Python runs a signal's handler between two bytecodes of the
    main thread, wherever they are: raised inside a finalizer that the collector ran there (a Ray object
    reference's, a DuckDB connection's), ``KeyboardInterrupt`` is reported as ignored and lost, and the sweep went
    on to the end (seen in the full test suite: the Ctrl-C test's sweep returned normally)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _wait_all(futures: list[Future[None]], stop: threading.Event, poll_s: float = 0.2) -> None:
    """Wait for every unit's future (re-raising a unit's error), checking ``stop`` every ``poll_s`` seconds.

    Raises:
        KeyboardInterrupt: ``stop`` was set (Ctrl-C), also after the last unit finished.
    """
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=poll_s, return_when=FIRST_COMPLETED)
        for f in done:
            f.result()
        if stop.is_set():
            raise KeyboardInterrupt
    if stop.is_set():
        raise KeyboardInterrupt


def run_on_ray(units: list[Unit], protocol_path: str | Path, options: RunOptions, store: Store, board: Board,
               address: str, chunk: int = 4, max_retries: int = 2, on_stored: OnStored | None = None) -> None:
    """Run the ``pending`` units on the Ray cluster at ``address``, as many at once as its resources hold.

    Ctrl-C kills the running units' workers, marks those units and their runs ``interrupted`` and re-raises.

    Raises:
        MissingExtra, BadInput: no Ray, or no cluster at ``address``.
        KeyboardInterrupt: Ctrl-C (after marking).
    """
    ray = connect(address)
    from evalgate.backends.base import check_backend

    need = unit_resources(options, check_backend(options.backend, options.backend_options))
    have = ray.cluster_resources()
    fits = min(int(have.get("CPU" if k == "num_cpus" else "GPU", 0) // v) for k, v in need.items() if v)
    pending = [u for u in units if u.status == "pending"]
    cancelled = Cancellation()
    pool = ThreadPoolExecutor(max_workers=max(1, min(fits, len(pending) or 1)), thread_name_prefix="evalgate-unit")
    futures = [pool.submit(_run_unit, ray, u, protocol_path, options, store, board, chunk, max_retries, cancelled,
                           on_stored) for u in pending]
    try:
        with _ctrl_c_sets(stop := threading.Event()):
            _wait_all(futures, stop)
    except KeyboardInterrupt:
        cancelled.cancel(ray)
        for f in futures:
            f.cancel()
        for u in pending:
            if u.status == "pending":
                u.status, u.error = "interrupted", "not started: the sweep was stopped (Ctrl-C)"
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
