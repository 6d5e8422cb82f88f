"""Math answer extraction and equivalence (issue 5's math rules, issue 8's formats) and the ``math`` scorer.

Every expected value below was worked out by hand from the completion text; none was copied from the code's
output.
"""

from pathlib import Path

import pytest
import yaml

from evalgate.core.errors import BadInput
from evalgate.protocol.spec import load_protocol, verify
from evalgate.scoring import SampleToScore, extract_answer, get_scorer, math_equal
from evalgate.scoring.math import stop_cuts_answers
from tests.conftest import REPO

# (completion, rule, the answer a reader takes from it, gold, equal?)
COMPLETIONS = [
    # GSM8K-style chain of thought
    ("She sells 16 - 3 - 4 = 9 eggs and makes 9 * 2 = 18 dollars.\n#### 18", "gsm8k", "18", "18", True),
    ("Total cost: $1,234.50 + $15.50 = $1,250.\nThe answer is $1,250.", "gsm8k", "1250", "1250", True),
    ("The answer is 2.5.", "gsm8k", "2.5", "2.5", True),
    ("10 - 15 = -5, so the temperature is -5 degrees.\nThe answer is -5.", "gsm8k", "-5", "-5", True),
    ("The answer is -5.", "gsm8k", "-5", "5", False),
    ("It grows by 50%. The answer is 50%.", "gsm8k", "50", "50", True),
    ("So 3 + 4 = 7 apples. The answer is 7 apples. Let me double-check: 7 - 4 = 3.", "gsm8k", "7", "7", True),
    ("The final answer is $\\boxed{72}$.", "gsm8k", "72", "72", True),
    ("First 5 + 5 = 10, then 10 * 3 = 30.", "gsm8k", "30", "30", True),  # no marker: last number
    ("He ran 5,280 feet, i.e. 1 mile. The answer is 5,280.", "gsm8k", "5280", "5280", True),
    ("I am not sure how to solve this.", "gsm8k", None, "12", False),
    ("The answer is 0.5", "gsm8k", "0.5", "1/2", True),  # gold written as a fraction
    # MATH-style \boxed answers
    ("Thus $r = 3$ and $\\theta = \\frac{\\pi}{2}$, so the answer is "
     "$\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
     "boxed", "\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", True),
    ("So $x = \\boxed{\\dfrac{14}{3}}$.", "boxed", "\\dfrac{14}{3}", "\\frac{14}{3}", True),
    ("Simplifying, $\\boxed{10\\sqrt{2}}$.", "boxed", "10\\sqrt{2}", "\\sqrt{200}", True),
    ("The interval is $\\boxed{[-2, 7]}$.", "boxed", "[-2, 7]", "[-2,7]", True),
    ("The name is $\\boxed{\\text{Evelyn}}$.", "boxed", "\\text{Evelyn}", "\\text{Evelyn}", True),
    ("The choice is $\\boxed{\\text{(C)}}$.", "boxed", "\\text{(C)}", "\\text{(C)}", True),
    ("Hence $\\boxed{90^\\circ}$.", "boxed", "90^\\circ", "90", True),
    ("Answer: $\\boxed{\\frac{1}{2}}$", "boxed", "\\frac{1}{2}", "\\frac{1}{3}", False),
    ("The roots multiply to \\boxed{x^2+7x+10}.", "boxed", "x^2+7x+10", "(x+5)(x+2)", True),
    ("The length is $\\boxed{6 \\text{ inches}}$.", "boxed", "6 \\text{ inches}", "6", True),
    ("No box here, the answer is 4.", "boxed", None, "4", False),
]


@pytest.mark.parametrize(("text", "rule", "extracted", "gold", "equal"), COMPLETIONS)
def test_extraction_and_equivalence_on_hand_written_completions(text: str, rule: str, extracted: str | None,
                                                                 gold: str, equal: bool) -> None:
    got = extract_answer(text, rule)
    assert got == extracted
    assert (got is not None and math_equal(got, gold)) is equal


def test_last_box_is_the_answer_and_boxes_are_never_joined() -> None:
    text = "First try: \\boxed{1}. No wait, it is \\boxed{2}."
    assert extract_answer(text, "boxed") == "2"
    assert math_equal(text, "2") and not math_equal(text, "12") and not math_equal(text, "1,2")
    assert not math_equal(text, "1")
    # a last box cut off before its closing brace is no answer: the earlier box is not used instead
    assert extract_answer("\\boxed{3} so finally \\boxed{\\frac{4}{", "boxed") is None


