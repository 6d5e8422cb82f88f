"""Opening a store file is attaching it to this process's one in-memory DuckDB instance
(``evalgate.store.instance``), closing it detaching it: between transactions nothing of the file stays attached, so
another process can open it, and its write-ahead log is checkpointed; a forked child, threads on two files, a file
that is not a store and memory databases each get what a new DuckDB instance gave them."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evalgate.core.errors import BadInput
from evalgate.store import Store, db, instance

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.file_only("DuckDB's ATTACH of store files (a file beside the store, read-only)")]

@pytest.mark.integration  # a fresh interpreter
def test_after_a_transaction_the_file_is_detached_checkpointed_and_open_to_another_process(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    store = Store(path)
    store.record_protocol("p", "1", "a" * 64, {"x": 1})
    assert instance.attached() == set()
    assert not Path(str(path) + ".wal").exists()  # DETACH checkpointed it, as closing a connection does
    code = ("import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
            "print(c.execute('SELECT name FROM protocols').fetchall())")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr  # DuckDB's lock on the file was released
    assert out.stdout.strip() == "[('p',)]"
    with store.session():
        store.protocol_hash("p", "1")
        assert len(instance.attached()) == 1  # held for the session, as its connection was
    assert instance.attached() == set()


def _child(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(Store(Path(path)).protocol_hash("p", "1"))


def test_a_forked_child_uses_an_instance_of_its_own(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    store.record_protocol("p", "1", "b" * 64, {})
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(str(store.path), queue))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == "b" * 64
    assert store.protocol_hash("p", "1") == "b" * 64  # the parent's instance still works


def test_threads_on_two_files_at_once_each_see_their_own(tmp_path: Path) -> None:
    stores = [Store(tmp_path / f"s{i}.duckdb") for i in range(2)]
    inside, results, errors = threading.Barrier(2), {}, []

    def work(i: int) -> None:
        try:
            with stores[i].session():
                stores[i].record_protocol("p", "1", str(i) * 64, {})
                inside.wait(10)  # both files attached at the same time
                results[i] = stores[i].protocol_hash("p", "1")
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and results == {0: "0" * 64, 1: "1" * 64}
    assert instance.attached() == set()


def test_a_file_that_is_not_a_store_is_refused_and_left_unattached(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    path.write_bytes(b"not a database " * 100)
    with pytest.raises(BadInput, match="cannot open the store"):
        Store(path)
    assert path.read_bytes() == b"not a database " * 100
    assert instance.attached() == set()


def test_memory_databases_are_not_attached_to_the_files_instance(tmp_path: Path) -> None:
    Store(tmp_path / "s.duckdb")  # the instance exists
    first, second = db.Database(":memory:"), db.Database(":memory:")
    Store(first).record_protocol("p", "1", "c" * 64, {})
    assert Store(second).protocol_hash("p", "1") is None
    assert instance.attached() == set()


_BUSY_FORK = """
import os, sys, threading
from pathlib import Path
from evalgate.store import Store

home = Path(sys.argv[1])
held, done = threading.Event(), threading.Event()
store = Store(home / "a.duckdb")

def hold():
    with store.session():  # a.duckdb attached while the main thread forks
        store.protocol_hash("p", "1")
        held.set()
        done.wait(30)

t = threading.Thread(target=hold)
t.start()
held.wait(30)
pid = os.fork()
if pid == 0:  # the child uses another file, then exits through the interpreter's normal shutdown
    Store(home / "b.duckdb").record_protocol("q", "1", "e" * 64, {})
    sys.exit(0)
_, status = os.waitpid(pid, 0)
done.set()
t.join()
print(os.waitstatus_to_exitcode(status), Store(home / "b.duckdb").protocol_hash("q", "1") == "e" * 64)
"""


@pytest.mark.integration  # a fresh interpreter
def test_a_child_forked_while_a_file_is_attached_works_and_exits(tmp_path: Path) -> None:
    """The parent's instance is busy at the fork, so its copy stays in the child; destroying that copy would wait
    for threads the child does not have (a hang at the child's exit, seen before ``_after_fork_in_child``)."""
    out = subprocess.run([sys.executable, "-c", _BUSY_FORK, str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "True"]
