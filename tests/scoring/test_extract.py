"""Answer extraction kinds of issue 14: numbers glued to letters or written in other scripts (point 1), run-on
few-shot answers (point 2), LaTeX/SI thousands separators (point 5). Values are the issue's, or worked out by
hand from the text."""

import pytest

from evalgate.scoring import extract_answer
from evalgate.scoring.extract import last_number, plain_numbers
from evalgate.store import Store


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
    ("The answer is 5 100", "5 100"),  # a plain space never joins numbers (not 5100): two numbers, as written
    ("The answer is 12\\,34", "12\\,34"),  # not groups of three: not a separator (not 1234): two numbers
])
def test_latex_and_si_thousands_separators(text: str, answer: str) -> None:
    assert extract_answer(text, "gsm8k") == answer


def test_plain_numbers_rewrites_only_numbers() -> None:
    assert plain_numbers("x\\,dx and 1\\,000 and \u0661\u0662") == "x\\,dx and 1,000 and 12"


# -- reasoning blocks (issue 28, point 2; allenai/olmo-eval#348, huggingface/lighteval#869) ------------------------
# The draft's "#### 12" outranks the final "The answer is" when the block is not removed.
R1 = ("<think>\nLet me try: 3 * 4 = 12.\n#### 12\nWait, I forgot the 6 more.\n</think>\nShe has 12 + 6 = 18.\n"
      "The answer is 18.")


@pytest.mark.parametrize(("text", "formats", "answer", "closed"), [
    (R1, ["think"], "18", True),  # the report: the draft's 12 used to be the answer
    ("<thinking>#### 12</thinking>\n#### 18", ["thinking"], "18", True),
    ("<reasoning>#### 12</reasoning> The answer is 18.", ["reasoning"], "18", True),
    ("\u25c1think\u25b7#### 12\u25c1/think\u25b7#### 18", ["kimi"], "18", True),  # Kimi-VL-Thinking
    ("[THINK]#### 12[/THINK]#### 18", ["magistral"], "18", True),  # Magistral
    ("<|channel|>analysis<|message|>#### 12<|end|><|start|>assistant<|channel|>final<|message|>#### 18<|return|>",
     ["harmony"], "18", True),  # gpt-oss
    ("#### 12\n</think>\n#### 18", ["think"], "18", True),  # the prompt opened the block (DeepSeek-R1's template)
    ("<think>a</think>The answer is <think>b #### 12</think>18.", ["think"], "18", True),  # every block removed
    ("<think>\n#### 12\nhmm, let me check", ["think"], None, False),  # reasoning only, never closed
    ("The answer is 18.\n<think>#### 12", ["think"], "18", False),  # text before an unclosed block is kept
    ("<|channel|>analysis<|message|>#### 12", ["harmony"], None, False),
    ("#### 18", ["think"], "18", True),  # no block: the whole text
    (R1, [], "12", True),  # stripping turned off: the whole text, as before
    ("<thinking>\n#### 12\n</thinking>\nThe answer is 18.", ["think"], "12", True),  # a format not listed stays
    # issue 42, item 8 (raullenchai/Rapid-MLX#1778): after a closed block, a tag the answer quotes in Markdown code
    # is text, not a new block (it was read as an unclosed block: no_answer)
    ("<think>#### 12</think>Wrap the draft in `<think>` tags.\n#### 18", ["think"], "18", True),
    ("<think>#### 12</think>The `</think>` tag ends it.\n#### 18", ["think"], "18", True),  # a quoted closing tag
    ("<think>#### 12</think>Use ``<think>`` as in `a`.\n#### 18", ["think"], "18", True),  # a double-tick span
    ("<think>#### 12</think>\n```xml\n<think>draft\n```\n#### 18", ["think"], "18", True),  # a fenced block
    ("<think>#### 12</think>\n~~~\n<think>\n~~~\n#### 18", ["think"], "18", True),  # a tilde fence
    ("Quote `<think>` here.\n#### 18", ["think"], "18", True),  # no block at all: the quoted tag is text
    ("<thinking>#### 12</thinking>Say `<thinking>`.\n#### 18", ["thinking"], "18", True),  # other tag formats
    ("[THINK]#### 12[/THINK]Say `[THINK]`.\n#### 18", ["magistral"], "18", True),
    ("<think>a `tick</think>#### 18 `<think>`", ["think"], "18", True),  # a tick in the block pairs with nothing
    ("#### 12\n</think>`</think>` ends it\n#### 18", ["think"], "18", True),  # prompt-opened, then quoted
    ("<think>#### 12</think>The answer: <think>#### 13", ["think"], None, False),  # an unquoted tag still opens
])
def test_reasoning_blocks_are_removed_before_extraction(text: str, formats: list[str], answer: str | None,
                                                        closed: bool) -> None:
    from evalgate.scoring.reasoning import strip_reasoning

    r = strip_reasoning(text, formats)
    assert r.closed is closed
    assert extract_answer(r.answer, "gsm8k") == answer


