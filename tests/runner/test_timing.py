"""The run record's timing separates an engine's start-up from its generation (issue 29: a vLLM run reported 26
tokens/s, its engine start of about 60 s included, where the engine generated about 130)."""

from __future__ import annotations

import pytest

from evalgate.runner.generate import Generated, backend_timing, phases_between
from evalgate.runner.record import timing


def test_tokens_per_s_is_over_the_generation_phase_only() -> None:
    # 60 s starting the engine, then 1300 tokens in 10 s: 130 tokens/s, not 1300 / 70 = 18.6
    gen = Generated({}, 70.0, 1300, {}, {"engine_start_s": 60.0, "first_token_s": 0.5, "generation_s": 10.0})
    t = timing(75.0, gen, 2.0)
    assert t["tokens_per_s"] == pytest.approx(130.0)
    assert (t["engine_start_s"], t["first_token_s"], t["generation_s"]) == (60.0, 0.5, 10.0)
    assert (t["wall_s"], t["generate_s"], t["score_s"], t["new_completion_tokens"]) == (75.0, 70.0, 2.0, 1300)


def test_a_backend_without_phases_keeps_generate_s_as_the_denominator() -> None:
    t = timing(12.0, Generated({}, 10.0, 200, {}), 1.0)
    assert t["tokens_per_s"] == pytest.approx(20.0) and "engine_start_s" not in t
    assert timing(1.0, Generated({}, 0.0, 0, {}), 0.0)["tokens_per_s"] is None  # all cached


def test_phases_are_the_difference_of_two_readings() -> None:
    class Engine:
        seconds = {"engine_start_s": 0.0, "first_token_s": 0.0, "generation_s": 0.0, "calls": 0}

        def timing(self) -> dict[str, float]:
            return dict(self.seconds)

    e = Engine()
    first = backend_timing(e)
    e.seconds = {"engine_start_s": 50.0, "first_token_s": 1.0, "generation_s": 8.0, "calls": 1}
    second = backend_timing(e)
    assert phases_between(first, second) == {"engine_start_s": 50.0, "first_token_s": 1.0, "generation_s": 8.0}
    e.seconds = {"engine_start_s": 50.0, "first_token_s": 1.5, "generation_s": 11.0, "calls": 2}  # engine reused
    assert phases_between(second, backend_timing(e)) == {"engine_start_s": 0.0, "first_token_s": 0.5,
                                                          "generation_s": 3.0}
    assert backend_timing(object()) == {}