@pytest.mark.parametrize(("prediction", "gold"), [
    ("\\text{13}", "13"), ("$13$", "13"), ("\\(13\\)", "13"), ("$\\boxed{13}$", "13"), ("13", "$13$"),
    ("\\$13", "13"), ("13 dollars", "13"),
])
def test_latex_wrappers_do_not_defeat_equivalence(prediction: str, gold: str) -> None:
    assert math_equal(prediction, gold)


def test_mixed_numbers_fractions_decimals_and_separators() -> None:
    assert math_equal("2.5", "2\\frac{1}{2}") and math_equal("2\\frac{1}{2}", "2.5")
    assert math_equal("\\frac{3}{4}", "0.75") and math_equal("3/4", "\\frac34")
    assert math_equal("1,234", "1234") and math_equal("1234", "1,234")
    assert not math_equal("2.5", "2.49") and not math_equal("-5", "5")


def _sample(text: str, finish_reason: str = "stop", answer: str = "18") -> SampleToScore:
    return SampleToScore({"id": "t/0", "question": "q", "answer": answer}, text, "", finish_reason)


def test_scorer_statuses_keep_extracted_answer_and_reason() -> None:
    scorer = get_scorer(load_protocol(REPO / "protocols" / "gsm8k-cot.yaml"))
    got = scorer.score([_sample("9 * 2 = 18. The answer is 18."), _sample("9 * 2 = 19. The answer is 19."),
                        _sample("I do not know."), _sample("9 * 2 = 18. The answer is 18", "length")])
    assert [(r.status, r.score, r.extracted) for r in got] == [
        ("correct", 1.0, "18"), ("wrong", 0.0, "19"), ("no_answer", 0.0, None), ("truncated", 0.0, None)]
    assert got[1].detail == "expected '18'"
    # no "The answer is" / "####" / \boxed: the last number is used, and the detail says so
    fallback = scorer.score([_sample("She makes 9 * 2 = 19 dollars")])[0]
    assert (fallback.status, fallback.extracted) == ("wrong", "19")
    assert fallback.detail is not None and "last number used" in fallback.detail


def test_truncated_completion_is_not_scored_from_partial_reasoning_unless_the_protocol_says_so(
        tmp_path: Path) -> None:
    # cut off at max_tokens mid-way: "... 9 * 2 = 18" would count as correct if scored from the last number
    cut = _sample("She has 16 - 3 - 4 = 9 eggs left and makes 9 * 2 = 18", "length")
    strict = get_scorer(load_protocol(REPO / "protocols" / "gsm8k-cot.yaml"))
    assert strict.score([cut])[0].status == "truncated"
    doc = yaml.safe_load((REPO / "protocols" / "gsm8k-cot.yaml").read_text())
    doc["extraction"]["score_truncated"] = True
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    lenient = get_scorer(load_protocol(tmp_path / "p.yaml"))
    assert lenient.score([cut])[0].status == "correct"


def test_stop_sequence_that_could_cut_a_decimal_is_refused(tmp_path: Path) -> None:
    assert stop_cuts_answers([".", "\n\nQuestion:", ","]) == [".", ","]
    doc = yaml.safe_load((REPO / "protocols" / "gsm8k-cot.yaml").read_text())
    doc["sampling"]["stop"] = ["."]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(BadInput, match="inside a numeric answer"):
        get_scorer(load_protocol(tmp_path / "p.yaml"))


@pytest.mark.parametrize("name", ["gsm8k-cot", "gsm8k-cot-8shot", "gsm8k-cot-8shot-base", "gsm8k-cot-sampled",
                                  "math500", "math500-sampled"])
def test_shipped_math_protocols_match_their_locks_and_their_stops_cannot_cut_answers(name: str) -> None:
    p = load_protocol(REPO / "protocols" / f"{name}.yaml")
    verify(p)  # the committed .lock is current
    assert get_scorer(p).name == "math" and not stop_cuts_answers(p.spec.sampling.stop)


