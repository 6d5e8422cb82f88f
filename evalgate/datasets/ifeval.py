"""IFEval (Zhou et al. 2023, "Instruction-Following Evaluation for Large Language Models"): 541 prompts carrying 25
kinds of verifiable instruction, read from the reference implementation's ``input_data.jsonl``; scored by the
``ifeval`` scorer."""

from __future__ import annotations

from pathlib import Path

from evalgate.core.errors import BadInput
from evalgate.core.fileio import iter_jsonl
from evalgate.datasets.base import Dataset, Items


def ifeval_items(path: Path) -> tuple[Items, bytes]:
    """Items of IFEval's ``input_data.jsonl``: ``id`` (``ifeval/<key>``), ``key`` (the record's integer key),
    ``prompt``, ``instruction_id_list`` and ``kwargs`` (one dict of arguments per instruction), as in the file.

    Raises:
        BadInput: file missing, a line not JSON, a record without those fields, ``kwargs`` not one dict per
            instruction id, or a key seen twice.
    """
    if not path.is_file():
        raise BadInput(f"IFEval file {path} not found; pass --from PATH to IFEval's input_data.jsonl")
    raw = path.read_bytes()
    items, seen = [], set()
    for line, rec in iter_jsonl(raw, path, "is this IFEval's input_data.jsonl?"):
        if not isinstance(rec, dict) or not {"key", "prompt", "instruction_id_list", "kwargs"} <= rec.keys():
            raise BadInput(f"{path}:{line}: not an IFEval record (needs 'key', 'prompt', 'instruction_id_list' and "
                           "'kwargs')")
        ids, kwargs = rec["instruction_id_list"], rec["kwargs"]
        if (not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids)
                or not isinstance(kwargs, list) or len(kwargs) != len(ids)
                or not all(isinstance(k, dict) for k in kwargs)):
            raise BadInput(f"{path}:{line}: 'instruction_id_list' must be a non-empty list of ids and 'kwargs' one "
                           "dict per id")
        if not isinstance(rec["prompt"], str) or not rec["prompt"].strip():
            raise BadInput(f"{path}:{line}: empty 'prompt'")
        if rec["key"] in seen:
            raise BadInput(f"{path}:{line}: key {rec['key']!r} seen twice")
        seen.add(rec["key"])
        items.append({"id": f"ifeval/{rec['key']}", "key": rec["key"], "prompt": rec["prompt"],
                      "instruction_id_list": ids, "kwargs": kwargs})
    return items, raw


DATASET = Dataset("ifeval", "IFEval, 541 prompts with verifiable instructions (Zhou et al. 2023); --from "
                  "input_data.jsonl", ifeval_items,
                  {"source": "google-research/google-research, instruction_following_eval/data/input_data.jsonl",
                   "license": "CC BY 4.0 (data); the checkers' code is Apache 2.0",
                   "gold": "none: the ifeval scorer checks each instruction_id_list entry with its kwargs"})
