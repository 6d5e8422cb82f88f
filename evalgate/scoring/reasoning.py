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
``no_answer``, never an answer from the draft). ``harmony``: the answer is the last final-channel message; an
analysis message with no final one after it is unclosed.
"""

from __future__ import annotations

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


def _strip_tags(text: str, open_tag: str, close_tag: str, opened: bool) -> tuple[str, bool, bool]:
    """(answer, found, closed) for one tag format; ``opened``: the prompt ended inside a block."""
    found = opened or open_tag in text or close_tag in text
    out: list[str] = []
    pos, inside = 0, opened
    while True:
        if inside:
            end = text.find(close_tag, pos)
            if end < 0:
                return "".join(out), True, False
            pos, inside = end + len(close_tag), False
            continue
        start, end = text.find(open_tag, pos), text.find(close_tag, pos)
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
