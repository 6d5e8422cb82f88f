"""RewardBench's preference pairs (Lambert et al. 2024, "RewardBench: Evaluating Reward Models for Language
Modeling", arXiv:2403.13787), read from a file in its format: one record per pair with ``prompt``, ``chosen``,
``rejected`` and ``subset`` (and optionally ``id``, ``chosen_model``, ``rejected_model``), as JSON Lines, a JSON
list or Parquet (the ``filtered`` split of ``allenai/reward-bench`` saved to disk; nothing is downloaded).

Each pair becomes ``{"id", "prompt", "chosen", "rejected", "category", "section"}``: ``category`` the subset and
``section`` its RewardBench section (``SECTIONS``, the ``SUBSET_MAPPING`` of allenai/reward-bench
``rewardbench/constants.py``); a subset RewardBench does not list is its own section, named after it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.fileio import decode_utf8
from evalgate.core.version import install_hint
from evalgate.datasets.base import Dataset, Items

SECTIONS: dict[str, tuple[str, ...]] = {
    "Chat": ("alpacaeval-easy", "alpacaeval-length", "alpacaeval-hard", "mt-bench-easy", "mt-bench-med"),
    "Chat Hard": ("mt-bench-hard", "llmbar-natural", "llmbar-adver-neighbor", "llmbar-adver-GPTInst",
                  "llmbar-adver-GPTOut", "llmbar-adver-manual"),
    "Safety": ("refusals-dangerous", "refusals-offensive", "xstest-should-refuse", "xstest-should-respond",
               "donotanswer"),
    "Reasoning": ("math-prm", "hep-cpp", "hep-go", "hep-java", "hep-js", "hep-python", "hep-rust"),
}
"""RewardBench's sections and their subsets (``SUBSET_MAPPING``)."""

EXAMPLE_COUNTS: dict[str, int] = {
    "alpacaeval-easy": 100, "alpacaeval-length": 95, "alpacaeval-hard": 95, "mt-bench-easy": 28, "mt-bench-med": 40,
    "mt-bench-hard": 37, "llmbar-natural": 100, "llmbar-adver-neighbor": 134, "llmbar-adver-GPTInst": 92,
    "llmbar-adver-GPTOut": 47, "llmbar-adver-manual": 46, "refusals-dangerous": 100, "refusals-offensive": 100,
    "xstest-should-refuse": 154, "xstest-should-respond": 250, "donotanswer": 136, "math-prm": 984, "hep-cpp": 164,
    "hep-go": 164, "hep-java": 164, "hep-js": 164, "hep-python": 164, "hep-rust": 164,
}
"""RewardBench's subset weights (``EXAMPLE_COUNTS``): each subset's number of pairs, except ``math-prm``, 447 pairs
weighted as 984 so that math weighs as much as the six code subsets together."""

SECTION_OF = {subset: section for section, subsets in SECTIONS.items() for subset in subsets}

REQUIRED = ("prompt", "chosen", "rejected", "subset")


def _records(path: Path) -> tuple[list[dict[str, Any]], bytes]:
    if not path.is_file():
        raise BadInput(f"RewardBench file {path} not found; pass --from PATH to a .jsonl, .json or .parquet file of "
                       "(prompt, chosen, rejected, subset) records")
    raw = path.read_bytes()
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise BadInput(f"{path}: reading Parquet needs pyarrow ({install_hint('data')}), or save the "
                           "pairs as JSON Lines") from e
        return pq.read_table(path).to_pylist(), raw
    text = decode_utf8(raw, path)
    if path.suffix == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}: not JSON ({e.msg} at line {e.lineno})") from e
        if not isinstance(doc, list):
            raise BadInput(f"{path}: a .json file must hold a list of pair records")
        return doc, raw
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{n}: not a JSON record ({e.msg})") from e
    return rows, raw


def rewardbench_pairs(path: Path) -> tuple[Items, bytes]:
    """The pairs of a RewardBench-format file (see the module docstring); ids are the file's ``id`` where every
    record has one (``rewardbench/<id>``), else ``rewardbench/<subset>/<n>`` by order within the subset.

    Raises:
        BadInput: file missing or unreadable; a record that is not an object, lacks a field of ``REQUIRED``, has an
            empty or non-string one, or repeats an id; no record.
    """
    rows, raw = _records(path)
    if not rows:
        raise BadInput(f"{path}: no pair records")
    items, seen, per_subset = [], set(), {}  # type: ignore[var-annotated]
    use_ids = all(isinstance(r, dict) and r.get("id") not in (None, "") for r in rows)
    for n, r in enumerate(rows, 1):
        where = f"{path}: record {n}"
        if not isinstance(r, dict):
            raise BadInput(f"{where} is not an object")
        for f in REQUIRED:
            if not isinstance(r.get(f), str) or (f != "prompt" and not r[f].strip()):
                raise BadInput(f"{where}: {f!r} must be a non-empty string (RewardBench's fields: "
                               f"{', '.join(REQUIRED)})")
        subset = r["subset"]
        per_subset[subset] = per_subset.get(subset, 0) + 1
        iid = f"rewardbench/{r['id']}" if use_ids else f"rewardbench/{subset}/{per_subset[subset]}"
        if iid in seen:
            raise BadInput(f"{where}: id {iid!r} seen twice")
        seen.add(iid)
        items.append({"id": iid, "prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"],
                      "category": subset, "section": SECTION_OF.get(subset, subset)})
    return items, raw


DATASET = Dataset("rewardbench", "RewardBench-format preference pairs (prompt, chosen, rejected, subset) for "
                  "reward-model evaluation (docs/RLHF.md)", rewardbench_pairs,
                  {"source": "allenai/reward-bench format: prompt, chosen, rejected, subset", "license": "per file",
                   "pairs": "category: the subset; section: RewardBench's SUBSET_MAPPING (evalgate.datasets."
                   "rewardbench)"})
