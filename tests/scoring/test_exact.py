"""Normalised exact match: NFKC, case, punctuation, articles as whole words only, whitespace."""

import pytest

from evalgate.scoring import exact_match, normalize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("theory of an anthem", "theory of anthem"),  # "the" inside "theory", "an" inside "anthem" survive
        ("a banana and an apple", "banana and apple"),  # "an" inside "banana" and "and" survive
        ("Athens", "athens"),  # "a" at the start of a word is not an article
        ("the", ""),
        ("  Paris,\tFrance!\n", "paris france"),
        ("U.S.A.", "usa"),
        ("ｆｕｌｌｗｉｄｔｈ １２", "fullwidth 12"),  # NFKC folds fullwidth forms
        ("ﬁnal", "final"),  # NFKC splits the fi ligature
        ("x²", "x2"),  # NFKC: superscript two is 2
        ("Café", "café"),  # composed and decomposed é agree after NFKC
        ("Cafe\u0301", "café"),
        ("\u00abParis\u00bb", "paris"),  # guillemets are unicode punctuation, not in string.punctuation
        ("\u00bfQu\u00e9?", "qué"),
        ("Tokyo\u3002", "tokyo"),  # ideographic full stop
        ("don\u2019t", "dont"),  # curly apostrophe, like "don't"
        ("1990\u20132000", "19902000"),  # en dash removed like "-"
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_articles_removed_only_as_whole_words() -> None:
    assert exact_match("the answer", "Answer")
    assert exact_match("An apple", "apple")
    assert not exact_match("theanswer", "answer")
    assert not exact_match("anapple", "apple")
    assert not exact_match("banana", "bnn")
    assert not exact_match("Thermal", "rmal")


def test_punctuation_whitespace_case() -> None:
    assert exact_match("  42. ", "42")
    assert exact_match("New   York", "new york")
    assert exact_match("don't", "dont")
    assert not exact_match("4 2", "42")  # whitespace is collapsed, never removed


def test_each_step_can_be_turned_off() -> None:
    assert not exact_match("Paris", "paris", case=False)
    assert not exact_match("Paris!", "Paris", punctuation=False)
    assert not exact_match("the cat", "cat", articles=False)
    assert exact_match("ｃａｔ", "cat", case=False, punctuation=False, articles=False)  # NFKC always applies


# Issue 14, point 4: gold "A" (a multiple-choice letter) is an article, so SQuAD normalisation empties it and
# "The" or "an" used to be scored correct.
@pytest.mark.parametrize(("prediction", "gold", "equal"), [
    ("The", "A", False), ("an", "A", False), ("", "A", False), ("the a", "A", False),
    ("A", "A", True), ("a", "A", True), ("(A)", "A", True), ("A.", "A", True), ("B", "A", False),
    ("an", "An", True), ("the", "An", False),  # the gold is the word itself
    ("The", "The", True), ("a", "The", False),
    ("?", "?", True), ("!", "?", False), ("...", "?", False),  # a gold made only of punctuation
    ("\u3002", "\u3002", True), ("", "\u3002", False),  # ideographic full stop, other script
    ("the", "the cat", False), ("a", "", False), ("", "", False), ("  ", " ", False),  # empty never matches
    ("the cat", "a cat", True),  # a gold that keeps words still drops articles as before
])
def test_gold_never_normalises_to_empty_and_empty_prediction_never_matches(prediction: str, gold: str,
                                                                           equal: bool) -> None:
    assert exact_match(prediction, gold) is equal


# Issue 28, point 16: with the last_number rule (protocols/addition.yaml), punctuation removal took the minus sign
# and the decimal point away, so "64" was correct for gold -64 and "1075" for 10.75, while "18.0" was wrong for 18.
# Numbers are compared as numbers.
@pytest.mark.parametrize(("prediction", "gold", "equal"), [
    ("64", "-64", False), ("-64", "-64", True), ("1075", "10.75", False), ("10.75", "10.75", True),
    ("18.0", "18", True), ("18.00", "18", True), ("18", "18.5", False),
    ("1000", "1,000", True), ("1,000", "1000", True), ("100", "1,000", False),
    ("5", "+5", True), ("-5", "+5", False), ("0.5", ".5", True), ("5", "5.", True), ("-.5", "-0.5", True),
    ("1000", "1e3", True), ("1500", "1.5E3", True), ("0.001", "1e-3", True), ("1e3", "13", False),
    ("\u221264", "-64", True),  # the minus sign U+2212
    ("\uff16\uff14", "64", True),  # fullwidth digits
    ("12 apples", "12", False),  # not one number: normalised text as before
])
def test_numbers_are_compared_as_numbers(prediction: str, gold: str, equal: bool) -> None:
    assert exact_match(prediction, gold) is equal


# Adversary, third pass: a number with a sign, a point, a currency symbol or a bracket around or after it was no
# plain number, so it went to the text comparison, which removes punctuation: '10.75.' equalled gold 1075, '(-64)'
# and '-64!' gold 64, '$10.75' gold 1075, '10.7.5' gold 1075 (each True before). A gold answer that is one plain
# number now equals only a prediction that is one number of the same value, once the symbols and punctuation written
# around it (a sentence's point, '$', '%', brackets, quotes, markdown) are taken off.
@pytest.mark.parametrize(("prediction", "gold", "equal"), [
    ("10.75.", "1075", False), ("$10.75", "1075", False), ("(-64)", "64", False), ("-64!", "64", False),
    ("= -64", "64", False), ("[-3]", "3", False), ('"-3"', "3", False), ("10.7.5", "1075", False),
    ("1,0,0,0", "1000", False), ("1-0-7-5", "1075", False),
    # the same wrappers around the right value still equal it
    ("10.75.", "10.75", True), ("$10.75", "10.75", True), ("(-64)", "-64", True), ("-64!", "-64", True),
    ("**5**", "5", True), ("50%", "50", True), ("$-5", "-5", True), ("-$5", "-5", True), ("#18", "18", True),
    ("−64.", "-64", True), ("(1,000).", "1000", True),
])
def test_a_number_gold_equals_only_a_number_of_its_value_whatever_wraps_it(prediction: str, gold: str,
                                                                          equal: bool) -> None:
    assert exact_match(prediction, gold) is equal


@pytest.mark.parametrize(("completion", "gold", "status"), [
    ("The sum is 64.", "-64", "wrong"), ("The sum is -64.", "-64", "correct"),
    ("It costs $1075", "10.75", "wrong"), ("18.0", "18", "correct"), ("It is 1,000.", "1000", "correct"),
])
def test_exact_scorer_with_last_number_rule(tmp_path, completion: str, gold: str, status: str) -> None:
    """The combination protocols/addition.yaml ships (exact + last_number), through the scorer."""
    from evalgate.protocol.spec import load_protocol
    from evalgate.scoring import SampleToScore, get_scorer
    from tests.conftest import REPO

    scorer = get_scorer(load_protocol(REPO / "protocols" / "addition.yaml"))
    [res] = scorer.score([SampleToScore({"id": "a", "answer": gold}, completion, "", "stop")])
    assert res.status == status