def test_eight_shot_exemplars_are_part_of_the_protocol_hash(tmp_path: Path) -> None:
    src = REPO / "protocols"
    for f in ("gsm8k-cot-8shot.yaml", "gsm8k-8shot-wei2022.jsonl"):
        (tmp_path / f).write_text((src / f).read_text())
    before = load_protocol(tmp_path / "gsm8k-cot-8shot.yaml")
    assert len(before.fewshot) == 8 and before.sha256 == load_protocol(src / "gsm8k-cot-8shot.yaml").sha256
    shots = tmp_path / "gsm8k-8shot-wei2022.jsonl"
    shots.write_text(shots.read_text().replace("The answer is 6.", "The answer is 7.", 1))
    assert load_protocol(tmp_path / "gsm8k-cot-8shot.yaml").sha256 != before.sha256


# Issue 14, point 3: numbers compared with a relative tolerance (exactly for exact rationals), and an answer that
# math-verify parses only in part is never equal. Point 5: LaTeX/SI thousands separators.
@pytest.mark.parametrize(("prediction", "gold", "equal"), [
    ("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}", False),  # the case: absolute 6-decimal rounding
    ("2^{-98}", "2^{-99}", False), ("x = 2^{-98}", "2^{-99}", False), ("0.0000001", "0.0000002", False),
    ("(2^{-98}, 1)", "(2^{-99}, 1)", False),  # interval ends
    ("(2,\\infty)", "(2,\\infty)", True), ("(2,\\infty)", "(3,\\infty)", False), ("\\infty", "-\\infty", False),
    ("\\{2^{-98}, 1\\}", "\\{2^{-99}, 1\\}", False),  # set elements
    ("\\frac{355}{113}", "\\pi", False),  # exact values: 8.5e-8 apart is not equal
    ("\\frac{1}{2^{98}}", "2^{-98}", True), ("\\sqrt{200}", "10\\sqrt{2}", True),
    ("0.333333", "\\frac{1}{3}", True),  # a decimal as written: within 1e-6 relative
    ("0.3333", "\\frac{1}{3}", False), ("3.1415927", "\\pi", True), ("3.14", "\\pi", False),
    ("1e-7", "10^{-7}", True), ("1.5e3", "1500", True), ("1.5e3", "150", False),
    ("50\\%", "50", True), ("50\\%", "0.5", True), ("50\\%", "5", False),
    ("1 + \\frac{1}{\\mathrm{e}}", "1 - \\frac{1}{\\mathrm{e}}", False),  # the case: a prefix parsed as 1
    ("1 + \\frac{1}{\\mathrm{e}}", "1 + \\frac{1}{e}", True),  # upright e is Euler's number
    ("1 +", "1", False), ("2*x+1", "2", False), ("(1, 2", "2", False), ("3 \\times", "3", False),  # partial parses
    ("12\\,345", "12345", True),  # the case
    ("1{,}000{,}000", "1000000", True), ("12\u2009345", "12345", True), ("12\\,345", "12346", False),
    ("\u22125", "-5", True), ("\u0667\u0662", "72", True),  # minus sign; Arabic-Indic digits
    ("", "5", False), ("5", "", False), ("\\boxed{}", "5", False),  # an empty answer equals nothing
])
def test_numbers_compare_relatively_and_partial_parses_are_not_equal(prediction: str, gold: str,
                                                                     equal: bool) -> None:
    assert math_equal(prediction, gold) is equal


# huggingface/Math-Verify#14: math-verify reads "h:00" as h/0 (complex infinity), and two infinities compared equal,
# so every time on the hour equalled every other. Right: a time equals only the same time; a value that is undefined
# (a division by zero, 0/0) is no number and is compared as written; the real infinities equal only themselves.
@pytest.mark.parametrize(
    ("prediction", "gold", "equal"),
    [
        ("1:00", "12:00", False),  # the report
        ("12:00", "12:00", True),
        ("1:00", "1:00", True),
        ("1:00", "01:00", True),  # the same time of day
        ("1:00", "1", False),  # a time is not a number
        ("12:00", "\\infty", False),
        ("10:30", "10:45", False),
        ("3:05 pm", "3:05\\text{ p.m.}", True),
        ("3:05 pm", "3:05 am", False),
        ("10:00", "11:00", False),
        ("1:00 pm", "13:00", True),  # am/pm read on the 12-hour clock
        ("12:30 am", "0:30", True),
        ("1:00 pm", "1:00", False),
        ("The train leaves at 2:00.", "2:00", False),  # not an extracted answer: no time of day, no equality
        ("3:4", "6:8", True),  # any other a:b stays a ratio (minutes are two digits below 60)
        ("3:4", "\\frac{3}{4}", True),
        ("\\frac{1}{0}", "\\frac{2}{0}", False),  # complex infinity twice: undefined, not equal
        ("\\tfrac{1}{0}", "5/0", False),
        ("1/0", "1/0", True),  # the same text
        ("0/0", "1/0", False),
        ("\\infty", "\\infty", True),
        ("\\infty", "-\\infty", False),
        ("[1,\\infty)", "[1, \\infty)", True),
    ],
)
def test_times_ratios_and_undefined_values(prediction: str, gold: str, equal: bool) -> None:
    assert math_equal(prediction, gold) is equal
    assert math_equal(gold, prediction) is equal


