"""MMLU-Pro (Wang et al. 2024, "MMLU-Pro: A More Robust and Challenging Multi-Task Language Understanding
Benchmark"): 12,032 multiple-choice questions in 14 categories with up to ten options, read from the test set's
JSONL (one record a line with the dataset's own fields: ``question_id``, ``question``, ``options``, ``answer``,
``answer_index``, ``cot_content``, ``category``, ``src``); the gold answer is the option's letter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.fileio import iter_jsonl
from evalgate.datasets.base import Dataset, Items

LETTERS = "ABCDEFGHIJ"
"""MMLU-Pro's option letters, in option order (at most ten options)."""


def _problem(rec: Any) -> str | None:
    """Why ``rec`` is not an MMLU-Pro record, or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    missing = [k for k in ("question_id", "question", "options", "answer", "answer_index") if k not in rec]
    if missing:
        return f"no {missing[0]!r} field"
    options = rec["options"]
    if not isinstance(options, list) or not 1 <= len(options) <= len(LETTERS) or not all(
            isinstance(o, str) for o in options):
        return f"'options' must be a list of 1 to {len(LETTERS)} strings"
    index = rec["answer_index"]
    if not isinstance(index, int) or not 0 <= index < len(options):
        return f"answer_index {index!r} does not name one of its {len(options)} options"
    if rec["answer"] != LETTERS[index]:
        return f"answer {rec['answer']!r} is not the letter of answer_index {index} ({LETTERS[index]!r})"
    return None


def mmlu_pro_items(path: Path) -> tuple[Items, bytes]:
    """Items of an MMLU-Pro JSONL file: ``id`` (``mmlu-pro/test/<question_id>``), ``question``, ``options`` (the
    option texts, in order; trailing ``N/A`` padding, which MMLU-Pro's ``preprocess`` drops, dropped too),
    ``answer`` (the gold letter, ``A``-``J``), ``answer_index`` (0-based), ``category``, ``src`` and
    ``cot_content``.

    Raises:
        BadInput: file missing, a line not JSON, a record without the fields above, options that are not 1 to 10
            strings, an ``answer_index`` outside them, an ``answer`` that is not its letter, or a repeated
            ``question_id`` (naming the line).
    """
    if not path.is_file():
        raise BadInput(f"MMLU-Pro file {path} not found; pass --from PATH to the test set's JSONL")
    raw = path.read_bytes()
    items, seen = [], set()
    for line, rec in iter_jsonl(raw, path, "is this the MMLU-Pro test.jsonl?"):
        if isinstance(rec, dict) and isinstance(rec.get("options"), list):  # padding to ten options
            kept = list(rec["options"])
            while kept and kept[-1] == "N/A":
                kept.pop()
            rec = {**rec, "options": kept}
        problem = _problem(rec)
        if problem:
            raise BadInput(f"{path}:{line}: not an MMLU-Pro record: {problem}")
        iid = f"mmlu-pro/test/{rec['question_id']}"
        if iid in seen:
            raise BadInput(f"{path}:{line}: question_id {rec['question_id']} appears twice; ids must be unique")
        seen.add(iid)
        items.append({"id": iid, "question": rec["question"], "options": rec["options"], "answer": rec["answer"],
                      "answer_index": rec["answer_index"], "category": rec.get("category"),
                      "src": rec.get("src"), "cot_content": rec.get("cot_content", "")})
    return items, raw


DATASET = Dataset("mmlu-pro", "MMLU-Pro test set, 12,032 multiple-choice questions (Wang et al. 2024); --from "
                  "test.jsonl", mmlu_pro_items,
                  {"source": "TIGER-AI-Lab/MMLU-Pro (the test split as JSONL)", "license": "Apache-2.0",
                   "gold": "the option letter in 'answer' (checked against 'answer_index')"})
