"""A suite gate's result as typed values (``MemberResult``, ``SuiteVerdict``) and the stored suite verdict: a row of
the ``gates`` table whose document names its members' stored gates (``record``), from which ``evalgate report``
renders the whole suite again (``stored_suite``) after checking the suite's and every member's recorded verdict."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import evalgate.gate.history as history
from evalgate.core.errors import BadInput
from evalgate.core.formatting import num
from evalgate.gate.results import Ship, Verdict
from evalgate.gate.select import SeedKey
from evalgate.gate.suite import Suite, SuiteMember, SuitePolicy
from evalgate.gate.suite_decide import Pick
from evalgate.store import GateRow, Store


@dataclass
class MemberResult:
    """One member's outcome in a suite.

    Attributes:
        name, role, select: the member's entry. threshold: the lower CI end it needs (``min_improvement`` or
        ``-margin``). verdict: its single-gate verdict (stored, ``Verdict.gate_id``). p_value: the one-sided
        bootstrap p-value of "candidate - baseline <= threshold" (None: nothing decided). holm_p: its Holm-adjusted
        p-value among the targets (``SuitePolicy.holm``; None otherwise).
    """

    name: str
    role: str
    select: bool
    threshold: float
    verdict: Verdict
    p_value: float | None = None
    holm_p: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def as_dict(self) -> dict[str, Any]:
        """The member's row and its whole verdict document (``Verdict.as_dict``)."""
        p = self.verdict.policy
        d = self.verdict.stats.difference if self.verdict.stats else None
        return {"member": self.name, "role": self.role, "select": self.select, "threshold": self.threshold,
                "margin": -self.threshold if self.role == "guard" else None,
                "min_improvement": self.threshold if self.role == "target" else None,
                "protocol": p.protocol, "metric": p.metric, "selection_split": p.selection_split or None,
                "decision_split": p.decision_split, "verdict": "PASS" if self.passed else "FAIL",
                "difference": dataclasses.asdict(d) if d else None, "p_value": self.p_value, "holm_p": self.holm_p,
                "failed_rules": [r.rule for r in self.verdict.rules if not r.passed],
                "gate": self.verdict.as_dict()}


