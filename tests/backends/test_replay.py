"""The ``replay`` backend's pace: ``delay_s`` wall seconds before each request is answered (what the Ray sweep tests
use as a slow engine), validated like every backend option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.backends import replay
from evalgate.backends.base import (
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    check_backend,
    generation_settings,
    get_backend,
)
from evalgate.core.errors import BadInput


def _request(key: str) -> GenerationRequest:
    params = EffectiveParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=8, stop=(), repetition_penalty=1.0)
    return GenerationRequest(key=key, prompt="p", sample_indices=(0,), seeds=(7,), params=params)


def test_each_request_waits_delay_s_before_it_is_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"item_id": k, "turn": 0, "text": t}) + "\n" for k, t in
                            [("a", "one two"), ("b", "three")]))
    events: list[str] = []
    monkeypatch.setattr(replay.time, "sleep", lambda s: events.append(f"sleep {s}"))
    engine = get_backend("replay", "unused", check_backend("replay", {"file": str(path), "delay_s": 1.5}))

    def answered(res: GenerationResult) -> None:
        events.append(f"{res.request.key}: {res.completions[0].text}")

    out = engine.generate([_request("a"), _request("b")], on_result=answered)
    assert events == ["sleep 1.5", "a: one two", "sleep 1.5", "b: three"]
    assert [r.completions[0].completion_tokens for r in out] == [2, 1]

    events.clear()
    get_backend("replay", "unused", check_backend("replay", {"file": str(path)})).generate([_request("a")], answered)
    assert events == ["a: one two"]  # no delay by default: no sleep at all


@pytest.mark.parametrize("bad", [-1, 3601, "soon"])
def test_a_bad_delay_is_refused_naming_the_option(tmp_path: Path, bad: object) -> None:
    with pytest.raises(BadInput, match="delay_s"):
        check_backend("replay", {"file": str(tmp_path / "r.jsonl"), "delay_s": bad})


def test_the_delay_does_not_change_the_generation_settings(tmp_path: Path) -> None:
    # the pace changes no output: a rerun at another pace finds the same cached samples and complete runs
    file = str(tmp_path / "r.jsonl")
    slow, fast = (generation_settings("replay", check_backend("replay", {"file": file, "delay_s": d})) for d in (2, 0))
    assert slow == fast and "delay_s" not in slow
    assert generation_settings("replay", check_backend("replay", {"file": file + "x"})) != fast
