"""Preference pairs built from benchmarks whose right answer is known, for evaluating reward models
(``reward_preference``): ``gsm8k-pref``, ``math500-pref`` and ``humaneval-pref``.

Every pair is ``{"id", "prompt", "chosen", "rejected", "category"}``, ``chosen`` the benchmark's gold solution and
``rejected`` an answer wrong by construction:

- ``*-other-solution``: the gold solution of the next record (cyclically) whose gold answer differs, so a fluent,
  well-formed solution to another problem, with another final answer.
- ``gsm8k-wrong-final``: the gold solution with its final ``#### N`` changed to ``#### N+1``: everything but the
  answer is right (a reward model that reads the reasoning and not the result cannot tell).
- ``humaneval-stub``: the body ``pass``, which returns None where every HumanEval function returns a value.
  ``humaneval-other-solution`` uses another problem's canonical body (its names do not fit: it fails the tests
  but is not executed here).

The sources are read at import time from the benchmark's own file, like the other importers; nothing is committed.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from evalgate.datasets.base import Dataset, Items
from evalgate.datasets.gsm8k import gsm8k_items
from evalgate.datasets.humaneval import humaneval_items, humaneval_path
from evalgate.datasets.math500 import math500_items


def _other(items: Items, i: int, answer: str) -> dict:
    """The next item after ``i`` (cyclically) whose ``answer`` differs from ``answer``."""
    for k in range(1, len(items)):
        other = items[(i + k) % len(items)]
        if str(other["answer"]) != answer:
            return other
    raise ValueError("every item has the same answer: no wrong solution to borrow")


def _pair(iid: str, prompt: str, chosen: str, rejected: str, category: str) -> dict:
    return {"id": iid, "prompt": prompt, "chosen": chosen, "rejected": rejected, "category": category}


def gsm8k_pairs(path: Path) -> tuple[Items, bytes]:
    """Two pairs per GSM8K record: ``gsm8k-other-solution`` and ``gsm8k-wrong-final`` (ids ``<record id>/other``,
    ``<record id>/wrong-final``).

    Raises:
        BadInput: as ``gsm8k_items``.
    """
    items, raw = gsm8k_items(path)
    out = []
    for i, it in enumerate(items):
        sol, gold = it["solution"], it["answer"]
        head = sol[:sol.rindex("####")]
        wrong = str(Decimal(gold) + 1)
        out.append(_pair(f"{it['id']}/other", it["question"], sol, _other(items, i, gold)["solution"],
                         "gsm8k-other-solution"))
        out.append(_pair(f"{it['id']}/wrong-final", it["question"], sol, f"{head}#### {wrong}", "gsm8k-wrong-final"))
    return out, raw


def math500_pairs(path: Path) -> tuple[Items, bytes]:
    """One pair per MATH-500 record, ``math500-other-solution`` (id ``<unique_id>/other``).

    Raises:
        BadInput: as ``math500_items``.
    """
    items, raw = math500_items(path)
    return [_pair(f"{it['id']}/other", it["problem"], it["solution"], _other(items, i, it["answer"])["solution"],
                  "math500-other-solution") for i, it in enumerate(items)], raw


def humaneval_pairs(path: Path) -> tuple[Items, bytes]:
    """Two pairs per HumanEval problem: ``humaneval-stub`` and ``humaneval-other-solution`` (ids
    ``<task_id>/stub``, ``<task_id>/other``); the prompt is the problem's signature and docstring, the answers
    function bodies.

    Raises:
        BadInput: as ``humaneval_items``.
    """
    items, raw = humaneval_items(path)
    keyed = [{**it, "answer": it["canonical_solution"]} for it in items]
    out = []
    for i, it in enumerate(keyed):
        out.append(_pair(f"{it['id']}/stub", it["prompt"], it["canonical_solution"], "    pass\n", "humaneval-stub"))
        out.append(_pair(f"{it['id']}/other", it["prompt"], it["canonical_solution"],
                         _other(keyed, i, it["answer"])["canonical_solution"], "humaneval-other-solution"))
    return out, raw


def _dataset(name: str, what: str, read: Callable[[Path], tuple[Items, bytes]], source: str, license_: str,
             default: Callable[[], Path] | None = None) -> Dataset:
    return Dataset(name, f"{what} preference pairs for reward-model evaluation (docs/RLHF.md)", read,
                   {"source": source, "license": license_, "pairs": "chosen: the gold solution; rejected: wrong by "
                    "construction (evalgate.datasets.preference)"}, default)


PREFERENCE_DATASETS = ("gsm8k-pref", "math500-pref", "humaneval-pref", "rewardbench")
"""The registered names of these importers: they evaluate reward models, so ``evalgate init`` (which scaffolds a
policy's evaluation) offers no starter for them."""

# The preference importers (``evalgate splits import gsm8k-pref --from test.jsonl``), registered in ``datasets``.
GSM8K_PREF = _dataset("gsm8k-pref", "GSM8K", gsm8k_pairs,
                      "openai/grade-school-math, grade_school_math/data/test.jsonl", "MIT")
MATH500_PREF = _dataset("math500-pref", "MATH-500", math500_pairs, "openai/prm800k, prm800k/math_splits/test.jsonl",
                        "MIT")
HUMANEVAL_PREF = _dataset("humaneval-pref", "HumanEval", humaneval_pairs, "openai/human-eval, data/HumanEval.jsonl.gz",
                          "MIT", humaneval_path)
