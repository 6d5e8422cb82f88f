"""Reasoning blocks: the part of a completion a reasoning model writes before its answer, removed before the answer
is extracted (the protocol's ``reasoning.strip``; allenai/olmo-eval#348, huggingface/lighteval#869).

A reasoning model drafts inside a block (``<think> ... #### 12 ... </think> ... #### 18``); extracting from the
whole completion takes the draft's answer. The formats, as the models' chat templates and vLLM's reasoning parsers
write them (``REASONING_FORMATS``):

- ``think``: ``<think>`` ... ``</think>`` (DeepSeek-R1, Qwen3, QwQ, OLMo 3 Think, Kimi K2 Thinking; vLLM's
  ``deepseek_r1`` / ``qwen3`` parsers);
- ``thinking``: ``<thinking>`` ... ``</thinking>``; ``reasoning``: ``<reasoning>`` ... ``</reasoning>``;
- ``kimi``: ``◁think▷`` ... ``◁/think▷`` (Kimi-VL-Thinking);
- ``magistral``: ``[THINK]`` ... ``[/THINK]`` (Magistral, Mistral tokenizers v13+);
- ``harmony``: gpt-oss's channels: the reasoning is the ``<|channel|>analysis<|message|>`` message, the answer the
  ``<|channel|>final<|message|>`` one (up to ``<|return|>`` / ``<|end|>``); the completion must keep these special
  tokens as text (a backend that skips special tokens leaves no channel to find).

Rules (tag formats): every closed block is removed; a closing tag with no opening tag before it closes a block the
prompt opened (DeepSeek-R1's and QwQ's templates end the generation prompt with ``<think>\\n``), so everything
before it is reasoning; a block opened and never closed (in the completion, or by the prompt) is a draft: the text
from its opening on is removed, so a reasoning-only completion leaves nothing to extract (the scorer then says
``no_answer``, never an answer from the draft); outside a block, a tag inside Markdown code (an inline span or a
fenced block) is quoted text, not a marker. ``harmony``: the answer is the last final-channel message; an
analysis message with no final one after it is unclosed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

REASONING_FORMATS: dict[str, tuple[str, str]] = {
    "think": ("<think>", "</think>"),
    "thinking": ("<thinking>", "</thinking>"),
    "reasoning": ("<reasoning>", "</reasoning>"),
    "kimi": ("\u25c1think\u25b7", "\u25c1/think\u25b7"),
    "magistral": ("[THINK]", "[/THINK]"),
    "harmony": ("<|channel|>analysis<|message|>", "<|channel|>final<|message|>"),
}
"""Reasoning format name -> (opening marker, closing marker); for ``harmony`` the markers of the analysis and the
final channel."""

_HARMONY_END = ("<|return|>", "<|end|>", "<|call|>")


@dataclass(frozen=True)
class Reasoning:
    """A completion split into its answer part and what was removed.

    Attributes:
        answer: the text answers are extracted from (the completion with its reasoning removed).
        found: the format whose block was found (``think``, ...), or None when the completion has none.
        closed: False when a block was opened and never closed (the draft was removed); True otherwise.
    """

    answer: str
    found: str | None = None
    closed: bool = True


_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*$", re.M)
_TICKS = re.compile(r"`+")


def code_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of ``text``'s Markdown code: fenced blocks (a line of 3+ backticks or tildes up to
    the next fence line of the same character at least as long, or the end) and inline code spans (a run of n
    backticks up to the next run of exactly n; CommonMark 0.31, sec. 4.5 and 6.1), in order."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _FENCE.finditer(text):
        if m.start() < pos:
            continue
        spans += _inline(text, pos, m.start())
        fence = m.group(1)
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = close.search(text, m.end())
        stop = end.end() if end else len(text)
        spans.append((m.start(), stop))
        pos = stop
    return spans + _inline(text, pos, len(text))


def _inline(text: str, start: int, stop: int) -> list[tuple[int, int]]:
    runs = list(_TICKS.finditer(text, start, stop))
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        n = len(runs[i].group())
        j = next((k for k in range(i + 1, len(runs)) if len(runs[k].group()) == n), None)
        if j is None:
            i += 1
            continue
        spans.append((runs[i].start(), runs[j].end()))
        i = j + 1
    return spans


def _find(text: str, tag: str, pos: int, spans: list[tuple[int, int]]) -> int:
    """The first ``tag`` at or after ``pos`` outside ``spans``, or -1."""
    at = text.find(tag, pos)
    while at >= 0:
        inside = next((b for a, b in spans if a <= at < b), None)
        if inside is None:
            return at
        at = text.find(tag, inside)
    return at


def _strip_tags(text: str, open_tag: str, close_tag: str, opened: bool) -> tuple[str, bool, bool]:
    """(answer, found, closed) for one tag format; ``opened``: the prompt ended inside a block. Outside a block a
    tag in Markdown code (`` `<think>` ``, a fenced block) is text the answer quotes, not a marker
    (raullenchai/Rapid-MLX#1778); inside one, the first closing tag closes it (vLLM's reasoning parsers)."""
    quotes = "`" in text or "~~~" in text
    spans = code_spans(text) if quotes else []
    found = opened or _find(text, open_tag, 0, spans) >= 0 or _find(text, close_tag, 0, spans) >= 0
    out: list[str] = []
    pos, inside = 0, opened
    while True:
        if inside:
            end = text.find(close_tag, pos)
            if end < 0:
                return "".join(out), True, False
            pos, inside = end + len(close_tag), False
            if quotes:  # backticks of the block must not pair with the answer's
                spans = [(a + pos, b + pos) for a, b in code_spans(text[pos:])]
            continue
        start, end = _find(text, open_tag, pos, spans), _find(text, close_tag, pos, spans)
        if end >= 0 and (start < 0 or end < start):  # a close with no open: the prompt (or the text) opened it
            out, pos = [], end + len(close_tag)
            continue
        if start < 0:
            out.append(text[pos:])
            return "".join(out), found, True
        out.append(text[pos:start])
        pos, inside = start + len(open_tag), True


def _harmony(text: str, opened: bool) -> tuple[str, bool, bool]:
    analysis, final = REASONING_FORMATS["harmony"]
    at = text.rfind(final)
    if at < 0:
        found = opened or analysis in text
        return ("", True, False) if found else (text, False, True)
    answer = text[at + len(final):]
    for end in _HARMONY_END:
        answer = answer.split(end, 1)[0]
    return answer, True, True


def strip_reasoning(text: str, formats: Sequence[str], opened: str | None = None) -> Reasoning:
    """``text`` with the reasoning blocks of ``formats`` removed (see the module docstring).

    Args:
        text: a completion.
        formats: names in ``REASONING_FORMATS``, tried in order; the first one found in ``text`` decides.
        opened: the format whose block the prompt left open (``prompt_opens``), or None.

    Returns:
        The Reasoning (the whole text as the answer when no format's markers occur).

    Raises:
        KeyError: an unknown format name (protocol loading refuses those).
    """
    for name in formats:
        if name == "harmony":
            answer, found, closed = _harmony(text, opened == name)
        else:
            answer, found, closed = _strip_tags(text, *REASONING_FORMATS[name], opened == name)
        if found:
            return Reasoning(answer, name, closed)
    return Reasoning(text)


def prompt_opens(prompt: str, formats: Sequence[str]) -> str | None:
    """The format whose opening marker ends the rendered ``prompt`` (white space aside), or None: the completion
    then starts inside that block (DeepSeek-R1's template ends the generation prompt with ``<think>\\n``)."""
    tail = prompt.rstrip()
    for name in formats:
        if tail.endswith(REASONING_FORMATS[name][0]):
            return name
    return None
