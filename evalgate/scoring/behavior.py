"""Behaviour metrics per sample and their aggregates: the signals of reward hacking and collapse.

Per sample: completion tokens, truncated (finish_reason ``length``), repetition ratio, empty completion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def repetition_ratio(text: str, n: int = 4) -> float:
    """Share of repeated word n-grams: ``1 - unique / total`` over the whitespace-split words' n-grams.

    0 for text with fewer than n words; approaches 1 for text that loops on one phrase.
    """
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return 0.0 if not grams else 1.0 - len(set(grams)) / len(grams)


def sample_behavior(text: str, completion_tokens: int, finish_reason: str) -> dict[str, Any]:
    """Behaviour record of one sample: completion_tokens, truncated, repetition, empty."""
    return {"completion_tokens": completion_tokens, "truncated": finish_reason == "length",
            "repetition": round(repetition_ratio(text), 6), "empty": not text.strip()}


def aggregate_behavior(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Means over samples: mean_completion_tokens, truncation_rate, mean_repetition, empty_rate."""
    if not records:
        return {}
    n = len(records)
    return {
        "mean_completion_tokens": sum(r["completion_tokens"] for r in records) / n,
        "truncation_rate": sum(r["truncated"] for r in records) / n,
        "mean_repetition": sum(r["repetition"] for r in records) / n,
        "empty_rate": sum(r["empty"] for r in records) / n,
    }
