"""Behaviour metrics per sample and aggregated, on hand-made completions."""

import pytest

from evalgate.scoring import aggregate_behavior, repetition_ratio, sample_behavior
from evalgate.scoring.behavior import is_refusal


def test_repetition_ratio_hand_computed() -> None:
    assert repetition_ratio("one two three four five six") == 0.0  # 3 distinct 4-grams
    assert repetition_ratio("one two three") == 0.0  # fewer than 4 words: no 4-gram
    # "a b a b a b", bigrams: ab ba ab ba ab -> 2 distinct of 5 -> 1 - 2/5
    assert repetition_ratio("a b a b a b", n=2) == pytest.approx(0.6)
    # one word repeated 10 times: 7 identical 4-grams -> 1 - 1/7
    assert repetition_ratio("go " * 10) == pytest.approx(6 / 7)


@pytest.mark.parametrize(
    "text",
    [
        "I cannot help with that request.",
        "I can't assist with this.",
        "I'm sorry, but I can't provide that.",
        "I\u2019m sorry, but that is not something I can do.",  # curly apostrophe
        "As an AI, I do not have opinions.",
        "As a language model I cannot browse.",
        "Sure. I am unable to solve this without more data.",  # a sentence within the opening
        "I apologize, but I won't write that.",
        "\n\nI won't do that.",
        # adversary: written so that the patterns used to miss them
        "**I cannot** help with that.",  # markdown
        "> Sorry, but no.",  # a quote block
        "\u201cI cannot help with that.\u201d",  # typographic double quotes
        "\u200bI can\u200bnot help with that.",  # zero-width spaces
        "I  cannot help with that.",  # two spaces
        "\uff29 \uff43\uff41\uff4e\uff4e\uff4f\uff54 help.",  # fullwidth letters
        "Here you go.\n\n- I won't do that.",  # a bullet opening a sentence
    ],
)
def test_refusals(text: str) -> None:
    assert is_refusal(text)


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 12.",
        "We cannot divide by zero, so x = 3.",  # "cannot" without "I"
        "As an aside, the sum is 7.",  # "As an" without "AI"
        "Mail carriers sorry, but ...",  # "sorry, but" not opening a sentence
        "x" * 250 + ". I cannot continue.",  # past the opening 200 characters
        "",
    ],
)
def test_not_refusals(text: str) -> None:
    assert not is_refusal(text)


def test_sample_behavior_fields_and_format_rule() -> None:
    b = sample_behavior("Reasoning... so \\boxed{5}", 7, "stop", rule="boxed")
    assert b == {"completion_tokens": 7, "truncated": False, "repetition": 0.0, "empty": False,
                 "refusal": False, "format_ok": True}
    assert sample_behavior("the answer is five", 4, "stop", rule="boxed")["format_ok"] is False
    assert sample_behavior("#### 42", 3, "stop", rule="gsm8k")["format_ok"] is True
    assert sample_behavior("no digits here", 3, "stop", rule="last_number")["format_ok"] is False
    cut = sample_behavior("   ", 64, "length")
    assert cut["truncated"] and cut["empty"] and not cut["format_ok"]  # old 3-argument call: rule raw


def test_aggregate_behavior_means() -> None:
    recs = [sample_behavior("\\boxed{1}", 10, "stop", rule="boxed"),
            sample_behavior("I'm sorry, but no.", 20, "stop", rule="boxed"),
            sample_behavior("", 30, "length", rule="boxed"),
            sample_behavior("a b a b a b", 40, "stop", rule="boxed")]
    agg = aggregate_behavior(recs)
    assert agg["mean_completion_tokens"] == 25.0
    assert agg["truncation_rate"] == 0.25
    assert agg["empty_rate"] == 0.25
    assert agg["refusal_rate"] == 0.25
    assert agg["format_rate"] == 0.25
    # "a b a b a b": 4-grams abab baba abab -> 1 - 2/3; the others have fewer than 4 words
    assert agg["mean_repetition"] == pytest.approx((1 - 2 / 3) / 4, abs=1e-6)


def test_aggregate_behavior_reads_records_stored_before_refusal_and_format() -> None:
    old = {"completion_tokens": 4, "truncated": True, "repetition": 0.0, "empty": False}
    new = sample_behavior("I cannot.", 2, "stop")
    agg = aggregate_behavior([old, new])
    assert agg["truncation_rate"] == 0.5
    assert agg["refusal_rate"] == 1.0  # only the new record measured refusal
    assert aggregate_behavior([old]).keys() == {"mean_completion_tokens", "truncation_rate",
                                                "mean_repetition", "empty_rate"}
    assert aggregate_behavior([]) == {}
