"""Scorer options: one pydantic model per scorer, validated when the protocol is loaded (so ``protocol freeze``
refuses a typo with file:line and the nearest key), handed to the scorer as an object."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.protocol.spec import load_protocol
from evalgate.scoring.base import SCORERS, ExactOptions, MathOptions, ScorerOptions, get_scorer

MATH = """\
name: typo
version: "1"
prompt:
  template: "Q: {{ question }}"
  chat_template: none
scorer:
  name: math
  options:
    answer_feild: answer
extraction:
  rule: gsm8k
"""


def test_typo_in_scorer_options_is_refused_by_freeze_with_line_and_nearest_key(tmp_path: Path, home: Path) -> None:
    # issue 14 point 10: this froze with exit 0 and was refused only by run, after which the fix needed a new version
    p = tmp_path / "typo.yaml"
    p.write_text(MATH)
    with pytest.raises(BadInput) as err:
        load_protocol(p)
    # line 9 of MATH holds `answer_feild:`
    assert f"{p}:9: scorer.options.answer_feild: unknown key 'answer_feild'; did you mean 'answer_field'?" in str(
        err.value)
    r = CliRunner().invoke(main, ["protocol", "freeze", str(p)])
    assert r.exit_code == 2, r.output
    assert "did you mean 'answer_field'?" in r.output
    assert not p.with_name("typo.yaml.lock").exists()


@pytest.mark.parametrize(("scorer", "options", "message"), [
    # bool("no") is True: the old hand-unpacking turned case: "no" into case-folding ON
    ("exact", "case: \"no\"", "scorer.options.case: Input should be a valid boolean"),
    ("exact", "answer_field: 7", "scorer.options.answer_field: Input should be a valid string"),
    # humaneval read no options at all, so anything was accepted and ignored
    ("humaneval", "timeout_s: 5", "scorer.options.timeout_s: unknown key 'timeout_s'; this section takes no keys"),
])
def test_wrong_option_values_and_options_a_scorer_lacks_are_refused(tmp_path: Path, scorer: str, options: str,
                                                                    message: str) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(MATH.replace("name: math", f"name: {scorer}").replace("answer_feild: answer", options))
    with pytest.raises(BadInput, match="p.yaml:9: " + message):
        load_protocol(p)


def test_scorers_get_their_options_object(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(MATH.replace("answer_feild: answer", "answer_field: gold"))
    lp = load_protocol(p)
    assert lp.scorer_options == MathOptions(answer_field="gold")
    assert get_scorer(lp).answer_field == "gold"  # type: ignore[attr-defined]
    p.write_text(MATH.replace("name: math", "name: exact").replace("answer_feild: answer", "articles: false")
                 .replace("rule: gsm8k", "rule: raw"))
    lp = load_protocol(p)
    assert lp.scorer_options == ExactOptions(articles=False)
    scorer = get_scorer(lp)
    # articles kept: "the 5" != "5"; case still folded
    from evalgate.scoring.base import SampleToScore

    got = scorer.score([SampleToScore({"answer": "5"}, "The 5", "", "stop"),
                        SampleToScore({"answer": "abc"}, "ABC", "", "stop")])
    assert [r.status for r in got] == ["wrong", "correct"]


def test_every_scorer_registers_a_strict_documented_options_model() -> None:
    assert set(SCORERS) == {"dpo_preference", "exact", "humaneval", "ifeval", "judge", "judge_preference", "math",
                            "multiple_choice", "refusal", "reward_model", "reward_preference"}
    for name, entry in SCORERS.items():
        model = entry.options_model()
        assert issubclass(model, ScorerOptions), name
        assert model.model_config["extra"] == "forbid", name
        for field, info in model.model_fields.items():
            # a field's docstring says its default, or that it has none
            assert info.description and ("Default:" in info.description or "Required." in info.description), \
                f"{name}.{field} lacks a docstring"


def test_every_bad_option_is_named_with_its_own_line(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(MATH.replace("name: math", "name: exact").replace("answer_feild: answer",
                                                                    "answer_feild: answer\n    casee: true"))
    with pytest.raises(BadInput) as err:
        load_protocol(p)
    assert f"{p}:9: scorer.options.answer_feild: unknown key 'answer_feild'; did you mean 'answer_field'?" in str(
        err.value)
    assert f"{p}:10: scorer.options.casee: unknown key 'casee'; did you mean 'case'?" in str(err.value)


GSM = """\
name: stops
version: "1"
prompt:
  template: "Q: {{ question }}"
  chat_template: none
sampling:
  max_tokens: 64
  stop: ["\\n\\nQ:"]
scorer:
  name: math
extraction:
  rule: gsm8k
"""


@pytest.mark.parametrize(("old", "new", "message"), [
    # issue 13 point 14: freeze accepted this; only run refused it
    ("stop: [", 'stop: [".", ', r":8: sampling.stop: stop sequences \['.'\] can occur inside a numeric answer"),
    ("stop: [", 'stop: [",", ', r":8: sampling.stop: stop sequences \[','\]"),
    # the neighbour: an extraction rule that yields no answer for the math scorer, refused only by run as well
    ("rule: gsm8k", "rule: code", r":12: extraction.rule: extraction rule 'code' does not yield an answer"),
])
def test_protocols_the_scorer_cannot_score_are_refused_by_freeze(tmp_path: Path, home: Path, old: str, new: str,
                                                                 message: str) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GSM.replace(old, new))
    r = CliRunner().invoke(main, ["protocol", "freeze", str(p)])
    assert r.exit_code == 2, r.output
    assert "(scorer math)" in r.output
    with pytest.raises(BadInput, match=str(p) + message):
        load_protocol(p)
    assert not p.with_name("p.yaml.lock").exists()


def test_a_math_protocol_with_safe_stops_still_freezes(tmp_path: Path, home: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GSM)
    r = CliRunner().invoke(main, ["protocol", "freeze", str(p)])
    assert r.exit_code == 0, r.output
    assert get_scorer(load_protocol(p)).name == "math"


def test_fewshot_exemplar_the_template_cannot_render_is_refused_at_load(tmp_path: Path) -> None:
    # the neighbour in prompts: exemplars are rendered by the item template, and one that lacks a field the
    # template uses failed at run time ("prompt template (few-shot): 'question' is undefined"), after freeze
    (tmp_path / "shots.jsonl").write_text('{"question": "1+1?", "target": "2"}\n{"q": "2+2?", "target": "4"}\n')
    p = tmp_path / "p.yaml"
    p.write_text(GSM.replace("  chat_template: none", "  chat_template: none\n  fewshot_file: shots.jsonl"))
    with pytest.raises(BadInput, match=r"prompt.fewshot_file: exemplar 2 of shots.jsonl cannot be rendered by "
                                       r"prompt.template \('question' is undefined; its fields: q, target\)"):
        load_protocol(p)