@dataclass
class SuiteVerdict:
    """A suite's decision: every member's result, the checkpoint each seed ships and the suite's claims.

    Attributes:
        suite: the loaded suite. members: per member, in suite order. picks: per seed, the shipped checkpoint
        (``suite_decide.Pick``). failing: the members that failed (suite order). any_target_improved: with
        ``holm``, whether some target's Holm-adjusted p-value is <= alpha (None: not asked). gate_id: the id the
        suite's verdict is stored under (``record``; ``evalgate report`` renders the whole suite from it).
    """

    suite: Suite
    members: list[MemberResult]
    picks: dict[SeedKey, Pick] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)
    any_target_improved: bool | None = None
    gate_id: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failing and bool(self.members)

    @property
    def reason(self) -> str:
        return "pass" if self.passed else "fail"

    @property
    def alpha(self) -> float:
        """Each member's one-sided test level: (1 - confidence) / 2 of its two-sided CI (the first member's
        confidence; the members share it unless a member overrides it), rounded to 12 decimals so that 0.95 gives
        0.025 as written, not the float 0.025000000000000022 the reports showed."""
        return round((1 - self.members[0].verdict.policy.rules.confidence) / 2, 12) if self.members else 0.025

    def decided_by(self) -> str:
        """Which members decided: the failing ones on FAIL, all of them on PASS."""
        if self.failing:
            return ", ".join(self.failing)
        return "every member passed"

    def ship(self) -> Ship:
        """The checkpoint to ship (the highest selecting-target dev objective among the seeds' picks; ties: the lower
        seed) on PASS; on FAIL none, naming the failing member(s)."""
        chosen = [p for p in self.picks.values() if p.digest is not None]
        if not self.passed or not chosen:
            why = (f"suite FAIL: member(s) {', '.join(self.failing)} failed: "
                   + "; ".join(f"{m.name}: {', '.join(r.rule for r in m.verdict.rules if not r.passed)}"
                               for m in self.members if not m.passed)) if self.failing else "no seed has a checkpoint"
            return Ship.none(why)
        top = max(chosen, key=lambda p: (p.objective or 0.0, -(p.key[1] or 0)))
        return Ship(top.path, top.digest, top.key[1], top.step,
                    f"suite PASS: all {len(self.members)} members passed; seed {top.key[1]}'s checkpoint (step "
                    f"{top.step}) has the highest selecting targets' dev mean ({num(top.objective)}) of the "
                    f"{len(chosen)} seed(s)' picks")

    def table(self) -> list[dict[str, Any]]:
        """Members x seeds: per member and seed, the seed's decision value, and per member the CI of candidate -
        baseline over the seeds (the member's test), its threshold and pass/fail."""
        rows = []
        for m in self.members:
            st = m.verdict.stats
            per_seed = {str(k): e.value for k, e in st.per_seed.items()} if st else {}
            d = st.difference if st else None
            rows.append({"member": m.name, "role": m.role, "metric": m.verdict.policy.metric,
                         "baseline": st.baseline.value if st and st.baseline else (
                             m.verdict.baseline.value if m.verdict.baseline else None),
                         "seeds": per_seed, "diff": d.diff if d else None,
                         "ci": [d.low, d.high] if d else None, "confidence": d.confidence if d else None,
                         "threshold": m.threshold, "p_value": m.p_value, "holm_p": m.holm_p,
                         "passed": m.passed, "failed_rules": [r.rule for r in m.verdict.rules if not r.passed],
                         "not_read": m.verdict.decision_not_read is not None})
        return rows

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready suite verdict (no per-item outputs of any split)."""
        return {"suite": self.suite.name, "verdict": "PASS" if self.passed else "FAIL", "reason": self.reason,
                "decided_by": self.decided_by(), "failing": list(self.failing), "alpha": self.alpha,
                "holm": self.suite.policy.holm, "any_target_improved": self.any_target_improved,
                "picks": [{"train_run": p.key[0], "train_seed": p.key[1], "checkpoint": p.path, "digest": p.digest,
                           "step": p.step, "objective": p.objective, "unchecked_guards": p.unchecked,
                           "rejected": [{"step": p.steps[d][0], "checkpoint": p.steps[d][1], "why": w}
                                        for d, w in p.rejected.items()]} for p in self.picks.values()],
                "table": self.table(), "members": [m.as_dict() for m in self.members], "ship": self.ship().as_dict(),
                "gate_id": self.gate_id}


SUITE_KIND = "suite"
"""The stored suite verdict document's ``kind`` (a single gate's document has none)."""


def is_suite_row(row: GateRow) -> bool:
    """Whether a ``gates`` row holds a suite's verdict (``record``) rather than a single gate's."""
    doc = row.document
    return isinstance(doc, dict) and doc.get("kind") == SUITE_KIND


def _document(v: SuiteVerdict) -> dict[str, Any]:
    """What a suite's row stores: the suite file's model and path, per member its entry's role and threshold, its
    p-values and the id of its stored gate, the picks, the failing members and the Holm claim."""
    return {"kind": SUITE_KIND, "version": 1, "policy": v.suite.policy.model_dump(mode="json", exclude_unset=True),
            "path": str(v.suite.path),
            "members": [{"name": m.name, "role": m.role, "select": m.select, "threshold": m.threshold,
                         "p_value": m.p_value, "holm_p": m.holm_p, "gate_id": m.verdict.gate_id} for m in v.members],
            "picks": [dataclasses.asdict(p) for p in v.picks.values()], "failing": list(v.failing),
            "any_target_improved": v.any_target_improved}


def record(store: Store, v: SuiteVerdict, actor: str) -> GateRow:
    """Store the suite's verdict as a ``gates`` row (after its members' own; ``v.gate_id`` is set here) and return
    the row as the store gives it back (for the access log's ``result`` row, ``history.VERDICT_DETAIL``)."""
    v.gate_id = f"suite-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    doc = _document(v)
    inputs = {"suite": v.suite.name, "members": [m["gate_id"] for m in doc["members"]]}
    store.put_gate({
        "gate_id": v.gate_id, "name": v.suite.name,
        "policy_sha256": hashlib.sha256(json.dumps(doc["policy"], sort_keys=True).encode()).hexdigest(),
        "protocol_hash": None, "inputs_sha256": history.inputs_sha256(inputs), "inputs": inputs,
        "decision_runs": [], "verdict": "PASS" if v.passed else "FAIL", "reason": v.reason,
        "reasons": [f"{m.name}: {'; '.join(m.verdict.reasons)}" for m in v.members if not m.passed],
        "document": doc, "reused_from": None, "actor": actor})
    return store.gates(gate_id=v.gate_id)[0]


def stored_suite(store: Store, row: GateRow) -> SuiteVerdict:
    """The ``SuiteVerdict`` of a stored suite row, its members' verdicts rebuilt from their own stored gates (no
    split read). The suite's row and every member's must be the verdicts the access log recorded
    (``history.check_recorded``).

    Raises:
        BadInput: a member's stored gate is missing, or the document does not fit this evalgate version.
        RefusedByPolicy: as ``history.check_recorded``, for the suite or a member.
    """
    history.check_recorded(store, row)
    doc = row.document
    members = []
    for m in doc["members"]:
        member_row, verdict = history.stored_verdict(store, m["gate_id"])
        history.check_recorded(store, member_row)
        members.append(MemberResult(m["name"], m["role"], m["select"], m["threshold"], verdict, m["p_value"],
                                    m["holm_p"]))
    try:
        policy = SuitePolicy.model_validate(doc["policy"])
        picks = [history.from_json(Pick, p) for p in doc["picks"]]
    except (TypeError, ValueError, KeyError) as e:
        raise BadInput(f"the stored suite {row.gate_id} cannot be read by this evalgate version ({e}); run the "
                       "suite again") from e
    suite = Suite(policy, Path(doc["path"]), [SuiteMember(spec, x.verdict.policy)
                                              for spec, x in zip(policy.members, members, strict=True)])
    return SuiteVerdict(suite, members, {p.key: p for p in picks}, list(doc["failing"]), doc["any_target_improved"],
                        gate_id=row.gate_id)
