"""A generative judge scored on preference pairs, the ``judge_preference`` scorer (evalgate/rlhf/judge_preference.py),
inside ``evalgate run`` with the scripted judge of tests/scoring/test_judge_scorer.py registered as the ``hf``
backend: its verdicts are fixed by the answers it is shown, so every expected value is by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.core.errors import BadInput
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.scoring.test_judge_scorer import JUDGE_DIGEST, PAIRWISE, ScriptedJudge, _ckpt
from tests.scoring.test_judge_scorer import judge as judge  # the scripted judge as backend hf (a fixture)

pytestmark = pytest.mark.usefixtures("memory_store", "judge")

PAIRS = [
    # the judge names the answer holding "good": chosen both orders -> 1
    {"id": "p1", "prompt": "Q1", "chosen": "a good answer", "rejected": "a poor answer", "category": "chat"},
    # the rejected answer holds "good": rejected both orders -> 0
    {"id": "p2", "prompt": "Q2", "chosen": "meh", "rejected": "good but wrong", "category": "chat"},
    # neither: the judge names position A both times -> chosen once, rejected once -> 0.5, a flip
    {"id": "p3", "prompt": "Q3", "chosen": "right", "rejected": "wrong", "category": "safety"},
    # "pass" anywhere: no verdict -> unparseable, a loss
    {"id": "p4", "prompt": "Q4", "chosen": "pass", "rejected": "fail", "category": "safety"},
]


def _verdict(prompt: str) -> str:
    a = prompt.split("[A] ")[1].split("\n")[0]
    b = prompt.split("[B] ")[1].split("\n")[0]
    if "pass" in (a, b):
        return "I cannot say."
    if "good" in a:
        return "[[A]]"
    if "good" in b:
        return "[[B]]"
    return "[[A]]"


def _options(**kw: Any) -> dict[str, Any]:
    return {"judge": {"backend": "hf", "checkpoint": "judge-model", "digest": JUDGE_DIGEST}, "template": PAIRWISE,
            "rubric": "helpful", "parse": r"\[\[([ABC])\]\]", "verdicts": {"A": "A", "B": "B", "C": "tie"},
            "sampling": {"temperature": 0.0, "max_tokens": 16, "seed": 0}, **kw}


def _setup(tmp_path: Path, **kw: Any) -> Path:
    write_split("pairs", "dev", PAIRS, {"source": "test"})
    doc = {"name": "judge-pairs", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
           "sampling": {"temperature": 0.0, "max_tokens": 1, "n": 1, "seed": 0}, "pass_at_k": [1],
           "scorer": {"name": "judge_preference", "options": _options(**kw)}}
    p = tmp_path / "judge-pairs.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    freeze(p, Store)
    return p


def test_judge_preference_accuracy_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ScriptedJudge, "verdict", staticmethod(_verdict))
    judge = ScriptedJudge
    proto = _setup(tmp_path)
    store = Store()
    result = evaluate(proto, _ckpt(tmp_path, "judge-model", JUDGE_DIGEST), "pairs", RunOptions(progress=False), store)
    m = result["metrics"]
    # (1 + 0 + 0.5 + 0) / 4: ties half, the unparseable pair a loss
    assert m["preference_accuracy"] == pytest.approx(0.375) and m["preference_pairs"] == 4
    assert m["preference_by_category"]["chat"]["accuracy"] == pytest.approx(0.5)
    assert m["preference_by_category"]["safety"]["accuracy"] == pytest.approx(0.25)
    # flips over the 3 parsed pairs: only p3; non-tie verdicts A,B | B,A | A,A: 4 of 6 for position A
    assert m["judge"]["unparseable"] == 1
    assert m["judge"]["position_flip_rate"] == pytest.approx(1 / 3)
    assert m["judge"]["first_position_rate"] == pytest.approx(4 / 6)
    assert m["judge"]["calls"]["asked"] == 8
    rows = {r.item_id: r for r in store.samples(result["run_id"])}
    assert [rows[p].status for p in ("p1", "p2", "p3", "p4")] == ["correct", "wrong", "tie", "judge_unparseable"]
    assert [rows[p].score for p in ("p1", "p2", "p3", "p4")] == [1.0, 0.0, 0.5, 0.0]
    # both orders were asked: chosen first, then rejected first
    assert [a.split("[A] ")[1].split("\n")[0] for a in judge.asked[:2]] == ["a good answer", "a poor answer"]
    # a rerun asks the judge nothing (the calls are in the generation cache)
    judge.asked.clear()
    again = evaluate(proto, _ckpt(tmp_path, "judge-model", JUDGE_DIGEST), "pairs", RunOptions(progress=False), store)
    assert judge.asked == [] and again["metrics"]["preference_accuracy"] == pytest.approx(0.375)


def test_the_run_checkpoint_must_be_the_pinned_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ScriptedJudge, "verdict", staticmethod(_verdict))
    judge = ScriptedJudge
    proto = _setup(tmp_path)
    with pytest.raises(BadInput, match="evaluates the judge the protocol pins"):
        evaluate(proto, _ckpt(tmp_path, "other", "blake3:" + "9" * 64), "pairs", RunOptions(progress=False), Store())
    assert judge.asked == []


def test_the_template_must_show_both_answers(tmp_path: Path) -> None:
    from evalgate.rlhf.judge_preference_options import JudgePreferenceOptions

    with pytest.raises(ValueError, match="exactly the fields"):
        JudgePreferenceOptions(**_options(template="Q: {question} {answer_a} {rubric}"))
    assert json.dumps(JudgePreferenceOptions(**_options()).hashed(_options())["judge"]) == json.dumps(
        {"backend": "hf", "digest": JUDGE_DIGEST})

