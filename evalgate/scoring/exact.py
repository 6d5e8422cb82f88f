"""Normalised exact match (the ``exact`` scorer).

Normalisation (SQuAD-style, Rajpurkar et al. 2016, extended), in this order:

1. unicode NFKC (fullwidth forms, ligatures and superscripts fold to their plain forms; é composed);
2. lower case;
3. punctuation removed: ASCII punctuation (``string.punctuation``) and every unicode punctuation character
   (categories P*: curly quotes, guillemets, dashes, "¿", "。"), without a space, so "U.S.A." is "usa";
4. the articles "a", "an", "the" removed as whole words only ("theory" and the "an" in "banana" survive);
5. whitespace collapsed to single spaces and stripped.

A gold answer that is not blank never normalises to nothing: where these steps would empty it (gold ``A``, a
multiple-choice letter, is an article; gold ``?`` is punctuation), article removal and then punctuation removal
are skipped for that comparison, on both sides. A prediction that normalises to nothing is never correct, and
neither is anything compared with a blank gold answer.

Numbers are compared as numbers, before any of these steps: where the prediction and the gold answer are each
one number written plainly (an optional sign, digits with or without ``,`` thousands separators in groups of
three, an optional decimal part, an optional exponent: ``-64``, ``+5``, ``1,000``, ``10.75``, ``.5``, ``5.``,
``1e3``; digits of any script and the minus sign ``−`` as in ``extract.plain_numbers``), they are equal when their
decimal values are (``18.0`` equals ``18``, ``1,000`` equals ``1000``, ``1e3`` equals ``1000``; ``64`` is not
``-64`` and ``1075`` is not ``10.75``, which punctuation removal used to make equal). A gold answer that is one plain
number equals only a number of its value, read after the punctuation and symbols around the prediction are taken off
(``$-5``, ``(-64)``, ``10.75.``, ``**5**``, ``50%``): ``(-64)`` is not ``64`` and ``10.75.`` is not ``1075``, and a
prediction that is no number (``10.7.5``, ``1,0,0,0``) equals no number gold. For answers that are
expressions, fractions or LaTeX use the ``math`` scorer (docs/SCORING.md).
"""

from __future__ import annotations

import re
import string
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Any

from evalgate.scoring.base import AnswerScorer, ExactOptions
from evalgate.scoring.extract import plain_numbers

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = str.maketrans("", "", string.punctuation)
# One number written plainly: sign, digits (thousands separators only in groups of three), decimals, exponent.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def as_number(text: str) -> Decimal | None:
    """The value of ``text`` when it is one number written plainly (see the module docstring), else None.

    ``"-1,234.50"`` gives ``Decimal("-1234.50")``; ``"5,7"``, ``"1/2"``, ``"12 apples"`` and ``""`` give None.
    """
    t = plain_numbers(unicodedata.normalize("NFKC", text)).strip()
    if not _PLAIN_NUMBER.fullmatch(t):
        return None
    try:
        return Decimal(t.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
        return None


def normalize(text: str, case: bool = True, punctuation: bool = True, articles: bool = True) -> str:
    """Normalise ``text`` for exact match (see the module docstring).

    Args:
        text: a prediction or gold answer.
        case: lower-case (step 2).
        punctuation: remove punctuation (step 3).
        articles: remove the articles a / an / the as whole words (step 4). NFKC and whitespace always apply.

    Returns:
        The normalised string.
    """
    t = unicodedata.normalize("NFKC", text)
    if case:
        t = t.lower()
    if punctuation:
        t = "".join(ch for ch in t.translate(_PUNCT) if not unicodedata.category(ch).startswith("P"))
    if articles:
        t = _ARTICLES.sub(" ", t)
    return " ".join(t.split())


def _number_in(text: str) -> Decimal | None:
    """The value of ``text`` when, with the symbols and punctuation written around it taken off, it is one plain
    number (``as_number``): a currency symbol anywhere (``$-5``, ``-$5``), then leading and trailing punctuation and
    symbols (``(-64)``, ``10.75.``, ``**5**``, ``50%``, ``#18``), a leading sign or point kept; else None."""
    t = "".join(c for c in plain_numbers(unicodedata.normalize("NFKC", text)) if unicodedata.category(c) != "Sc")
    t = t.strip()
    start, end = 0, len(t)
    while start < end and _wrapping(t[start]) and not (t[start] in "+-." and t[start + 1:start + 2].isdigit()):
        start += 1
    while end > start and _wrapping(t[end - 1]):
        end -= 1
    return as_number(t[start:end]) if start < end else None


def _wrapping(ch: str) -> bool:
    """Whether ``ch`` is punctuation, a symbol or white space (Unicode categories P*, S*, Z*)."""
    return unicodedata.category(ch)[0] in "PSZ"


def exact_match(prediction: str, gold: str, **options: bool) -> bool:
    """Whether the normalised prediction equals the normalised gold answer (never when either is empty).

    Args:
        prediction: the extracted answer.
        gold: the reference answer.
        **options: ``case``, ``punctuation``, ``articles`` as in ``normalize`` (all default true). Where they
            would normalise a non-blank gold answer to nothing, ``articles`` and then ``punctuation`` are turned
            off for both sides (see the module docstring).

    Two plain numbers are compared by value, whatever the options (``18.0`` equals ``18``; ``64`` is not ``-64``).
    A gold answer that is one plain number equals only a prediction that is one number of its value once the
    punctuation and symbols around it are taken off (``(-64)`` and ``10.75.`` are -64 and 10.75, never 64 and 1075 as
    the text with punctuation removed read them); a prediction that is no such number equals no number gold.
    """
    pn, gn = as_number(prediction), as_number(gold)
    if pn is not None and gn is not None:
        return pn == gn
    if gn is not None:  # a number gold: only a number of its value, never the text with punctuation removed
        wrapped = _number_in(prediction)
        return wrapped is not None and wrapped == gn
    opts = dict(options)
    g = normalize(gold, **opts)
    for step in ("articles", "punctuation"):
        if g:
            break
        opts[step] = False
        g = normalize(gold, **opts)
    p = normalize(prediction, **opts)
    return bool(g) and bool(p) and p == g


class ExactScorer(AnswerScorer):
    """Scores 1 when the extracted answer exactly matches the item's gold answer after normalisation.

    Options (``scorer.options``): ``ExactOptions`` (answer_field; the normalisation steps case, punctuation,
    articles).
    """

    name = "exact"

    def __init__(self, protocol: Any, options: ExactOptions):
        self.answer_field = options.answer_field
        self.norm = options.model_dump(include={"case", "punctuation", "articles"})
        self.rule = protocol.spec.extraction.rule
        self.score_truncated = protocol.spec.extraction.score_truncated

    def judge(self, prediction: str, gold: str, text: str) -> tuple[bool, list[str]]:
        return exact_match(prediction, gold, **self.norm), []