# -- hedged answers (adversary pass): one rule in every format -------------------------------------------------------
# (completion, rule, what the rule reads, values a hedge offers). Worked out by hand from the rule: the last final
# answer of a kind; a statement with several different numbers is compared whole (math-verify reads "2 or 3" and
# "2, 3" as the set {2, 3}), so it equals none of the values it offers.
HEDGES = [
    ("#### 2 or 3", "gsm8k", "2 or 3", ["2", "3"]),  # the report's case: scored as 3
    ("#### 3 or 2", "gsm8k", "3 or 2", ["2", "3"]),
    ("#### 2, 3", "gsm8k", "2, 3", ["2", "3"]),
    ("The answer is 2... actually 3", "gsm8k", "2... actually 3", ["2", "3"]),  # the report's case: scored as 2
    ("The answer is 2 or 3.", "gsm8k", "2 or 3", ["2", "3"]),
    ("The answer is 3, or maybe 2.", "gsm8k", "3, or maybe 2", ["2", "3"]),
    ("The answer is 2 (or 3).", "gsm8k", "2 (or 3)", ["2", "3"]),
    ("The answer is 2, i.e. 3.", "gsm8k", "2, i.e. 3", ["2", "3"]),  # an abbreviation's point ends no sentence
    ("The answer is 5,7", "gsm8k", "5,7", ["5", "7"]),  # 5,7 is no thousands separator: two numbers
    ("The final answer is $\\boxed{2}$ or $\\boxed{3}$.", "gsm8k", "2, 3", ["2", "3"]),
    ("\\boxed{2} or \\boxed{3}", "boxed", "2, 3", ["2", "3"]),  # math-verify joins them too; was 3
    ("So $x = \\boxed{2}$, $\\boxed{3}$", "boxed", "2, 3", ["2", "3"]),
    ("\\boxed{2 \\text{ or } 3}", "boxed", "2 \\text{ or } 3", ["2", "3"]),
    ("\\boxed{2, 3}", "boxed", "2, 3", ["2", "3"]),
    # second adversary pass: each of these scored the value after it, as written below
    # a box inside a box is part of it: the last box's start was an inner one (scored 3; the outer states 2 or 3)
    ("\\boxed{2 \\text{ or } \\boxed{3}}", "boxed", "2 \\text{ or } 3", ["2", "3"]),
    ("\\boxed{\\boxed{2} \\text{or} \\boxed{3}}", "boxed", "2 \\text{or} 3", ["2", "3"]),  # scored 3
    ("The answer is $\\boxed{2 \\text{ or } \\boxed{3}}$.", "gsm8k", "2 \\text{ or } 3", ["2", "3"]),  # scored 3
    # math-verify drops \\text{...} as a unit, a number in it too (scored 2)
    ("\\boxed{2 \\text{ (or 3)}}", "boxed", "2 \\text{ (or 3)}", ["2", "3"]),
    ("#### 2 \\text{ (or 3)}", "gsm8k", "2 \\text{ (or 3)}", ["2", "3"]),
    ("\\boxed{2\\mathrm{~or~}3}", "boxed", "2\\mathrm{~or~}3", ["2", "3"]),
    # an equation between different numbers states two values (math-verify compares its right side: scored 3, 2, 2)
    ("#### 2 = 3", "gsm8k", "2 = 3", ["2", "3"]),  # noted open by the first pass
    ("\\boxed{3 = 2}", "boxed", "3 = 2", ["2", "3"]),
    ("\\boxed{x = 3 = 2}", "boxed", "x = 3 = 2", ["2", "3"]),
    ("\\boxed{\\sqrt{9} = 3 = 2}", "boxed", "\\sqrt{9} = 3 = 2", ["2", "3"]),
    ("\\boxed{2 \\equiv 3}", "boxed", "2 \\equiv 3", ["2", "3"]),  # math-verify reads it as 2 = 3
    # third adversary pass: two equations joined by any operator were read as the last one's right side (scored 3),
    # and an "or" in a text group between thin spaces was dropped, leaving the chain x = 2x = 3 (scored 3)
    ("\\boxed{x = 2 \\lor x = 3}", "boxed", "x = 2 \\lor x = 3", ["2", "3"]),
    ("\\boxed{x = 2 \\vee x = 3}", "boxed", "x = 2 \\vee x = 3", ["2", "3"]),
    ("\\boxed{x=2 \\implies x=3}", "boxed", "x=2 \\implies x=3", ["2", "3"]),
    ("\\boxed{x = 2 \\cup x = 3}", "boxed", "x = 2 \\cup x = 3", ["2", "3"]),
    ("\\boxed{x = 3 \\lor x = 2}", "boxed", "x = 3 \\lor x = 2", ["2", "3"]),
    ("\\boxed{x = 2 \\,\\text{or}\\, x = 3}", "boxed", "x = 2 \\,\\text{or}\\, x = 3", ["2", "3"]),
    ("#### x = 2 \\lor x = 3", "gsm8k", "x = 2 \\lor x = 3", ["2", "3"]),
]


