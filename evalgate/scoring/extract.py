"""Answer extraction rules (the protocol's ``extraction.rule``).

- ``raw``: the whole completion, stripped.
- ``last_number``: the last number in the completion (``-1,234.5`` style; thousands separators removed). A
  number glued to a letter or to a non-Latin character is still a number (``x=5``, ``is5``, ``3a5`` gives 5,
  ``答案是72`` gives 72); digits of any script (``٧٢``, fullwidth ``７２``) and the minus sign ``−`` are read as
  ASCII; ``1.5e3`` is one number.
- ``gsm8k``: the answer to the question asked: the completion is cut where the model starts a new exercise (a
  line opening with ``Question:``, ``Q:`` or ``Problem:``, as a run-on few-shot answer does), and the first part
  that holds an answer gives it: what its last ``####`` states, else what its last "answer is" states (e.g. "The
  answer is 18.", "The final answer is $18$"), else its last ``\\boxed{}``, else its last number.
- ``boxed``: the content of the *last* ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed 5``), braces
  balanced, a box inside it written as its content; a last box cut off before its closing brace is no answer.
  Boxes are joined only where the text joins them into one answer with ``,``, "and" or "or" (``\\boxed{2} or
  \\boxed{3}`` gives ``2, 3``); a box stated again later (``\\boxed{1}. No wait, \\boxed{2}``) replaces the earlier
  one.
- ``code``: the completion as is (code scorers extract programs themselves).
- ``mmlu_pro``: MMLU-Pro's own answer extraction (TIGER-AI-Lab/MMLU-Pro ``evaluate_from_local.py``, and level
  ``l2`` of ``compute_accuracy.py``): the letter of the first ``answer is (X)`` / ``answer is X``, else of the first
  line holding ``answer: X`` / ``Answer: X`` (its last such), else the last standalone letter ``A``-``J`` (a
  letter between word boundaries with none after it); the same regular expressions (the two that backtrack
  quadratically rewritten as one scan each, reading the same letter), so every completion reads as it reads there.
  ``mmlu_pro_l1``: the first pattern alone (``compute_accuracy.py`` level ``l1``; the script as of May 2024, which
  made the published per-model outputs). A completion neither reads gives no answer (scored wrong; MMLU-Pro's
  scripts draw a random letter instead). These two keep MMLU-Pro's reading of a hedge (the *first* "answer is"),
  not the rule below.

Hedged answers: one rule in every format. The *last* final answer of a kind is the answer (``####``, "answer is",
``\\boxed{}``), as math-verify reads the rightmost match first (``math_verify.parser.extract_target_from_pred``:
"Try to extract from each match, starting from rightmost") and lm-evaluation-harness's gsm8k ``flexible-extract``
takes the last number (``group_select: -1``, lm_eval/tasks/gsm8k/gsm8k.yaml); a later correction replaces an
earlier answer. A final answer states what follows its marker to the end of its sentence (a newline, or ``.``,
``!`` or ``?`` before a space or the end; an ellipsis ``...`` ends nothing). A statement holding one number gives
that number; one holding several different numbers is given as written (``2 or 3``, ``2, 3``, ``2... actually 3``,
``2/3``), so the scorer compares all of it: ``math_equal`` reads ``2 or 3`` and ``2, 3`` as the set {2, 3}, as
math-verify does (it parses answers joined by ``,``, "and" or "or" as one answer holding each,
``math_verify.parser.lazy_latex_regex``), which equals no single number, and ``2/3`` as the fraction. So a hedge
is never scored by whichever of its values matches the gold answer. (lm-evaluation-harness's ``strict-match``
takes the first number after the first ``####`` instead: ``#### 2 or 3`` gives 2 there, 3 with its
``flexible-extract``.)

Thousands separators (``last_number`` and ``gsm8k``): ``,`` and the Arabic ``٬`` between groups of three
digits, and, written in LaTeX or SI style, ``{,}``, ``\\,`` ``\\;`` ``\\:`` ``\\!`` ``\\ `` ``~`` and the no-break,
thin, narrow no-break and figure spaces (``1{,}000{,}000``, ``12\\,345``, and 12 345 with a thin space give
1000000 and 12345) when every group after the first has exactly three digits. A plain ASCII space never joins
numbers ("5 100" stays two numbers, so "The answer is 5 100" states two). Docs: docs/SCORING.md.

Each rule is an ``ExtractionRule`` in ``RULES``; a plugin adds one through the ``evalgate.extract_rules`` entry-point
group, and a protocol naming it validates. Returns None when the rule finds no answer. Truncated completions
(finish_reason ``length``) are not extracted at all by the scorers unless the protocol sets
``extraction.score_truncated``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from evalgate.core.registry import Registry

# A number: thousands separators only in groups of three ("1,234", but "5,7" is two numbers), an optional
# decimal part and exponent, and a minus sign only where it cannot be a subtraction ("10-5" ends in 5, not -5).
# Only a digit or a point before it stops a number from starting: after a letter of any script it is a number.
_NUMBER = re.compile(r"(?<![\d.])(?:(?<![\w)])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+(?![\w.]))?"
                     r"|(?<![\d.])-?\.\d+")
# Thousands separators other than ",": LaTeX ({,} \, \; \: \! "\ " ~), SI spaces (no-break, thin, narrow no-break,
# figure), the Arabic thousands separator and the fullwidth comma.
_SEP = r"(?:\{,\}|\\[,;:! ]|~|[\u00a0\u2009\u202f\u2007\u066c\uff0c])"
_GROUPED = re.compile(rf"(?<!\d)\d{{1,3}}(?:{_SEP}\d{{3}})+(?!\d)")
_SEP_RE = re.compile(_SEP)
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
_SIGNS = str.maketrans({"\u2212": "-", "\u066b": "."})  # minus sign; Arabic decimal separator


def plain_numbers(text: str) -> str:
    """``text`` with numbers written the plain way: digits of any script as ASCII digits (``٧٢`` -> ``72``), the
    minus sign ``−`` as ``-``, and LaTeX/SI thousands separators written as ``,`` (``1{,}000{,}000`` ->
    ``1,000,000``, ``12\\,345`` -> ``12,345``) where every group after the first has exactly three digits.

    Args:
        text: a completion or an extracted answer.

    Returns:
        The rewritten text (unchanged where it holds none of these).
    """
    text = _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text.translate(_SIGNS))
    return _GROUPED.sub(lambda m: _SEP_RE.sub(",", m.group()), text)


def last_number(text: str) -> str | None:
    """The last number in ``text`` (after ``plain_numbers``) with thousands separators removed, or None.

    ``"She pays $1,234.50."`` gives ``1234.50``; ``"5,7"`` gives ``7``; ``"10-5=5"`` gives ``5``; ``"3a5"`` gives
    ``5``; a sentence's final period is never part of the number.
    """
    found = _NUMBER.findall(plain_numbers(text))
    if not found:
        return None
    return found[-1].replace(",", "")


_BOX = re.compile(r"\\(?:boxed|fbox)")
# What joins boxes into one answer (math-verify's ",", "and", "or", an Oxford comma), with math delimiters around.
_BOX_JOIN = re.compile(r"\s*\$*\s*(?:,|(?:,\s*)?(?:and|or))\s*\$*\s*", re.I)


def _box(text: str, start: int) -> tuple[str, int] | None:
    """The content of the box whose command starts at ``start`` and the index after it, or None (cut off)."""
    i = start + (6 if text.startswith("\\boxed", start) else 5)
    if i < len(text) and text[i] == " ":
        m = re.match(r" +([^\s{}$]+)", text[i:])
        return (m.group(1).rstrip(".,;"), i + m.end()) if m else None
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip(), j + 1
    return None  # unbalanced: the box was cut off


def _top_boxes(text: str) -> list[tuple[int, tuple[str, int] | None]]:
    """Each box of ``text`` that is not inside another, in order: (its start, ``_box``'s result); a box cut off
    before its closing brace runs to the end of the text, so every box after its start is inside it."""
    out: list[tuple[int, tuple[str, int] | None]] = []
    end = -1
    for m in _BOX.finditer(text):
        if m.start() < end:
            continue
        found = _box(text, m.start())
        out.append((m.start(), found))
        end = found[1] if found else len(text)
    return out


def _unbox(text: str) -> str:
    """``text`` with every box written as its content (``\\boxed{2} \\text{ or } \\boxed{3}`` -> ``2 \\text{ or }
    3``)."""
    boxes = [(start, found) for start, found in _top_boxes(text) if found is not None]
    if not boxes:
        return text
    out, pos = [], 0
    for start, (content, end) in boxes:
        out += [text[pos:start], _unbox(content)]
        pos = end
    return "".join(out) + text[pos:]


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with balanced braces, or None.

    ``\\boxed 5`` (no braces, as TeX allows for one token) gives ``5``. A last box that is cut off
    (unbalanced) gives None: an earlier box is never used instead. A box inside a box is part of the outer one's
    content, written as its own content (``\\boxed{2 \\text{ or } \\boxed{3}}`` gives ``2 \\text{ or } 3``, not
    ``3``; an outer box cut off gives None even where a box inside it closed). Boxes the text joins into one answer
    with ``,``, "and" or "or" (``$\\boxed{2}$ or $\\boxed{3}$``) give their contents joined by ``, `` (``2, 3``), as
    math-verify reads them as one answer; a box stated again later (``\\boxed{1}. No wait, \\boxed{2}``) gives
    only the later one.
    """
    boxes = _top_boxes(text)
    last = boxes[-1][1] if boxes else None
    if last is None:
        return None
    start, content = boxes[-1][0], last[0]
    joined = [_unbox(content)]
    for before, prev in reversed(boxes[:-1]):
        if prev is None or not _BOX_JOIN.fullmatch(text, prev[1], start):
            break
        joined.insert(0, _unbox(prev[0]))
        start = before
    return ", ".join(joined) if all(joined) else None


_ANSWER_IS = re.compile(r"answer is[:\s]*", re.I)
# Where a run-on model starts a new exercise, as few-shot prompts write them (Wei et al. 2022 "Q:", GSM8K
# "Question:", MATH "Problem:").
_NEW_EXERCISE = re.compile(r"\n[ \t]*(?:Question|Q|Problem)[ \t]*[:：]", re.I)


# The end of a final answer's sentence: a newline, or a full stop, "!" or "?" before a space or the end. An
# ellipsis (a run of points) ends nothing ("2... actually 3" is one statement), nor does the point of a one-letter
# abbreviation ("2, i.e. 3").
_SENTENCE_END = re.compile(r"\n|(?<![.])(?<!\b[A-Za-z])[.!?](?![.])(?=\s|$)")


def _stated(span: str) -> str | None:
    """What a final answer states (``span``: the text after its marker): of its sentence, or of a box in it, the
    one number, else, where it holds several different numbers (a hedge such as ``2 or 3``, a list, a
    fraction), the sentence as written, for the scorer to compare whole; None when it holds no number."""
    end = _SENTENCE_END.search(span)
    sentence = (span[:end.start()] if end else span).strip()
    sentence = last_boxed(sentence) or sentence
    numbers = {n.replace(",", "") for n in _NUMBER.findall(sentence)}
    if len(numbers) == 1:
        return numbers.pop()
    return sentence if numbers else None


def _marked(text: str) -> str | None:
    """The answer stated after the last final-answer marker in ``text`` (``####``, else "answer is", else
    ``\\boxed``), or None."""
    if "####" in text:
        tail = text.rsplit("####", 1)[1]
        return _stated(tail) or (tail.strip().split("\n", 1)[0].strip() or None)
    m = list(_ANSWER_IS.finditer(text))
    if m:
        found = _stated(text[m[-1].end():])
        if found:
            return found
    return last_boxed(text)


def _gsm8k(text: str) -> str | None:
    # The first part that holds an answer decides: text before the question asked ("Sure!\nQuestion: ...")
    # holds none, and a run-on exercise after an answer is never read.
    for part in _NEW_EXERCISE.split(plain_numbers(text)):
        found = _marked(part) or last_number(part)
        if found is not None:
            return found
    return None


# TIGER-AI-Lab/MMLU-Pro evaluate_from_local.py (HEAD f418b11): extract_answer, extract_again, extract_final.
_MMLU_PRO_ANSWER_IS = re.compile(r"answer is \(?([A-J])\)?")
# Two of them backtrack over the whole text at every start (quadratic: 4 ms a completion, 45 s for MMLU-Pro's 12,032)
# and are found here by one scan each. extract_again's r".*[aA]nswer:\s*([A-J])" (re.search, "." stops at a newline)
# reads, on the first line where an "answer:" match starts, the last match starting there (overlapping ones included:
# "answer: Answer: B" gives B); extract_final's r"\b[A-J]\b(?!.*\b[A-J]\b)" (DOTALL) is the last standalone letter.
_MMLU_PRO_ANSWER_COLON = re.compile(r"(?=[aA]nswer:\s*([A-J]))")
_MMLU_PRO_LETTER = re.compile(r"\b[A-J]\b")


def mmlu_pro_letter(text: str) -> str | None:
    """MMLU-Pro's answer letter of a completion (rule ``mmlu_pro``; see the module docstring), or None."""
    m = _MMLU_PRO_ANSWER_IS.search(text)
    if m:
        return m.group(1)
    starts = list(_MMLU_PRO_ANSWER_COLON.finditer(text))
    if starts:
        line_end = text.find("\n", starts[0].start())
        return [s for s in starts if line_end < 0 or s.start() < line_end][-1].group(1)
    last = None
    for last in _MMLU_PRO_LETTER.finditer(text):  # noqa: B007 - the last match is the one wanted
        pass
    return last.group(0) if last else None


def mmlu_pro_letter_l1(text: str) -> str | None:
    """The letter of the first ``answer is (X)`` in a completion (rule ``mmlu_pro_l1``), or None."""
    m = _MMLU_PRO_ANSWER_IS.search(text)
    return m.group(1) if m else None


@dataclass(frozen=True)
class ExtractionRule:
    """One extraction rule (the protocol's ``extraction.rule``).

    Attributes:
        extract: ``extract(text) -> answer``, or None when the text holds no answer.
        help: one sentence: what the rule takes from a completion (the protocol reference's wording).
        yields_answer: it yields an answer to compare with a gold answer; False for a rule that hands the scorer
            the program (``code``), which answer scorers (``math``) refuse at load.
    """

    extract: Callable[[str], str | None]
    help: str
    yields_answer: bool = True


RULES: Registry[ExtractionRule] = Registry("extraction rule", ExtractionRule,
                                           entry_point_group="evalgate.extract_rules")
"""Extraction rules by the protocol's ``extraction.rule``; plugins through the ``evalgate.extract_rules`` entry-point
group (each names an ``ExtractionRule``)."""


def _whole(text: str) -> str | None:
    return text.strip() or None


RULES.register("raw", ExtractionRule(_whole, "the whole completion, stripped"))
RULES.register("last_number", ExtractionRule(last_number, "the last number (thousands separators removed)"))
RULES.register("gsm8k", ExtractionRule(_gsm8k, "what the last ``####`` or \"The answer is\" states (several numbers "
                                       "as written), else the last ``\\boxed{}``, else the last number, before any "
                                       "run-on new exercise"))
RULES.register("boxed", ExtractionRule(last_boxed, "the content of the last ``\\boxed{}``"))
RULES.register("mmlu_pro", ExtractionRule(mmlu_pro_letter, "MMLU-Pro's letter: the first \"answer is (X)\", else "
                                          "\"answer: X\", else the last standalone letter A-J"))
RULES.register("mmlu_pro_l1", ExtractionRule(mmlu_pro_letter_l1, "MMLU-Pro's letter, first pattern alone: the first "
                                             "\"answer is (X)\""))
RULES.register("code", ExtractionRule(_whole, "the program (the code scorer takes prefix + completion, a fenced "
                                      "block if present)", yields_answer=False))


def extract_answer(text: str, rule: str = "raw") -> str | None:
    """Extract the answer from a completion by ``rule`` (a name in ``RULES``; see the module docstring).

    Raises:
        BadInput: unknown rule (lists the known ones).
    """
    return RULES.require(rule).extract(text)
