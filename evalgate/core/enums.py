"""The words evalgate stores and prints for tiers, run and sample statuses and access-log outcomes, as ``StrEnum``s.

A member is its string (``RunStatus.COMPLETE == "complete"``, ``json.dumps`` writes ``"complete"``), so stored rows
and ``--json`` documents are unchanged; a typo in code is an ``AttributeError`` instead of a silent mismatch, and a
pydantic field typed with one of these rejects any other word (a fixture's ``"incorrect"`` sample status).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Outcome", "RunStatus", "SampleStatus", "Tier"]


class Tier(StrEnum):
    """A split's tier: who may read it, how often, and whether its data is sealed (docs/SPLITS.md)."""

    SMOKE = "smoke"
    DEV = "dev"
    PUBLIC = "public"
    PRIVATE = "private"
    HUMAN_AUDIT = "human-audit"


class RunStatus(StrEnum):
    """A run's status: ``running`` until scored and stored; ``failed`` and ``interrupted`` runs keep their error."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class SampleStatus(StrEnum):
    """A scored sample's status (the scorers' ``ScoreResult.status``; ``tool_violation`` from agentic runs; ``judged``
    and ``judge_unparseable`` from the ``judge`` scorer: a verdict read, or one its parse rule cannot read;
    ``scored`` from the ``reward_model`` scorer: a reward, which has no right or wrong; ``tie`` from the
    ``judge_preference`` scorer: a judge that preferred neither answer of a pair over its two orders)."""

    CORRECT = "correct"
    WRONG = "wrong"
    TRUNCATED = "truncated"
    NO_ANSWER = "no_answer"
    TIMEOUT = "timeout"
    ERROR = "error"
    TOOL_VIOLATION = "tool_violation"
    JUDGED = "judged"
    JUDGE_UNPARSEABLE = "judge_unparseable"
    SCORED = "scored"
    TIE = "tie"


class Outcome(StrEnum):
    """An access-log row's outcome: a permitted ``read``, an ``override`` of a refusal (counted like a read), a read
    the gate reserved ahead (``reserved-read``), a stored decision result shown again (``re-read``, not charged),
    a ``refused`` read, a ``judge-read`` (an LLM judge shown the items and completions of a run whose own read was
    admitted and logged: not charged again), a split ``added`` / ``replaced``, or a release-gate run's ``result``
    as it was stored (its ``result_sha256`` in the detail, for the gates that show it again; not charged)."""

    READ = "read"
    OVERRIDE = "override"
    RESERVED_READ = "reserved-read"
    REREAD = "re-read"
    REFUSED = "refused"
    JUDGE_READ = "judge-read"
    ADDED = "added"
    REPLACED = "replaced"
    RESULT = "result"
