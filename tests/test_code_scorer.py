"""The sandboxed code scorer on real HumanEval problems and on hostile programs."""

import os
import time

from evalgate.scoring import run_code
from evalgate.scoring.code import HumanEvalScorer, extract_program


def _program(rec: dict, body: str) -> str:
    return f"{rec['prompt']}{body}\n\n{rec['test']}\n\ncheck({rec['entry_point']})\n"


def test_canonical_solutions_pass_and_wrong_ones_fail(humaneval_records: list[dict]) -> None:
    for rec in humaneval_records[:5]:
        assert run_code(_program(rec, rec["canonical_solution"])).status == "passed", rec["task_id"]
        assert run_code(_program(rec, "    return None\n")).status == "failed", rec["task_id"]


def test_infinite_loop_times_out_within_about_the_timeout() -> None:
    t0 = time.perf_counter()
    res = run_code("while True:\n    pass\n", timeout_s=1.0)
    assert res.status == "timeout"
    assert time.perf_counter() - t0 < 3.0


def test_forked_sleeping_child_is_killed(tmp_path) -> None:
    pidfile = tmp_path / "child.pid"
    prog = (f"import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(60)\n    os._exit(0)\n"
            f"open({str(pidfile)!r}, 'w').write(str(pid))\n")
    res = run_code(prog, timeout_s=5.0)
    assert res.status == "passed"
    child = int(pidfile.read_text())
    time.sleep(0.2)
    try:
        os.kill(child, 0)
        alive = open(f"/proc/{child}/stat").read().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the forked child survived the sandbox"


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
