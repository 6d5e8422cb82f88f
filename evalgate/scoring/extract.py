"""Answer extraction rules (the protocol's ``extraction.rule``).

- ``raw``: the whole completion, stripped.
- ``last_number``: the last number in the completion (``-1,234.5`` style; thousands separators removed).
- ``gsm8k``: the number after the last ``####``, else after the last "answer is" (e.g. "The answer is 18.",
  "The final answer is $18$"), else the content of the last ``\\boxed{}``, else the last number.
- ``boxed``: the content of the *last* ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed 5``), braces
  balanced; repeated boxes are never joined, and a last box cut off before its closing brace is no answer.
- ``code``: the completion as is (code scorers extract programs themselves).

Returns None when the rule finds no answer. Truncated completions (finish_reason ``length``) are not extracted
at all by the scorers unless the protocol sets ``extraction.score_truncated``.
"""

from __future__ import annotations

import re

# A number: thousands separators only in groups of three ("1,234", but "5,7" is two numbers), an optional
# decimal part, and a minus sign only where it cannot be a subtraction ("10-5" ends in 5, not -5).
_NUMBER = re.compile(r"(?<![\w.])(?:(?<![\w)])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\w.])-?\.\d+")


def last_number(text: str) -> str | None:
    """The last number in ``text`` with thousands separators removed, or None.

    ``"She pays $1,234.50."`` gives ``1234.50``; ``"5,7"`` gives ``7``; ``"10-5=5"`` gives ``5``; a sentence's
    final period is never part of the number.
    """
    found = _NUMBER.findall(text)
    if not found:
        return None
    return found[-1].replace(",", "")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with balanced braces, or None.

    ``\\boxed 5`` (no braces, as TeX allows for one token) gives ``5``. A last box that is cut off
    (unbalanced) gives None: an earlier box is never used instead, and boxes are never joined.
    """
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = start + (6 if text.startswith("\\boxed", start) else 5)
    if i < len(text) and text[i] == " ":
        m = re.match(r" +([^\s{}$]+)", text[i:])
        return m.group(1).rstrip(".,;") if m else None
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip() or None
    return None  # unbalanced: the box was cut off


_ANSWER_IS = re.compile(r"answer is[:\s]*", re.I)


def _gsm8k(text: str) -> str | None:
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        return last_number(tail.split("\n", 1)[0]) or (tail or None)
    m = list(_ANSWER_IS.finditer(text))
    if m:
        line = text[m[-1].end():].split("\n", 1)[0]
        found = last_boxed(line) or line
        num = _NUMBER.search(found)
        if num:
            return num.group(0).replace(",", "")
    return last_boxed(text) or last_number(text)


def extract_answer(text: str, rule: str = "raw") -> str | None:
    """Extract the answer from a completion by ``rule`` (see the module docstring).

    Raises:
        ValueError: unknown rule.
    """
    if rule in ("raw", "code"):
        return text.strip() or None
    if rule == "last_number":
        return last_number(text)
    if rule == "boxed":
        return last_boxed(text)
    if rule == "gsm8k":
        return _gsm8k(text)
    raise ValueError(f"unknown extraction rule {rule!r}; known: raw, last_number, gsm8k, boxed, code")
