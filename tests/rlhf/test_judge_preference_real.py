"""The ``judge_preference`` scorer with the real SmolLM2-135M-Instruct as the judge (the scripted-judge tests, with
every value by hand, are tests/rlhf/test_judge_preference.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.rlhf.test_judge_preference import PAIRS, _options

pytestmark = pytest.mark.usefixtures("memory_store")


REAL_TEMPLATE = ("You are a judge. Question: {question}\n[Answer A]: {answer_a}\n[Answer B]: {answer_b}\n"
                 "Which answer is better for {rubric}? Output your final verdict by strictly following this "
                 "format: \"[[A]]\" if answer A is better, \"[[B]]\" if answer B is better.")


@pytest.mark.slow
def test_judge_preference_with_the_real_smollm2(tmp_path: Path, smollm2_gguf: Path) -> None:
    """SmolLM2-135M-Instruct judging three pairs (the judge scorer's real-model test found it writes "[A]" whatever
    the answers, so one rule taking one or more brackets): each pair's score is the preference its two recorded
    verdicts give, and a judge that names position A in both orders prefers neither answer."""
    from evalgate.checkpoints.resolve import resolve_checkpoint

    ckpt = resolve_checkpoint(smollm2_gguf)
    write_split("pairs", "dev", PAIRS[:3], {"source": "test"})
    doc = {"name": "judge-pairs-real", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
           "sampling": {"temperature": 0.0, "max_tokens": 1, "n": 1, "seed": 0}, "pass_at_k": [1],
           "scorer": {"name": "judge_preference", "options": _options(
               judge={"backend": "hf", "checkpoint": str(smollm2_gguf), "digest": ckpt.digest},
               template=REAL_TEMPLATE, rubric="correctness", parse=r"\[+([ABC])\]+",
               sampling={"temperature": 0.0, "max_tokens": 24, "seed": 0})}}
    p = tmp_path / "judge-pairs-real.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    freeze(p, Store)
    store = Store()
    result = evaluate(p, ckpt, "pairs", RunOptions(progress=False), store)
    rows = {r.item_id: r for r in store.samples(result["run_id"])}
    side = {"A": 1.0, "B": 0.0, "tie": 0.5}
    prefs = []
    for pid in ("p1", "p2", "p3"):
        r = rows[pid]
        if r.status == "judge_unparseable":  # either order unreadable: a loss
            assert r.score == 0.0 and r.extracted is None
            prefs.append(0.0)
            continue
        first, second = r.extracted.split("/")  # chosen shown as A, then as B
        pref = (side[first] + 1 - side[second]) / 2
        assert r.score == pref and r.status == ("correct" if pref > .5 else "wrong" if pref < .5 else "tie")
        prefs.append(pref)
    m = result["metrics"]
    assert m["preference_accuracy"] == pytest.approx(sum(prefs) / 3) and m["judge"]["calls"]["asked"] == 6
    # what greedy SmolLM2 wrote (read off its outputs, checked against the rule by hand): "[A]" for pairs 1 and 2 in
    # both orders (a tie each: position A, never an answer), and for pair 3 "[A] ... The correct answer is: [B]."
    # in one order: two verdicts, unparseable, a loss; so (0.5 + 0.5 + 0) / 3
    assert [rows[p].extracted for p in ("p1", "p2", "p3")] == ["A/A", "A/A", None]
    assert "several verdicts" in rows["p3"].detail
    assert m["preference_accuracy"] == pytest.approx(1 / 3)
    assert (m["judge"]["unparseable"], m["judge"]["position_flip_rate"], m["judge"]["first_position_rate"]) == (1, 1.0,
                                                                                                              1.0)
