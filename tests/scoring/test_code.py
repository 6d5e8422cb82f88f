"""The sandboxed code scorer on real HumanEval problems and on hostile programs."""

import socket
import threading
import time
from pathlib import Path

import pytest

from evalgate.core.sandbox import netns_available
from evalgate.scoring import run_code
from evalgate.scoring.code import HumanEvalScorer, extract_program
from evalgate.scoring.harness import HarnessJob, run_tests_many


def _program(rec: dict, body: str) -> str:
    return f"{rec['prompt']}{body}\n\n{rec['test']}\n\ncheck({rec['entry_point']})\n"


@pytest.mark.integration
def test_all_canonical_solutions_pass_and_wrong_ones_fail(humaneval_records: list[dict]) -> None:
    """Through evalgate's harness (issue 27), as the scorer runs them: the 164 canonical solutions pass and 40
    wrong bodies fail."""

    def job(rec: dict, body: str) -> HarnessJob:
        return HarnessJob(rec["prompt"] + body, rec["prompt"], rec["test"], rec["entry_point"])

    assert len(humaneval_records) == 164
    right = run_tests_many([job(r, r["canonical_solution"]) for r in humaneval_records])
    failed = [(r["task_id"], x.status, x.detail) for r, x in zip(humaneval_records, right, strict=True)
              if x.status != "passed"]
    assert not failed
    wrong = run_tests_many([job(r, "    return None\n") for r in humaneval_records[:40]])
    assert [x.status for x in wrong] == ["failed"] * 40


@pytest.mark.integration
def test_infinite_loop_times_out_within_about_the_timeout() -> None:
    t0 = time.perf_counter()
    res = run_code("while True:\n    pass\n", timeout_s=1.0)
    assert res.status == "timeout"
    # killed at the timeout, not run on (to the CPU limit, 10 s by default) or waited on: the slack above 1 s is
    # the kill and cleanup on a loaded 2-core machine
    assert 1.0 <= res.wall_s < 6.0
    assert time.perf_counter() - t0 < 8.0


@pytest.mark.integration
def test_cpu_time_limit_gives_timeout() -> None:
    res = run_code("while True:\n    pass\n", timeout_s=20.0, cpu_s=1)
    assert res.status == "timeout"
    assert res.returncode == -24  # SIGXCPU
    assert res.wall_s < 15


@pytest.mark.integration
def test_network_connection_fails_where_isolation_is_available() -> None:
    if not netns_available():
        pytest.skip("no network namespace here (unshare --net fails), so programs keep the network")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = threading.Thread(target=lambda: [server.accept() for _ in range(1)], daemon=True)
    accepted.start()
    prog = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
    try:
        allowed = run_code(prog, timeout_s=10.0, network=True)  # without isolation it reaches the server
        assert allowed.status == "passed", allowed.stderr
        isolated = run_code(prog, timeout_s=10.0)
    finally:
        server.close()
    assert isolated.status == "failed"
    assert "netns" in isolated.isolation and "netns" not in allowed.isolation
    assert "OSError" in isolated.stderr or "ConnectionRefused" in isolated.stderr


@pytest.mark.integration
def test_memory_limit_stops_a_2gb_allocation_without_crashing_the_scorer() -> None:
    res = run_code("x = bytearray(2 * 1024 ** 3)\nx[-1] = 1\n", timeout_s=20.0, memory_mb=512)
    assert res.status in ("failed", "error")
    assert "MemoryError" in res.stderr


@pytest.mark.integration
def test_file_size_limit(tmp_path: Path) -> None:
    # Python ignores SIGXFSZ, so the write fails with EFBIG ("File too large") instead of a kill.
    res = run_code("open('big', 'wb').write(b'x' * (3 << 20))\n", timeout_s=10.0, file_size_mb=1)
    assert res.status in ("failed", "error")
    assert "File too large" in res.stderr
    assert run_code("open('small', 'wb').write(b'x' * (3 << 19))\n", file_size_mb=2).status == "passed"


def test_extract_program_takes_fenced_block() -> None:
    assert extract_program("Sure:\n```python\ndef f():\n    return 1\n```\nDone") == "def f():\n    return 1"
    assert extract_program("```python\ndef f():\n    return 2") == "def f():\n    return 2"
    assert extract_program("    return 3") == "    return 3"


def test_humaneval_scorer_prepends_prompt_only_when_needed(humaneval_records: list[dict]) -> None:
    from evalgate.scoring.base import SampleToScore

    rec = humaneval_records[0]
    scorer = HumanEvalScorer.__new__(HumanEvalScorer)
    body_only = SampleToScore(rec, rec["canonical_solution"], "", "stop")
    full = SampleToScore(rec, rec["canonical_solution"], "```python\n" + rec["prompt"], "stop")
    assert scorer.program(body_only).startswith(rec["prompt"])
    assert scorer.program(full).count(f"def {rec['entry_point']}(") == 1


