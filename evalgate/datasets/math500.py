"""MATH-500 (Lightman et al. 2023, "Let's Verify Step by Step"): the 500-problem subset of MATH (Hendrycks et al.
2021), read from PRM800K's ``math_splits/test.jsonl``; the gold answer is the record's ``answer`` (LaTeX)."""

from __future__ import annotations

from pathlib import Path

from evalgate.core.errors import BadInput
from evalgate.core.fileio import iter_jsonl
from evalgate.datasets.base import Dataset, Items


def math500_items(path: Path) -> tuple[Items, bytes]:
    """Items of a MATH-500 JSONL file: ``id`` (its ``unique_id``, e.g. ``test/precalculus/807.json``),
    ``problem``, ``answer`` (the gold LaTeX answer as given), ``solution``, ``subject`` and ``level``.

    Raises:
        BadInput: file missing, a line not JSON, a record without ``problem``, ``answer`` or ``unique_id``, or
        an empty answer.
    """
    if not path.is_file():
        raise BadInput(f"MATH-500 file {path} not found; pass --from PATH to the dataset's test.jsonl")
    raw = path.read_bytes()
    items = []
    for line, rec in iter_jsonl(raw, path, "is this the MATH-500 test.jsonl?"):
        if not isinstance(rec, dict) or not all(k in rec for k in ("problem", "answer", "unique_id")):
            raise BadInput(f"{path}:{line}: not a MATH-500 record (needs 'problem', 'answer', 'unique_id')")
        if not str(rec["answer"]).strip():
            raise BadInput(f"{path}:{line}: empty gold answer")
        items.append({"id": rec["unique_id"], "problem": rec["problem"], "answer": str(rec["answer"]).strip(),
                      "solution": rec.get("solution", ""), "subject": rec.get("subject"),
                      "level": rec.get("level")})
    return items, raw


DATASET = Dataset("math500", "MATH-500, competition math (Lightman et al. 2023); --from test.jsonl",
                  math500_items, {"source": "openai/prm800k, prm800k/math_splits/test.jsonl (MATH-500)",
                                  "license": "MIT", "gold": "the record's 'answer' field (LaTeX)"})
