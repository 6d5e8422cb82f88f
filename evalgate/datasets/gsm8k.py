"""GSM8K (Cobbe et al. 2021, "Training Verifiers to Solve Math Word Problems"): grade-school math word problems,
read from the dataset's own ``test.jsonl``; the gold answer is the number after the solution's final ``####``."""

from __future__ import annotations

from pathlib import Path

from evalgate.core.errors import BadInput
from evalgate.core.fileio import iter_jsonl
from evalgate.datasets.base import Dataset, Items
from evalgate.splits.gold import gsm8k_gold


def gsm8k_items(path: Path) -> tuple[Items, bytes]:
    """Items of a GSM8K JSONL file: ``id`` (``gsm8k/test/<0-based line index>``), ``question``, ``answer``
    (the gold number) and ``solution`` (the reference solution text).

    Raises:
        BadInput: file missing, a line not JSON, or a record without ``question`` or a ``#### <number>``
        answer.
    """
    if not path.is_file():
        raise BadInput(f"GSM8K file {path} not found; pass --from PATH to the dataset's test.jsonl")
    raw = path.read_bytes()
    items = []
    for n, (line, rec) in enumerate(iter_jsonl(raw, path, "is this the GSM8K test.jsonl?")):
        if not isinstance(rec, dict) or "question" not in rec or "answer" not in rec:
            raise BadInput(f"{path}:{line}: not a GSM8K record (needs 'question' and 'answer')")
        try:
            gold = gsm8k_gold(rec["answer"])
        except ValueError as e:
            raise BadInput(f"{path}:{line}: {e}; GSM8K answers end with '#### <number>'") from e
        items.append({"id": f"gsm8k/test/{n}", "question": rec["question"], "answer": gold,
                      "solution": rec["answer"]})
    return items, raw


DATASET = Dataset("gsm8k", "GSM8K test set, grade-school math (Cobbe et al. 2021); --from test.jsonl",
                  gsm8k_items, {"source": "openai/grade-school-math, grade_school_math/data/test.jsonl",
                                "license": "MIT", "gold": "number after '####', thousands separators removed"})