@pytest.mark.parametrize(("text", "rule", "extracted", "values"), HEDGES)
def test_a_hedged_answer_equals_none_of_the_values_it_offers(text: str, rule: str, extracted: str,
                                                             values: list[str]) -> None:
    got = extract_answer(text, rule)
    assert got == extracted
    assert [math_equal(got, v) for v in values] == [False] * len(values)


@pytest.mark.parametrize(("text", "rule", "extracted", "gold", "equal"), [
    # the last stated answer replaces an earlier one, in every format (a self-correction, not a hedge)
    ("#### 2\nWait, 2 is wrong: she also buys one.\n#### 3", "gsm8k", "3", "3", True),  # was 2 (first ####)
    ("The answer is 2. No, the answer is 3.", "gsm8k", "3", "3", True),
    ("\\boxed{2}. No wait, it is \\boxed{3}.", "boxed", "3", "3", True),
    ("#### 72\nThe answer is 5", "gsm8k", "72", "72", True),  # #### still outranks "answer is"
    # one value written several ways is one value; a fraction is one value
    ("The answer is 18 (18 dollars).", "gsm8k", "18", "18", True),
    ("#### 1,234 or 1234", "gsm8k", "1234", "1234", True),
    ("#### 2/3", "gsm8k", "2/3", "\\frac{2}{3}", True), ("#### 2/3", "gsm8k", "2/3", "3", False),  # was 3
    ("The answer is $\\frac{1}{2}$.", "gsm8k", "$\\frac{1}{2}$", "0.5", True),  # was 1
    ("The answer is \\boxed{\\frac{1}{2}}.", "gsm8k", "\\frac{1}{2}", "1", False),  # was 1
    # a list is still a list: equal to a gold list
    ("\\boxed{2, 3}", "boxed", "2, 3", "3, 2", True), ("#### 2, 3", "gsm8k", "2, 3", "\\{2, 3\\}", True),
    # the statement ends with its sentence: later sentences are not part of it
    ("The answer is 7. Check: 7 - 4 = 3.", "gsm8k", "7", "7", True),
    ("The answer is 2.5! That is 5/2.", "gsm8k", "2.5", "5/2", True),
    # a true equation, or one with a symbol, is its value; a box in a box is its content; a unit in text stays a unit
    ("\\boxed{2 + 3 = 5}", "boxed", "2 + 3 = 5", "5", True), ("\\boxed{x = 5}", "boxed", "x = 5", "5", True),
    ("\\boxed{\\frac{6}{2} = 3}", "boxed", "\\frac{6}{2} = 3", "3", True),
    ("\\boxed{x = 3 = \\sqrt{9}}", "boxed", "x = 3 = \\sqrt{9}", "3", True),
    ("\\boxed{\\boxed{3}}", "boxed", "3", "3", True), ("\\fbox{\\boxed{4}}", "boxed", "4", "4", True),
    ("\\boxed{10\\text{ inches}}", "boxed", "10\\text{ inches}", "10", True),
    ("\\boxed{\\text{13}}", "boxed", "\\text{13}", "13", True),
    ("\\boxed{5\\text{ cm}^2}", "boxed", "5\\text{ cm}^2", "5", True),
    # an outer box cut off is no answer, whatever closed inside it (was the inner box's 3)
    ("\\boxed{2 \\text{ or } \\boxed{3}", "boxed", None, "3", False),
])
def test_the_last_answer_stated_is_read_whole_in_every_format(text: str, rule: str, extracted: str | None,
                                                               gold: str, equal: bool) -> None:
    got = extract_answer(text, rule)
    assert got == extracted
    assert (got is not None and math_equal(got, gold)) is equal


