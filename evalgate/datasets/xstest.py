"""XSTest (Röttger et al. 2024, "XSTest: A Test Suite for Identifying Exaggerated Safety Behaviours in Large Language
Models", NAACL): 250 safe prompts a model should answer and 200 unsafe ones it should refuse, read from the
repository's ``xstest_prompts.csv``. Imported as two benchmarks, one per label, each scored by the ``refusal``
scorer: ``xstest-safe`` (``expect: comply``; 1 - pass@1 is the over-refusal rate) and ``xstest-unsafe``
(``expect: refuse``; pass@1 is the refusal rate)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Literal

from evalgate.core.errors import BadInput
from evalgate.core.fileio import decode_utf8
from evalgate.datasets.base import Dataset, Items

COLUMNS = ("id", "prompt", "type", "label", "focus", "note")
"""The columns of ``xstest_prompts.csv``."""


def xstest_records(path: Path) -> tuple[list[dict[str, str]], bytes]:
    """Every row of ``xstest_prompts.csv`` as a dict of its columns, and the file's bytes.

    Raises:
        BadInput: file missing or not UTF-8, columns other than ``COLUMNS``, an empty prompt, a label other than
            ``safe`` or ``unsafe``, or an id seen twice.
    """
    if not path.is_file():
        raise BadInput(f"XSTest file {path} not found; pass --from PATH to XSTest's xstest_prompts.csv")
    raw = path.read_bytes()
    reader = csv.DictReader(io.StringIO(decode_utf8(raw, path), newline=""))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise BadInput(f"{path}: columns {reader.fieldnames} are not XSTest's ({', '.join(COLUMNS)}); is this "
                       "xstest_prompts.csv?")
    rows, seen = [], set()
    for row in reader:
        where = f"{path}:{reader.line_num}"
        if row["label"] not in ("safe", "unsafe"):
            raise BadInput(f"{where}: label {row['label']!r} is neither 'safe' nor 'unsafe'")
        if not (row["prompt"] or "").strip():
            raise BadInput(f"{where}: empty prompt")
        if row["id"] in seen:
            raise BadInput(f"{where}: id {row['id']!r} seen twice")
        seen.add(row["id"])
        rows.append(row)
    return rows, raw


def _reader(label: Literal["safe", "unsafe"]):  # type: ignore[no-untyped-def]
    def read(path: Path) -> tuple[Items, bytes]:
        rows, raw = xstest_records(path)
        items = [{"id": f"xstest/{r['id']}", "prompt": r["prompt"], "type": r["type"], "label": r["label"]}
                 for r in rows if r["label"] == label]
        if not items:
            raise BadInput(f"{path}: no {label} prompts")
        return items, raw
    read.__doc__ = (f"Items of ``xstest_prompts.csv`` labelled {label}: ``id`` (``xstest/<id>``), ``prompt``, "
                    "``type``, ``label``. The file's ``focus`` and ``note`` are left out: a safe prompt and its unsafe "
                    "contrast share them (\"money laundering\"), which would make one benchmark's private split a "
                    "copy of the other's (``splits.twins``). Raises BadInput as ``xstest_records``.")
    return read


_PROVENANCE = {"source": "paul-rottger/exaggerated-safety, xstest_prompts.csv", "license": "CC BY 4.0"}

SAFE = Dataset("xstest-safe", "XSTest's 250 safe prompts a model should answer (over-refusal; Röttger et al. 2024); "
               "--from xstest_prompts.csv", _reader("safe"),
               {**_PROVENANCE, "gold": "label safe: the model should comply (refusal scorer, expect: comply)"})
UNSAFE = Dataset("xstest-unsafe", "XSTest's 200 unsafe prompts a model should refuse (Röttger et al. 2024); --from "
                 "xstest_prompts.csv", _reader("unsafe"),
                 {**_PROVENANCE, "gold": "label unsafe: the model should refuse (refusal scorer, expect: refuse)"})
