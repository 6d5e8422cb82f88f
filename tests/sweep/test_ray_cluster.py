"""``evalgate sweep --ray`` on a real local Ray cluster (2 CPUs on 127.0.0.1, one cluster for the module): the stored
samples equal the sequential sweep's (the hf engine on the tiny random checkpoint, in the workers); with the
``replay`` backend answering each request after ``DELAY_S`` wall seconds (a slow engine whose workers need no torch),
so that a unit can be stopped half-way: a worker killed mid-unit is replaced and sent only what it had not
returned; a driver killed mid-sweep loses nothing stored, and the rerun generates only the rest; Ctrl-C interrupts
the running units."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.runner.evaluate import RunOptions
from evalgate.store import Store
from evalgate.sweep import SweepOptions, SweepSummary, Unit, sweep
from tests.conftest import REPO
from tests.sweep.sweep_fixtures import addition_protocol, addition_split, make_checkpoints, replay_options

pytestmark = pytest.mark.integration  # a Ray cluster and its worker processes (seconds), no real model

DELAY_S = 2.0
"""Wall seconds each replayed request takes in a worker: the interrupting side (the driver's ``on_stored`` hook, or
this test polling the store) acts within a second or two of the first stored request even on a loaded machine,
while the requests after it are still being answered, ``DELAY_S`` apart."""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield ray
    ray.shutdown()


def _samples(store: Store, doc: SweepSummary) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    out = {}
    for u in doc.units:
        assert u.run_id is not None
        for s in store.samples(u.run_id):
            out[(u.digest, s.item_id, s.sample_index)] = (s.seed, s.text, s.completion_tokens, s.finish_reason,
                                                          s.score, s.status)
    return out


def _generations(store: Store) -> list[tuple[Any, ...]]:
    with store.connect() as con:
        return con.execute("SELECT checkpoint_digest, item_id, sample_index, run_id FROM generations").fetchall()


def test_ray_sweep_stores_the_samples_of_the_sequential_sweep(home: Path, tiny_checkpoint: Path,
                                                              ray_cluster: Any) -> None:
    make_checkpoints(home / "runs", tiny_checkpoint, [10, 20])  # the same samples: any weights do
    proto = addition_protocol(home, max_tokens=4, n=1)
    addition_split("dev-a", 2)
    pattern = str(home / "runs/*/*/checkpoint-*")
    quiet = RunOptions(progress=False)
    local_store, ray_store = Store(home / "local.duckdb"), Store(home / "ray.duckdb")

    local = sweep(proto, pattern, ["dev-a"], SweepOptions(run=quiet), local_store)
    on_ray = sweep(proto, pattern, ["dev-a"], SweepOptions(run=quiet, ray="auto", chunk=1), ray_store)
    assert local.counts == on_ray.counts == {"done": 2}
    assert len(_samples(local_store, local)) == 4
    assert _samples(ray_store, on_ray) == _samples(local_store, local)

    node = ray_cluster.get_runtime_context().get_node_id()
    reads = [r for r in ray_store.access_rows() if r.outcome == "read"]
    assert len(reads) == 2 and all(f"sent in memory to ray node {node}" in r.detail for r in reads)
    assert {r.run_id for r in reads} == {u.run_id for u in on_ray.units}
    assert all(u.attempts == 1 and u.node_id == node for u in on_ray.units)

    again = sweep(proto, pattern, ["dev-a"], SweepOptions(run=quiet, ray="auto"), ray_store)
    assert again.counts == {"skipped": 2}


def test_a_killed_worker_is_replaced_and_sent_only_what_it_had_not_returned(home: Path, tiny_checkpoint: Path,
                                                                            ray_cluster: Any) -> None:
    make_checkpoints(home / "runs", tiny_checkpoint, [10])
    proto = addition_protocol(home, max_tokens=8, n=1)
    # five requests, DELAY_S apart: the worker is killed after the first is stored, and must not have returned the
    # four others by then (4 x DELAY_S later; with three, a loaded driver storing the first could let the worker
    # finish the last two)
    addition_split("dev-a", 5)
    killed: list[int] = []

    def kill_worker(unit: Unit, stored: int) -> None:
        if not killed:  # after the first request is stored, while the worker answers the next ones
            killed.append(unit.worker_pid or 0)
            os.kill(unit.worker_pid or 0, signal.SIGKILL)

    store = Store()
    doc = sweep(proto, str(home / "runs/*/*/checkpoint-*"), ["dev-a"],
                SweepOptions(run=replay_options(home, 5, DELAY_S), ray="auto", chunk=1, on_stored=kill_worker), store)
    (unit,) = doc.units
    assert unit.status == "done" and unit.attempts == 2
    assert 1 <= unit.resent <= 4  # the requests not returned before the kill; at least the first was stored
    assert unit.generated == 5
    gens = _generations(store)
    assert len(gens) == 5 and len(set(gens)) == 5 and {g[3] for g in gens} == {unit.run_id}
    assert unit.run_id is not None
    samples = store.samples(unit.run_id)
    assert [s.item_id for s in samples] == ["a0", "a1", "a2", "a3", "a4"]
    assert [s.text for s in samples] == ["10", "14", "16", "20", "22"]  # replayed, each item's own answer
    rows = [r for r in store.access_rows() if r.run_id == unit.run_id]
    assert [r.outcome for r in rows] == ["read", "read"]
    assert f"(worker pid {killed[0]})" in rows[0].detail
    assert rows[1].detail.startswith(f"resent {unit.resent} requests after a worker died")
    assert f"(worker pid {killed[0]})" not in rows[1].detail


def test_a_killed_driver_loses_nothing_stored_and_the_rerun_generates_only_the_rest(home: Path, tiny_checkpoint: Path,
                                                                                    ray_cluster: Any) -> None:
    make_checkpoints(home / "runs", tiny_checkpoint, [10, 20])
    proto = addition_protocol(home, max_tokens=8, n=1)
    addition_split("dev-a", 3)
    run = replay_options(home, 3, DELAY_S)
    pattern = str(home / "runs/*/*/checkpoint-*")
    address = ray_cluster.get_runtime_context().gcs_address
    driver = subprocess.Popen([sys.executable, "-m", "evalgate.cli", "sweep", "--protocol", str(proto),
                               "--checkpoints", pattern, "--split", "dev-a", "--ray", address, "--ray-chunk", "1",
                               "--backend", "replay", "--backend-option", f"file={run.backend_options['file']}",
                               "--backend-option", f"delay_s={DELAY_S}", "--json"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    store = Store()
    deadline = time.monotonic() + 300
    while not _generations(store):  # polled while the units' 6 requests take 3 x DELAY_S
        assert driver.poll() is None, f"the driver ended before it stored anything: {driver.communicate()}"
        assert time.monotonic() < deadline, "the driver stored nothing in 300 s"
        time.sleep(0.2)
    driver.send_signal(signal.SIGKILL)
    driver.communicate()
    before = len(_generations(store))
    assert before < 6, "the driver finished before it was killed"

    doc = sweep(proto, pattern, ["dev-a"], SweepOptions(run=run, ray="auto"), store)
    assert doc.counts == {"done": 2}
    assert sum(u.generated for u in doc.units) == 6 - before
    gens = _generations(store)
    assert len(gens) == 6 and len({g[:3] for g in gens}) == 6
    killed_runs = [r for r in store.runs() if r.run_id not in {u.run_id for u in doc.units}]
    assert killed_runs and {r.status for r in killed_runs} == {"interrupted"}


def test_ctrl_c_kills_the_running_units_workers_and_marks_their_runs_interrupted(home: Path, tiny_checkpoint: Path,
                                                                                  ray_cluster: Any) -> None:
    make_checkpoints(home / "runs", tiny_checkpoint, [10, 20])
    proto = addition_protocol(home, max_tokens=8, n=1)
    addition_split("dev-a", 3)
    sent: list[int] = []

    def ctrl_c(unit: Unit, stored: int) -> None:  # SIGINT to this process, as the terminal sends it
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)

    store = Store()
    with pytest.raises(KeyboardInterrupt):
        sweep(proto, str(home / "runs/*/*/checkpoint-*"), ["dev-a"],
              SweepOptions(run=replay_options(home, 3, DELAY_S), ray="auto", chunk=1, on_stored=ctrl_c), store)
    runs = store.runs()
    assert 1 <= len(runs) <= 2  # the units that had started (2 CPUs: up to one each)
    # the other unit may have finished all 3 items before the signal was handled (a quiet machine): it stays
    # complete, with all its samples; every unit still running is interrupted, and at least the one that sent it
    interrupted = [r for r in runs if r.status == "interrupted"]
    assert interrupted and all("Ctrl-C" in r.error for r in interrupted)
    assert {r.status for r in runs} <= {"interrupted", "complete"}
    assert all(r.counts["samples"] == 3 for r in runs if r.status == "complete")
    assert 1 <= len(_generations(store)) < 6  # what was stored before Ctrl-C is kept
