"""The scorer contract and registry.

A scorer judges a batch of samples at once (so code execution can run in parallel) and returns, per sample, a
``ScoreResult``: score in [0, 1], a status saying why (``correct``, ``wrong``, ``truncated``, ``no_answer``,
``timeout``, ``error``), the extracted answer and a short detail.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evalgate.errors import BadInput

STATUSES = ("correct", "wrong", "truncated", "no_answer", "timeout", "error")


@dataclass(frozen=True)
class SampleToScore:
    """One completion to judge.

    Attributes:
        item: the split item (gold answer, tests, ...).
        text: the completion text as generated (stop sequence excluded).
        response_prefix: rendered start of the assistant turn that the completion continues ("" if none).
        finish_reason: ``stop`` or ``length``.
    """

    item: dict[str, Any]
    text: str
    response_prefix: str
    finish_reason: str


@dataclass(frozen=True)
class ScoreResult:
    """Judgement of one sample: score in [0, 1], status (one of ``STATUSES``), extracted answer, detail."""

    score: float
    status: str
    extracted: str | None = None
    detail: str | None = None


class Scorer(Protocol):
    """Judges samples. Constructed with the protocol (``LoadedProtocol``) whose options it reads."""

    name: str

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]: ...


# name -> (module, class)
SCORERS: dict[str, tuple[str, str]] = {
    "humaneval": ("evalgate.scoring.code", "HumanEvalScorer"),
    "exact": ("evalgate.scoring.exact", "ExactScorer"),
    "math": ("evalgate.scoring.math", "MathScorer"),
}


def get_scorer(protocol: Any) -> Scorer:
    """The scorer named by ``protocol.spec.scorer.name``.

    Raises:
        BadInput: unknown scorer name (lists the known ones) or invalid options.
    """
    name = protocol.spec.scorer.name
    if name not in SCORERS:
        raise BadInput(f"unknown scorer {name!r} in protocol {protocol.path}; known scorers: "
                       f"{', '.join(sorted(SCORERS))}")
    module, cls = SCORERS[name]
    return getattr(importlib.import_module(module), cls)(protocol)