def _chat_answer(rec: dict, drop: str = "") -> str:
    """A chat answer holding the whole correct function (the prompt's def line, docstring and canonical body)
    without the prompt's lines that contain ``drop``."""
    head = rec["prompt"][rec["prompt"].index(f"def {rec['entry_point']}("):]
    lines = [x for x in (head + rec["canonical_solution"]).splitlines() if not (drop and drop in x)]
    return "Here is the function:\n```python\n" + "\n".join(lines) + "\n```\n"


@pytest.mark.integration
def test_humaneval_program_keeps_the_prompts_imports_and_helpers(humaneval_records: list[dict]) -> None:
    """Issue 14, point 8: HumanEval/0's full function without ``from typing import List`` used to fail with
    NameError; the harness assembles prompt + completion + tests, so it is correct. Neighbours: a prompt helper
    the answer calls (HumanEval/10's is_palindrome), a body-only completion, a response prefix holding the
    prompt, and a wrong answer that must stay wrong."""
    from evalgate.scoring.base import SampleToScore

    by_id = {r["task_id"]: r for r in humaneval_records}
    he0, he10 = by_id["HumanEval/0"], by_id["HumanEval/10"]
    assert "from typing import List" in he0["prompt"] and "def is_palindrome" in he10["prompt"]
    scorer = HumanEvalScorer.__new__(HumanEvalScorer)
    samples = [
        SampleToScore(he0, _chat_answer(he0), "", "stop"),  # no import in the answer
        SampleToScore(he10, _chat_answer(he10), "", "stop"),  # calls the prompt's helper, does not define it
        SampleToScore(he0, he0["canonical_solution"], "", "stop"),  # body only
        SampleToScore(he0, he0["canonical_solution"] + "```", "```python\n" + he0["prompt"], "stop"),
        SampleToScore(he0, _chat_answer(he0).replace("< threshold", "> threshold"), "", "stop"),  # wrong
    ]
    assert "List" in samples[0].text and "import" not in samples[0].text
    assert "def is_palindrome" not in samples[1].text
    assert scorer.program(samples[3]).count("from typing import List") == 1  # the prompt is not written twice
    results = run_tests_many([scorer.job(s) for s in samples], timeout_s=10)
    assert [r.status for r in results] == ["passed", "passed", "passed", "passed", "failed"], [
        r.detail for r in results]


BASH_THEN_PYTHON = ("You need numpy first:\n```bash\npip install numpy\n```\nThen:\n```python\nimport numpy as np\n\n"
                    "def task_func(xs):\n    return float(np.mean(xs))\n```\n")


@pytest.mark.parametrize(("text", "entry", "expected"), [
    # arjunguha/BigCodeBench-X#6: a bash pip line, then the program: the first block was taken (SyntaxError)
    (BASH_THEN_PYTHON, "task_func", "import numpy as np\n\ndef task_func(xs):\n    return float(np.mean(xs))"),
    (BASH_THEN_PYTHON, None, "import numpy as np\n\ndef task_func(xs):\n    return float(np.mean(xs))"),  # by tag
    # neighbours: a shell transcript, then an untagged block; a `py` tag; an example block before the definition;
    # a draft and a corrected version (the last definition); a block in another language only when alone
    ("```console\n$ python -m pip install x\n```\n```\ndef f():\n    return 1\n```", "f", "def f():\n    return 1"),
    ("```sh\nexport X=1\n```\n```py\ndef f():\n    return 2\n```", "f", "def f():\n    return 2"),
    ("Usage:\n```python\nprint(f(3))\n```\nCode:\n```python\ndef f(x):\n    return x\n```", "f",
     "def f(x):\n    return x"),
    ("```python\ndef f():\n    return 0\n```\nFixed:\n```python\ndef f():\n    return 1\n```", "f",
     "def f():\n    return 1"),
    ("```python\nasync def f():\n    return 1\n```", "f", "async def f():\n    return 1"),
    ("```bash\necho hi\n```", "f", "echo hi"),
    ("```Python\nx = 1\n```", "f", "x = 1"),  # tags are case-insensitive
])
def test_extract_program_takes_the_block_in_the_protocols_language(text: str, entry: str | None,
                                                                   expected: str) -> None:
    assert extract_program(text, entry) == expected


def test_a_pip_line_before_the_program_scores_correct() -> None:
    """End to end through the scorer and the harness: a correct answer after a ``bash`` block is ``correct``."""
    from evalgate.scoring.base import SampleToScore

    item = {"prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n", "entry_point": "add",
            "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}
    text = "```bash\npip install nothing\n```\n```python\ndef add(a, b):\n    return a + b\n```"
    from evalgate.protocol.spec import load_protocol
    from tests.conftest import REPO

    scorer = HumanEvalScorer(load_protocol(REPO / "protocols" / "humaneval-smoke.yaml"))
    [res] = scorer.score([SampleToScore(item, text, "", "stop")])
    assert res.status == "correct", res
