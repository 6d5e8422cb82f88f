"""Importers for math reasoning benchmarks: GSM8K (Cobbe et al. 2021) and MATH-500 (Lightman et al. 2023).

Each reads the dataset's own JSONL file (commands take ``--from PATH``; nothing is downloaded), parses the
gold answer from the dataset's own format into the item's ``answer`` field, and writes the four tiered splits
``<name>-smoke|dev|public|private`` with ``splits.import_tiered`` (the same deterministic partition as
HumanEval; the private tier is encrypted by ``write_split``).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from evalgate.errors import BadInput
from evalgate.splits import import_tiered

_GSM8K_GOLD = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")


def gsm8k_gold(solution: str) -> str:
    """The gold answer of a GSM8K record: the number after its final ``####``, thousands separators removed.

    Args:
        solution: the record's ``answer`` text, e.g. ``"... she makes $18.\\n#### 1,018"``.

    Returns:
        The number as text, e.g. ``"1018"``.

    Raises:
        ValueError: no ``#### <number>`` at the end of the text.
    """
    m = _GSM8K_GOLD.search(solution)
    if not m:
        raise ValueError(f"no '#### <number>' at the end of {solution[-60:]!r}")
    return m.group(1).replace(",", "")


def _records(path: Path, what: str) -> tuple[list[tuple[int, dict[str, Any]]], bytes]:
    if not path.is_file():
        raise BadInput(f"{what} file {path} not found; pass --from PATH to the dataset's test.jsonl")
    raw = path.read_bytes()
    out = []
    for i, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append((i, json.loads(line)))
            except json.JSONDecodeError as e:
                raise BadInput(f"{path}:{i}: not valid JSON ({e.msg}); is this the {what} test.jsonl?") from e
    return out, raw


def gsm8k_items(path: Path) -> tuple[list[dict[str, Any]], bytes]:
    """Items of a GSM8K JSONL file: ``id`` (``gsm8k/test/<0-based line index>``), ``question``, ``answer``
    (the gold number) and ``solution`` (the reference solution text).

    Raises:
        BadInput: file missing, a line not JSON, or a record without ``question`` or a ``#### <number>``
        answer.
    """
    records, raw = _records(path, "GSM8K")
    items = []
    for n, (line, rec) in enumerate(records):
        if not isinstance(rec, dict) or "question" not in rec or "answer" not in rec:
            raise BadInput(f"{path}:{line}: not a GSM8K record (needs 'question' and 'answer')")
        try:
            gold = gsm8k_gold(rec["answer"])
        except ValueError as e:
            raise BadInput(f"{path}:{line}: {e}; GSM8K answers end with '#### <number>'") from e
        items.append({"id": f"gsm8k/test/{n}", "question": rec["question"], "answer": gold,
                      "solution": rec["answer"]})
    return items, raw


def math500_items(path: Path) -> tuple[list[dict[str, Any]], bytes]:
    """Items of a MATH-500 JSONL file: ``id`` (its ``unique_id``, e.g. ``test/precalculus/807.json``),
    ``problem``, ``answer`` (the gold LaTeX answer as given), ``solution``, ``subject`` and ``level``.

    Raises:
        BadInput: file missing, a line not JSON, a record without ``problem``, ``answer`` or ``unique_id``, or
        an empty answer.
    """
    records, raw = _records(path, "MATH-500")
    items = []
    for line, rec in records:
        if not isinstance(rec, dict) or not all(k in rec for k in ("problem", "answer", "unique_id")):
            raise BadInput(f"{path}:{line}: not a MATH-500 record (needs 'problem', 'answer', 'unique_id')")
        if not str(rec["answer"]).strip():
            raise BadInput(f"{path}:{line}: empty gold answer")
        items.append({"id": rec["unique_id"], "problem": rec["problem"], "answer": str(rec["answer"]).strip(),
                      "solution": rec.get("solution", ""), "subject": rec.get("subject"),
                      "level": rec.get("level")})
    return items, raw


_SOURCES = {
    "gsm8k": (gsm8k_items, {"source": "openai/grade-school-math, grade_school_math/data/test.jsonl",
                            "license": "MIT", "gold": "number after '####', thousands separators removed"}),
    "math500": (math500_items, {"source": "openai/prm800k, prm800k/math_splits/test.jsonl (MATH-500)",
                                "license": "MIT", "gold": "the record's 'answer' field (LaTeX)"}),
}


def import_math_dataset(name: str, source: Path, directory: Path | None = None) -> list[Path]:
    """Import GSM8K or MATH-500 as four tiered splits ``<name>-smoke|dev|public|private``.

    Args:
        name: ``gsm8k`` or ``math500``.
        source: the dataset's JSONL file.
        directory: splits directory (default ``splits_dir()``).

    Returns:
        The four manifest paths.

    Raises:
        BadInput: unknown dataset or a bad file (see ``gsm8k_items`` / ``math500_items``).
    """
    if name not in _SOURCES:
        raise BadInput(f"unknown math dataset {name!r}; known: {', '.join(_SOURCES)}")
    reader, prov = _SOURCES[name]
    items, raw = reader(Path(source))
    provenance = {**prov, "file": Path(source).name, "file_sha256": hashlib.sha256(raw).hexdigest()}
    return import_tiered(name, items, provenance, directory)
