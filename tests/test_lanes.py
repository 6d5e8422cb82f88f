"""How `make test`'s lanes share the cores: threads per pytest-xdist worker (tests/conftest.py ``worker_threads``),
the files dealt out together (``scope_of``) and the vLLM lane's cores per worker (tests/helpers/vllm_lane.py
``bind_worker_cores``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import scope_of, worker_threads
from tests.helpers.vllm_lane import bind_worker_cores


@pytest.mark.parametrize(("env", "cores", "threads"), [
    ({"PYTEST_XDIST_WORKER_COUNT": "2"}, 2, 1),
    ({"PYTEST_XDIST_WORKER_COUNT": "2"}, 16, 8),
    ({"PYTEST_XDIST_WORKER_COUNT": "3"}, 16, 5),
    ({"PYTEST_XDIST_WORKER_COUNT": "4"}, 2, 1),  # more workers than cores: still one thread each
    ({}, 2, None),  # not under xdist: torch's own default
    ({"PYTEST_XDIST_WORKER_COUNT": "1"}, 2, None),
    ({"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "2"}, 2, None),  # the user's choice is kept
])
def test_worker_threads_split_the_cores_between_the_workers(env: dict[str, str], cores: int,
                                                            threads: int | None) -> None:
    assert worker_threads(env, cores) == threads


@pytest.mark.integration
def test_a_worker_under_xdist_runs_torch_on_its_share_of_the_cores() -> None:
    if "PYTEST_XDIST_WORKER_COUNT" not in os.environ:
        pytest.skip("not under pytest-xdist: the thread count is torch's default")
    # a torch started with this worker's environment (a fresh process: this worker's own torch may have been set
    # otherwise since, by a test that runs the demo's training, which sets its own thread count)
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                          capture_output=True, text=True, check=True)
    assert int(done.stdout) == int(os.environ["OMP_NUM_THREADS"])


@pytest.mark.parametrize(("worker", "count", "cores", "bound"), [
    ("gw0", "2", [0, 1], "0"),
    ("gw1", "2", [0, 1], "1"),
    ("gw1", "2", list(range(16)), "8,9,10,11,12,13,14,15"),
    ("gw0", "2", [2, 5, 7], "2"),  # the cores this process may use, not 0..n-1
    ("gw2", "3", [0, 1], None),  # fewer cores than workers: vLLM binds as it would
    ("", "2", [0, 1], None),  # not a worker
    ("gw0", "1", [0, 1], None),
])
def test_each_vllm_lane_worker_gets_its_own_cores(worker: str, count: str, cores: list[int],
                                                  bound: str | None) -> None:
    env = {"PYTEST_XDIST_WORKER": worker, "PYTEST_XDIST_WORKER_COUNT": count}
    bind_worker_cores(env, cores)
    assert env.get("VLLM_CPU_OMP_THREADS_BIND") == bound


def test_a_binding_the_user_set_is_kept() -> None:
    env = {"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    bind_worker_cores(env, [0, 1])
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"


def test_the_judges_served_test_is_dealt_with_the_openai_backends_file() -> None:
    """Both files use ``tserve``: one worker runs them, so one server starts (a server per worker otherwise)."""
    assert scope_of("tests/scoring/test_judge_real.py::test_x") == "tests/backends/test_openai.py"
    assert scope_of("tests/backends/test_openai.py::test_y[a::b]") == "tests/backends/test_openai.py"
    assert scope_of("tests/scoring/test_judge.py::test_z") == "tests/scoring/test_judge.py"


def test_the_real_data_check_sees_only_reads_under_the_data_folder_while_watching(tmp_path, monkeypatch) -> None:
    """``SharedReads`` (the ``real_data`` marker's check, tests/helpers/real_data.py) records a file opened under the
    data folder, by absolute or relative path, text or bytes, only between ``start`` and ``stop``; a sibling folder
    whose name starts the same (``data2``) and a file elsewhere are not reads of it."""
    from tests.helpers.real_data import SharedReads

    data = tmp_path / "shared" / "data"
    (data / "gsm8k").mkdir(parents=True)
    (tmp_path / "shared" / "data2").mkdir()
    gsm8k, twin, other = data / "gsm8k" / "test.jsonl", tmp_path / "shared" / "data2" / "x.jsonl", tmp_path / "o.txt"
    for f in (gsm8k, twin, other):
        f.write_text("{}\n")
    reads = SharedReads([data])
    gsm8k.read_text()  # before start: not watched
    reads.start()
    twin.read_text()
    other.read_bytes()
    assert reads.opened == []
    gsm8k.read_bytes()
    monkeypatch.chdir(data)
    with open(os.path.join("gsm8k", "test.jsonl"), "rb"):
        pass
    fd = os.open(str(gsm8k).encode(), os.O_RDONLY)
    os.close(fd)
    assert reads.stop() == [str(gsm8k)] * 3
    gsm8k.read_text()  # after stop: not watched
    assert reads.opened == [str(gsm8k)] * 3
    reads.start()
    assert reads.opened == []  # a new watch starts empty
    reads.stop()
