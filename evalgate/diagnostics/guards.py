"""What a release gate takes from the diagnostics: per seed, the findings that fail checkpoints, the signals its log
cannot check, and whether the log fits the seed's checkpoints.

``Guards`` is the gate policy's ``guards`` section: every ``Thresholds`` field plus ``fail_on``, the severities
that fail a checkpoint (a checkpoint at or after such a finding's first step is failed), and ``require``, the signals
a seed's log must be able to check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import field_validator

from evalgate.diagnostics.coverage import coverage
from evalgate.diagnostics.diagnose import Diagnosis, diagnose
from evalgate.diagnostics.log import TrainLog
from evalgate.diagnostics.signals import SIGNAL_SERIES, Finding
from evalgate.diagnostics.thresholds import Thresholds

SIGNAL_NAMES = (*SIGNAL_SERIES, "nonfinite")
"""Every signal a ``Guards.require`` entry may name."""


class Guards(Thresholds):
    """Training-log guards of a gate policy (docs/DIAGNOSTICS.md): the diagnostics' thresholds, which severities
    fail a checkpoint, and which signals must be checkable."""

    RENAMED: ClassVar[dict[str, str]] = {"clip_window": "window", "nan": "nonfinite"}
    """Old keys of the gate's guards -> their names now; a policy file still using one is refused with
    the new name (docs/DIAGNOSTICS.md, "The gate's guards")."""

    fail_on: tuple[Literal["info", "warn", "fail"], ...] = ("fail",)
    """Severities that fail every checkpoint at or after the finding's first step. Default: ``[fail]`` (warn and
    info findings are shown in the report, not enforced)."""
    require: tuple[str, ...] = ()
    """Signals every seed's log must be able to check (e.g. ``[kl_above_target, clip_fraction]``): a seed without a
    training log, or whose log lacks the signal's keys (``not_checkable``, e.g. KL absent, zero or NaN throughout),
    fails the gate's ``training_guards`` rule. Default: none (not-checkable signals are listed in the rule's detail
    and the report, not enforced)."""

    @field_validator("require")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [s for s in v if s not in SIGNAL_NAMES]
        if bad:
            raise ValueError(f"unknown signal(s) {', '.join(bad)}; known: {', '.join(SIGNAL_NAMES)}")
        return v


@dataclass
class SeedGuards:
    """The diagnostics of one training seed, as the gate uses them.

    Attributes:
        diagnosis: every finding on the seed's log (None: no log found).
        trips: findings whose severity is in ``fail_on`` and that have a first step, by step.
        coverage: sentences on a log that does not fit the seed's checkpoints (``coverage.coverage``).
    """

    diagnosis: Diagnosis | None
    trips: list[Finding] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)

    def failing(self, step: int | None) -> list[Finding]:
        """The trips at or before ``step`` (they fail a checkpoint at that step); none for an unknown step."""
        return [] if step is None else [f for f in self.trips if f.step is not None and f.step <= step]

    @property
    def not_checkable(self) -> list[Finding]:
        """The findings the log cannot check (their keys absent, KL zero or NaN throughout, too few values), in
        signal order; each names the keys it looked for."""
        return [] if self.diagnosis is None else [f for f in self.diagnosis.findings if f.status == "not_checkable"]


def guard_seed(log: TrainLog | None, guards: Guards, checkpoint_steps: list[int],
               seed: int | None = None) -> SeedGuards:
    """Diagnose a seed's training log for the gate.

    Args:
        log: the seed's training log, or None when none was found.
        guards: the policy's guards.
        checkpoint_steps: the seed's checkpoint steps (for the coverage check).
        seed: the training seed (the diagnosis's label).
    """
    if log is None:
        return SeedGuards(None)
    d = diagnose(log, guards, seed=seed)
    return SeedGuards(d, trips(d, guards), coverage(log, checkpoint_steps, guards.log_overrun_factor))


def trips(d: Diagnosis, guards: Thresholds, live: bool = False) -> list[Finding]:
    """The findings that stop a run or fail its checkpoints: severity in ``guards.fail_on`` (``fail`` when the
    guards are plain ``Thresholds``), a first step, not in an abandoned segment of a resumed run (its checkpoints
    were replaced by the resume). ``live``: a run still training (``EvalgateCallback``, ``evalgate watch``) is not
    stopped on a level finding judged on fewer steps than its window (``values["short_window"]``): the window fills
    as the run logs on."""
    fail_on = getattr(guards, "fail_on", ("fail",))
    return [f for f in d.fired() if f.status in fail_on and f.step is not None and f.segment is None
            and not (live and "short_window" in f.values)]
