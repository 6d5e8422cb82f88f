"""MMLU-Pro's answer extraction (rules ``mmlu_pro`` and ``mmlu_pro_l1``): hand-made completions, then the 12,032
real Meta-Llama-3-8B completions MMLU-Pro published with the letter its own script read (``pred``)."""

import collections
import json
import re
import zipfile

import pytest

from evalgate.scoring.extract import extract_answer
from tests.conftest import SHARED_DATA

OUTPUTS = SHARED_DATA / "mmlu-pro" / "model_outputs_Meta-Llama-3-8B_5shots.zip"


def _mmlu_pro_verbatim(text: str) -> str | None:
    """MMLU-Pro's extract_answer / extract_again / extract_final (evaluate_from_local.py at f418b11), verbatim."""
    match = re.search(r"answer is \(?([A-J])\)?", text)
    if match:
        return match.group(1)
    match = re.search(r".*[aA]nswer:\s*([A-J])", text)
    if match:
        return match.group(1)
    match = re.search(r"\b[A-J]\b(?!.*\b[A-J]\b)", text, re.DOTALL)
    return match.group(0) if match else None


@pytest.mark.parametrize(("text", "letter"), [
    ("so the answer is (B).", "B"),
    ("The answer is C", "C"),
    ("the answer is (A). No wait, the answer is (B).", "A"),  # re.search: the first statement decides
    ("The answer is (K). Answer: D", "D"),  # K is no letter of MMLU-Pro's: the next pattern reads
    ("Answer: A\nmore\nAnswer: B", "A"),  # the first line holding "answer:" ...
    ("Answer: A, or rather answer: C", "C"),  # ... its last one (.* is greedy)
    ("answer:\n  E", "E"),  # \s* crosses the line end
    ("x answer: Answer: B", "B"),  # overlapping matches: the last start on the line
    ("Answer: C.\nanswer: D or answer: E", "C"),
    ("It must be G because of H.", "H"),  # the last standalone letter
    ("So it is C, I believe", "I"),  # "I" is a standalone letter too: MMLU-Pro's quirk, kept
    ("ABC DEF", None),  # no standalone letter
    ("the answer is (a)", None),  # lower case is no letter there
])
def test_mmlu_pro_rule_reads_as_mmlu_pro_does(text: str, letter: str | None) -> None:
    assert extract_answer(text, "mmlu_pro") == letter
    assert _mmlu_pro_verbatim(text) == letter  # the expectation is MMLU-Pro's own reading


def test_the_first_pattern_alone() -> None:
    assert extract_answer("so the answer is (J)", "mmlu_pro_l1") == "J"
    assert extract_answer("Answer: D", "mmlu_pro_l1") is None
    assert extract_answer("It must be G.", "mmlu_pro_l1") is None


@pytest.fixture(scope="module")
def llama3_outputs() -> list[dict]:
    if not OUTPUTS.is_file():
        pytest.skip(f"{OUTPUTS} is absent (../shared/data holds it on developer machines and CI)")
    with zipfile.ZipFile(OUTPUTS) as z:
        (name,) = z.namelist()
        return json.loads(z.read(name))


def test_llama3_8b_outputs_read_as_the_published_preds(llama3_outputs: list[dict]) -> None:
    """PROVENANCE.md: 12,032 completions, 1,290 with pred null, accuracy of pred 0.3418 (4,113 / 12,032). The
    script that made them read "answer is (X)" only (MMLU-Pro's evaluate_from_local.py until May 2024, level l1 of
    its compute_accuracy.py): ``mmlu_pro_l1`` reads every item's pred, and an unread letter counted wrong gives
    the published accuracy."""
    rows = llama3_outputs
    assert len(rows) == 12032 and sum(r["pred"] is None for r in rows) == 1290
    l1 = [extract_answer(r["generated_text"], "mmlu_pro_l1") for r in rows]
    assert all(got == r["pred"] for got, r in zip(l1, rows, strict=True))
    accuracy = sum(got == r["answer"] for got, r in zip(l1, rows, strict=True)) / len(rows)
    assert accuracy == pytest.approx(0.3418, abs=0.002)


def test_the_full_chain_disagrees_only_where_the_file_read_nothing(llama3_outputs: list[dict]) -> None:
    """The current chain (``mmlu_pro``) agrees with pred on every item pred has a letter for; every disagreement
    is one kind: pred null, and the later patterns ("answer: X", the last standalone letter) read a letter. The
    figures (docs/SCORING.md): agreement 11,683 / 12,032 = 97.1 %, accuracy 0.3442."""
    kinds: collections.Counter[str] = collections.Counter()
    correct = 0
    for r in llama3_outputs:
        got = extract_answer(r["generated_text"], "mmlu_pro")
        correct += got == r["answer"]
        if got != r["pred"]:
            assert r["pred"] is None and got is not None, r["question_id"]
            kinds["read where pred is null"] += 1
    assert set(kinds) == {"read where pred is null"}
    for r in [r for r in llama3_outputs if r["pred"] is None][::10]:  # where the later patterns read: as MMLU-Pro's
        assert extract_answer(r["generated_text"], "mmlu_pro") == _mmlu_pro_verbatim(r["generated_text"])
    agreement = 1 - kinds["read where pred is null"] / len(llama3_outputs)
    assert 0.95 < agreement < 0.995  # the published preds were not made by the full chain
    assert correct / len(llama3_outputs) > 0.3418  # a letter read on a null pred can only add correct items