def test_a_prompt_that_opens_the_block_makes_an_unclosed_completion_a_draft() -> None:
    from evalgate.scoring.reasoning import prompt_opens, strip_reasoning

    opened = prompt_opens("<|User|>2+2?<|Assistant|><think>\n", ["think"])
    assert opened == "think"
    assert not strip_reasoning("2 + 2 = 4\n#### 4", ["think"], opened).closed
    assert prompt_opens("<|im_start|>assistant\n", ["think"]) is None


def _reasoning_run(tmp_path, records: list[dict], reasoning: dict | None = None, template: str = "{{ question }}"):
    """A frozen math/gsm8k protocol run on recorded completions (replay backend, no model)."""
    import json

    import yaml

    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.protocol.freeze import freeze
    from evalgate.runner.evaluate import RunOptions, evaluate
    from evalgate.splits import write_split

    doc = {"name": "r", "version": "1", "prompt": {"template": template, "chat_template": "none"},
           "scorer": {"name": "math"}, "extraction": {"rule": "gsm8k"}, "sampling": {"max_tokens": 64}}
    if reasoning is not None:
        doc["reasoning"] = reasoning
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    freeze(tmp_path / "r.yaml", Store)
    write_split("r-split", "dev", [{"id": r["item_id"], "question": "q", "answer": "18"} for r in records],
                {"source": "test"})
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({**r, "turn": 0}) + "\n" for r in records))
    (tmp_path / "model").mkdir()
    ckpt = Checkpoint(path=tmp_path / "model", kind="hf", digest="0" * 64, model_dir=tmp_path / "model")
    return evaluate(tmp_path / "r.yaml", ckpt, "r-split",
                    RunOptions(backend="replay", backend_options={"file": str(replay)}, progress=False), store=Store())


@pytest.mark.usefixtures("memory_store")  # a run: the store in memory (no file, lock or process here)
def test_a_run_scores_the_answer_after_the_reasoning_and_counts_unclosed_blocks(tmp_path) -> None:
    from evalgate.store import Store

    doc = _reasoning_run(tmp_path, [
        {"item_id": "closed", "text": R1},
        {"item_id": "draft", "text": "<think>\n#### 18\nhmm"},  # the draft holds the right number: still no answer
        {"item_id": "cut", "text": "<think>\n#### 18\nhmm", "finish_reason": "length"},
        {"item_id": "plain", "text": "#### 18"},
    ])
    status = {s.item_id: (s.status, s.extracted) for s in Store().samples(doc["run_id"])}
    assert status == {"closed": ("correct", "18"), "draft": ("no_answer", None), "cut": ("truncated", None),
                      "plain": ("correct", "18")}
    assert doc["counts"]["reasoning"] == {"strip": ["think"], "with_reasoning": 3, "unclosed": 2}


@pytest.mark.usefixtures("memory_store")  # a run: the store in memory (no file, lock or process here)
def test_a_prompt_ending_in_an_open_block(tmp_path) -> None:
    from evalgate.store import Store

    doc = _reasoning_run(tmp_path, [{"item_id": "opened", "text": "3 * 4 = 12\n#### 12\n</think>\n#### 18"},
                                    {"item_id": "never", "text": "3 * 4 = 12\n#### 18"}],
                         template="{{ question }}\n<think>\n")
    status = {s.item_id: s.status for s in Store().samples(doc["run_id"])}
    assert status == {"opened": "correct", "never": "no_answer"}


@pytest.mark.usefixtures("memory_store")  # a run: the store in memory (no file, lock or process here)
def test_a_protocol_that_turns_stripping_off_scores_the_whole_completion(tmp_path) -> None:
    from evalgate.store import Store

    off = _reasoning_run(tmp_path, [{"item_id": "closed", "text": R1}], reasoning={"strip": []})
    assert [s.extracted for s in Store().samples(off["run_id"])] == ["12"]
    assert off["counts"]["reasoning"] == {"strip": [], "with_reasoning": 0, "unclosed": 0}
