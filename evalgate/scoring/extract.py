"""Answer extraction rules (the protocol's ``extraction.rule``).

- ``raw``: the whole completion, stripped.
- ``last_number``: the last number in the completion (``-1,234.5`` style; thousands separators removed).
- ``gsm8k``: the text after the last ``####``, else after the last "The answer is", else the last number.
- ``boxed``: the content of the *last* ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced; repeated boxes are
  never joined.
- ``code``: the completion as is (code scorers extract programs themselves).

Returns None when the rule finds no answer.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_number(text: str) -> str | None:
    """The last number in ``text`` with thousands separators removed and a trailing ``.`` dropped, or None."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    num = found[-1].replace(",", "")
    return num.rstrip(".") or None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with balanced braces, or None."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j].strip()
    return None  # unbalanced: the box was cut off


_ANSWER_IS = re.compile(r"answer is[:\s]*", re.I)


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
        if "####" in text:
            tail = text.rsplit("####", 1)[1]
            return last_number(tail.split("\n", 1)[0] if tail.strip() else tail) or (tail.strip() or None)
        m = list(_ANSWER_IS.finditer(text))
        if m:
            return last_number(text[m[-1].end():].split("\n", 1)[0]) or last_number(text)
        return last_number(text)
    raise ValueError(f"unknown extraction rule {rule!r}; known: raw, last_number, gsm8k, boxed, code")