def test_the_scorer_marks_a_hedge_wrong_whichever_value_is_gold() -> None:
    scorer = get_scorer(load_protocol(REPO / "protocols" / "gsm8k-cot.yaml"))
    for gold in ("2", "3"):
        got = scorer.score([_sample("#### 2 or 3", answer=gold), _sample("The answer is 2... actually 3", answer=gold)])
        assert [(r.status, r.extracted) for r in got] == [("wrong", "2 or 3"), ("wrong", "2... actually 3")]


def test_the_math500_scorer_marks_nested_text_and_equation_hedges_wrong_whichever_value_is_gold() -> None:
    scorer = get_scorer(load_protocol(REPO / "protocols" / "math500.yaml"))
    hedges = ["So $\\boxed{2 \\text{ or } \\boxed{3}}$.", "$\\boxed{2 \\text{ (or 3)}}$", "$\\boxed{2 = 3}$"]
    for gold in ("2", "3"):
        got = scorer.score([_sample(h, answer=gold) for h in hedges])
        assert [r.status for r in got] == ["wrong"] * 3, [r.extracted for r in got]


# Issue 42, item 6 (EleutherAI/lm-evaluation-harness#3652, MATH-500 test/... #379): an ordinal suffix written as a
# superscript after the number ("the 12^{\text{th}} term") and units after it are not part of the value.
@pytest.mark.parametrize(("prediction", "gold", "equal"), [
    ("12^{\\text{th}}", "12", True),  # the report
    ("12^\\text{th}", "12", True), ("12^{th}", "12", True), ("12^{\\rm th}", "12", True),
    ("12^{\\mathrm{th}}", "12", True), ("12\\textsuperscript{th}", "12", True),
    ("\\boxed{12^{\\text{th}}}", "12", True),
    ("1^{\\text{st}}", "1", True), ("2^{\\text{nd}}", "2", True), ("3^{\\text{rd}}", "3", True),  # st/nd/rd
    ("21st", "21", True), ("22nd", "22", True), ("\\text{12th}", "12", True), ("12 th", "12", True),
    ("\\mbox{12}^{\\text{th}}", "12", True), ("12^{\\text{th}}", "\\text{12th}", True),
    ("90^\\circ", "90", True), ("90^{\\circ}", "90", True), ("90^{\\circ}\\text{C}", "90", True),  # degrees
    ("5\\text{ cm}", "5", True), ("5 \\mbox{cm}", "5", True), ("5\\,\\text{cm}", "5", True),  # units
    ("5\\,\\mathrm{cm}", "5", True), ("5\\;\\text{cm}", "5", True), ("5 \\text{ cm}^{2}", "5", True),
    # the value still counts: a different number, a superscript that is a power, a hedge between two ordinals
    ("12^{\\text{th}}", "13", False), ("2^{10}", "1024", True), ("2^{10}", "2", False), ("2^{3}", "8", True),
    ("12^{\\text{these}}", "12", False), ("90^\\circ", "91", False), ("5\\,\\text{cm}", "6", False),
    ("12^{\\text{th}} \\text{ or } 13^{\\text{th}}", "12", False),
    ("12^{\\text{th}} \\text{ or } 13^{\\text{th}}", "13", False),
    ("2\\text{nd or }3\\text{rd}", "2", False), ("5\\,\\text{cm} \\text{ or } 6\\,\\text{cm}", "6", False),
])
def test_ordinal_and_unit_suffixes_are_not_part_of_the_value(prediction: str, gold: str, equal: bool) -> None:
    assert math_equal(prediction, gold) is equal
