"""Answer extraction kinds of issue 14: numbers glued to letters or written in other scripts (point 1), run-on
few-shot answers (point 2), LaTeX/SI thousands separators (point 5). Values are the issue's, or worked out by
hand from the text."""

import pytest

from evalgate.scoring import extract_answer
from evalgate.scoring.extract import last_number, plain_numbers


@pytest.mark.parametrize(("text", "number"), [
    ("3a5", "5"),  # the case: used to give 3
    ("x=5", "5"), ("is5", "5"), ("answer:5", "5"), ("a1b2", "2"), ("n_7", "7"),
    ("\u7b54\u6848\u662f72\u3002", "72"),  # Chinese "the answer is 72." with an ideographic full stop
    ("\u0627\u0644\u062c\u0648\u0627\u0628 \u0667\u0662", "72"),  # Arabic words and Arabic-Indic digits 72
    ("\u041e\u0442\u0432\u0435\u0442:42", "42"),  # Cyrillic "Answer:" glued to 42
    ("\u7b54\u3048\uff1a\uff17\uff12", "72"),  # fullwidth digits
    ("\u2212" + "5 degrees", "-5"),  # the minus sign U+2212
    ("Using v2 of the method, the result is 7", "7"),  # v2 in a word is not the answer when a later one exists
    ("10-5=5", "5"), ("5,7", "7"), ("She pays $1,234.50.", "1234.50"), ("1.5e3 m", "1.5e3"),
    ("no digits here", None),
])
def test_last_number_reads_numbers_glued_to_letters_and_in_any_script(text: str, number: str | None) -> None:
    assert last_number(text) == number


RUN_ON = "... so she has 72 left. #### 72\n\nQuestion: A farmer ... \nAnswer: ... #### 5"


@pytest.mark.parametrize(("text", "answer"), [
    (RUN_ON, "72"),  # the case: used to give 5
    (RUN_ON.replace("\n\nQuestion:", "\nQuestion:"), "72"),  # a single newline, which the 8-shot stop misses
    ("The answer is 72.\n\nQuestion: A farmer has 3 cows. How many?\nAnswer: The answer is 5.", "72"),
    ("The answer is 72.\nQ: A farmer has 3 cows.\nA: The answer is 5.", "72"),  # Wei et al. "Q:" format
    ("So the answer is $\\boxed{72}$.\n\nProblem: Find x.\nSolution: $\\boxed{5}$", "72"),
    ("She has 72 left.\nQuestion: A farmer has 5 cows.", "72"),  # no marker: last number before the new exercise
    ("Sure!\nQuestion: Janet has 16 eggs.\nAnswer: 16 - 3 - 4 = 9, 9 * 2 = 18. The answer is 18.", "18"),
    ("#### 72\nThe answer is 5", "72"),  # GSM8K's marker ends the answer
    ("No new exercise: the answer is 12.", "12"),
])
def test_gsm8k_rule_answers_the_question_asked_not_a_run_on_exercise(text: str, answer: str) -> None:
    assert extract_answer(text, "gsm8k") == answer


@pytest.mark.parametrize(("text", "answer"), [
    ("The answer is 1{,}000{,}000.", "1000000"),  # the case: used to give 1
    ("The answer is 12\\,345", "12345"),  # the case: used to give 12
    ("#### 12\\,345", "12345"), ("The answer is $\\boxed{1{,}234}$.", "1234"),
    ("The answer is 12\u2009345.", "12345"),  # thin space (SI)
    ("The answer is 12\u202f345.", "12345"),  # narrow no-break space
    ("The answer is 12\u00a0345.", "12345"),  # no-break space
    ("The answer is 1\\;000\\;000.5.", "1000000.5"), ("The answer is 12~345.", "12345"),
    ("The answer is 1\u066c234", "1234"),  # Arabic thousands separator
    ("The answer is 5 100", "5"),  # a plain space never joins numbers (not 5100)
    ("The answer is 12\\,34", "12"),  # not groups of three: not a separator (not 1234)
])
def test_latex_and_si_thousands_separators(text: str, answer: str) -> None:
    assert extract_answer(text, "gsm8k") == answer


def test_plain_numbers_rewrites_only_numbers() -> None:
    assert plain_numbers("x\\,dx and 1\\,000 and \u0661\u0662") == "x\\,dx and 1,000 and 12"
