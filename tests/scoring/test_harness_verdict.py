"""The harness's trusted side on its own (``harness_program.run_tests``): a sample whose candidate raised in any
call fails, whatever the item's tests did with the exception (issue 42, item 4). The candidate's replies are
scripted here (glue); tests/scoring/test_code_swallowed.py runs the same cases through the real sandbox."""

from __future__ import annotations

import pytest

from evalgate.scoring import harness_program

PROMPT = "def double(x):\n    \"\"\"Twice x.\"\"\"\n"
# the item's tests catch everything the candidate raises
TEST = ("def check(candidate):\n"
        "    for x in (1, 2, 3):\n"
        "        try:\n"
        "            assert candidate(x) == 2 * x\n"
        "        except BaseException:\n"
        "            pass\n")


class _ScriptedChannel:
    """The trusted process's channel with the candidate process's replies given in advance."""

    def __init__(self, replies: list[tuple]):
        self.replies = list(replies)
        self.sent: list[tuple] = []

    def send(self, msg: tuple) -> None:
        self.sent.append(msg)

    def recv(self) -> tuple:
        if not self.replies:
            raise EOFError("the candidate's process ended")
        return self.replies.pop(0)


@pytest.mark.parametrize("replies, verdict", [
    ([("ready",), ("ok", 2), ("ok", 4), ("ok", 6)], "passed"),
    ([("ready",), ("ok", 2), ("ok", 5), ("ok", 6)], "passed"),  # the tests swallow their own AssertionError too
    ([("ready",)] + [("raise", "ValueError", "no")] * 3, "failed"),
    ([("ready",), ("ok", 2), ("raise", "StopIteration", ""), ("ok", 6)], "failed"),
    ([("ready",), ("refused", "a value of type fractions.Fraction")] + [("ok", 4), ("ok", 6)], "failed"),
    ([("ready",), ("ok", 2)], "failed"),  # the candidate's process ended after one call
], ids=["right", "wrong value swallowed by the tests", "raises every call", "StopIteration once",
        "non-builtin value", "process ended"])
def test_any_call_that_raised_fails_the_sample(replies: list[tuple], verdict: str) -> None:
    chan = _ScriptedChannel(replies)
    got, detail = harness_program.run_tests(("nonce", PROMPT, TEST, "double"), chan)
    assert got == verdict, detail
    assert chan.sent[0] == ("load", "double")
