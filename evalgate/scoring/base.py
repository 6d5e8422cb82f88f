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
    """Judges samples. Constructed with the protocol (``LoadedProtocol``) whose options it reads.

    ``required_fields``: the item fields it reads; a run checks every item for them when the split is read,
    before any generation.
    """

    name: str

    @property
    def required_fields(self) -> tuple[str, ...]: ...

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]: ...


class AnswerScorer:
    """The loop shared by scorers that compare one extracted answer with a gold answer field.

    Per sample: finish_reason ``length`` -> ``truncated`` (score 0, never scored from a cut-off completion)
    unless ``score_truncated``; no answer under the extraction rule -> ``no_answer``; else ``judge`` decides
    ``correct`` or ``wrong``. Subclasses set ``answer_field``, ``rule``, ``score_truncated`` and
    ``include_prefix`` (extract from response prefix + completion, or the completion alone) and implement
    ``judge``.
    """

    name = ""
    answer_field = "answer"
    rule = "raw"
    score_truncated = False
    include_prefix = False

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The gold answer's field."""
        return (self.answer_field,)

    def judge(self, prediction: str, gold: str, text: str) -> tuple[bool, list[str]]:
        """(equal, notes) for one extracted prediction; ``text`` is what the answer was extracted from."""
        raise NotImplementedError

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Judge each sample (see the class docstring); results in input order."""
        from evalgate.scoring.extract import extract_answer

        out = []
        for s in samples:
            if s.finish_reason == "length" and not self.score_truncated:
                out.append(ScoreResult(0.0, "truncated", None, "finish_reason length: cut off at max_tokens"))
                continue
            text = s.response_prefix + s.text if self.include_prefix else s.text
            pred = extract_answer(text, self.rule)
            if pred is None:
                out.append(ScoreResult(0.0, "no_answer", None, f"rule {self.rule} found no answer"))
                continue
            gold = str(s.item[self.answer_field])
            ok, notes = self.judge(pred, gold, text)
            notes = notes if ok else [f"expected {gold!r}", *notes]
            out.append(ScoreResult(1.0 if ok else 0.0, "correct" if ok else "wrong", pred,
                                   "; ".join(notes) or None))
        return out


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
