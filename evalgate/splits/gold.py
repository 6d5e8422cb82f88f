"""Gold answers written inside a worked solution, by a dataset's own convention (``evalgate splits add --gold``):
GSM8K's final ``#### N`` and MATH's last ``\\boxed{...}``. The extracted answer becomes the item's ``answer``; the
worked solution is kept as ``solution``."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.scoring.extract import last_boxed

_GSM8K_GOLD = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")


def gsm8k_gold(solution: str) -> str:
    """The gold answer of a GSM8K record: the number after its final ``####``, thousands separators removed
    (Cobbe et al. 2021; the dataset's every ``answer`` ends ``#### <number>``).

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


def boxed_gold(solution: str) -> str:
    """The gold answer of a MATH record: the content of its solution's last ``\\boxed{...}`` (Hendrycks et al. 2021:
    "the final answer is boxed"; ``scoring.extract.last_boxed``, braces balanced).

    Raises:
        ValueError: no complete ``\\boxed{...}`` in the text.
    """
    got = last_boxed(solution)
    if got is None or not got.strip():
        raise ValueError(f"no complete \\boxed{{...}} in {solution[-60:]!r}")
    return got.strip()


@dataclass(frozen=True)
class GoldRule:
    """One dataset convention for a gold answer inside a solution.

    Attributes:
        source: the item field holding the worked solution (``answer`` for GSM8K, ``solution`` for MATH).
        extract: solution text -> the answer (raises ValueError when the text does not follow the convention).
        help: the convention, with its source.
    """

    source: str
    extract: Callable[[str], str]
    help: str


GOLD_RULES: dict[str, GoldRule] = {
    "gsm8k": GoldRule("answer", gsm8k_gold, "GSM8K (Cobbe et al. 2021): the item's 'answer' is a worked solution "
                      "ending '#### N'; answer = N (thousands separators removed), solution = the text"),
    "boxed": GoldRule("solution", boxed_gold, "MATH (Hendrycks et al. 2021): the item's 'solution' boxes its final "
                      "answer; answer = the last \\boxed{...}'s content, solution kept"),
}
"""``--gold`` conventions by name."""


def extract_gold(items: Sequence[dict[str, Any]], rule: str, where: str) -> list[dict[str, Any]]:
    """``items`` with each gold answer taken out of its worked solution by ``GOLD_RULES[rule]``: ``answer`` the
    extracted text, ``solution`` the worked solution; every other field unchanged.

    Args:
        items: the split's items (each with an ``id``). rule: a ``GOLD_RULES`` name. where: the file, for errors.

    Raises:
        BadInput: an unknown rule; an item without the source field, or whose text does not follow the convention
            (naming the item; nothing is written); under ``gsm8k``, an item that has a ``solution`` field already
            (it would be overwritten).
    """
    if rule not in GOLD_RULES:
        raise BadInput(f"--gold {rule!r}: unknown convention; known: {', '.join(GOLD_RULES)}")
    r = GOLD_RULES[rule]
    out = []
    for it in items:
        text = it.get(r.source)
        if not isinstance(text, str):
            raise BadInput(f"{where}: item {it['id']!r} has no text field {r.source!r} for --gold {rule} "
                           f"({r.help}); map it with --map {r.source}=COLUMN")
        if r.source != "solution" and "solution" in it:
            raise BadInput(f"{where}: item {it['id']!r} has a 'solution' field already; --gold {rule} keeps the "
                           f"worked solution there: leave the field out (--map) or rename it")
        try:
            gold = r.extract(text)
        except ValueError as e:
            raise BadInput(f"{where}: item {it['id']!r}: {e}; --gold {rule} needs {r.help}") from e
        out.append({**it, "answer": gold, "solution": text})
    return out


def looks_like(items: Sequence[dict[str, Any]]) -> str | None:
    """The ``GOLD_RULES`` name whose convention every item's ``answer`` follows as a worked solution (GSM8K's
    ``#### N``), or None; for the note ``splits add`` prints when ``--gold`` was not given."""
    answers = [it.get("answer") for it in items]
    if answers and all(isinstance(a, str) and _GSM8K_GOLD.search(a) for a in answers):
        return "gsm8k"
    return None
