"""Issue 42, item 4: an item's tests that catch exceptions must not pass a candidate that only raises.

Custom code splits may hold tests like ``try: assert candidate(x) == y except ValueError: pass`` or
``assert all(map(candidate, xs))``; a candidate that raises ``ValueError`` (or ``StopIteration``, which ends the
``map`` early, so ``all`` sees an empty sequence) used to pass them. The harness now fails a sample whose candidate
raised in any call, whatever the tests did with the exception (docs/SANDBOX.md, "Tests that catch exceptions").
Each case is run in the real sandbox, beside a right candidate that passes the same tests.
"""

from __future__ import annotations

import pytest

from evalgate.scoring.harness import HarnessJob, run_tests_many

pytestmark = pytest.mark.integration

PROMPT = "def double(x):\n    \"\"\"Twice x.\"\"\"\n"
RIGHT = PROMPT + "    return 2 * x\n"

# name -> (the item's tests, a candidate body that only raises, or otherwise never returns a right value)
CASES: dict[str, tuple[str, str]] = {
    "except ValueError: pass": (
        "def check(candidate):\n"
        "    for x in (1, 2, 3):\n"
        "        try:\n"
        "            assert candidate(x) == 2 * x\n"
        "        except ValueError:\n"
        "            pass\n",
        "    raise ValueError('no answer')\n"),
    "map ended by a forwarded StopIteration": (
        "def check(candidate):\n"
        "    assert all(r == 2 * x for r, x in zip(map(candidate, [1, 2, 3]), [1, 2, 3]))\n",
        "    raise StopIteration\n"),
    "list(map(...)) compared by length only": (
        "def check(candidate):\n"
        "    assert len(list(map(candidate, []))) == 0\n"
        "    out = list(map(candidate, [4]))\n"
        "    assert not out or out == [8]\n",
        "    raise StopIteration\n"),
    "except Exception swallows a value that is not builtin data": (
        "def check(candidate):\n"
        "    try:\n"
        "        assert candidate(2) == 4\n"
        "    except Exception:\n"
        "        pass\n",
        "    return object()\n"),
    "except BaseException swallows the candidate's process ending": (
        "def check(candidate):\n"
        "    for x in (1, 2):\n"
        "        try:\n"
        "            assert candidate(x) == 2 * x\n"
        "        except BaseException:\n"
        "            pass\n",
        "    import os\n    os._exit(0)\n"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_candidate_that_raises_fails_tests_that_catch_it(name: str) -> None:
    test, body = CASES[name]
    wrong, right = run_tests_many([HarnessJob(PROMPT + body, PROMPT, test, "double"),
                                   HarnessJob(RIGHT, PROMPT, test, "double")], timeout_s=20)
    assert right.status == "passed", right.detail
    assert wrong.status == "failed", (wrong.status, wrong.detail)
    assert "the tests caught" in (wrong.detail or ""), wrong.detail
