"""``run_suite``: a suite gate's steps in order (docs/GATING.md, "Suite gates").

1. every member's checks before anything is read: tiers, protocol file and lock, metric produced, the access
   log's chain; a bad member refuses the suite with nothing read or spent;
2. per member, its selection runs (logged as dev reads) and best/last/failed under its own rules (``select``);
3. each seed's one checkpoint for the whole suite (``suite_decide.pick_checkpoints``);
4. every member's decision reads planned (``pipeline.decision_plan``), then reserved at once
   (``reads.commit``: one locked step over every member's split and budget; refused, nothing spent on any member,
   when one budget cannot cover its reads); re-reads of results already shown stay free per member;
5. per member, its decision runs, statistics and rules as a single gate's (``decide``), its verdict stored
   (``history``);
6. the suite verdict: every member passed (intersection-union test), with the targets' one-sided p-values and
   Holm's adjustment for "at least one target improved" when asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import evalgate.access.log as accesslog
import evalgate.gate.decide as decide
import evalgate.gate.guards as guards
import evalgate.gate.history as history
import evalgate.gate.reads as reads
from evalgate.core.enums import Outcome, Tier
from evalgate.core.errors import BadInput, EvalgateError
from evalgate.core.results import Metrics
from evalgate.gate import pipeline
from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import (
    BaselineResult,
    CheckpointResult,
    DecisionRun,
    ReusedDecision,
    RuleOutcome,
    SeedResult,
    Verdict,
)
from evalgate.gate.select import RunPartition, SeedKey, check_one_training_run, partition_runs
from evalgate.gate.suite import Suite, SuiteMember
from evalgate.gate.suite_decide import (
    Pick,
    SelectingMember,
    bootstrap_p_value,
    holm,
    intersection_union,
    pick_checkpoints,
)
from evalgate.gate.suite_results import MemberResult, SuiteVerdict
from evalgate.gate.suite_results import record as record_suite
from evalgate.runner.grant import revoke
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import actor_name
from evalgate.store import RunRow, Store


@dataclass
class _Member:
    """A member while the suite runs."""

    sm: SuiteMember
    sel_m: Any = None
    dec_m: Any = None
    broken: Any = None
    sel_runs: list[RunRow] = field(default_factory=list)
    dec_runs: list[RunRow] = field(default_factory=list)
    base_digest: str | None = None
    part: RunPartition = field(default_factory=RunPartition)
    protocol_hash: str | None = None
    own_seeds: list[SeedResult] = field(default_factory=list)
    seeds: list[SeedResult] = field(default_factory=list)
    shares: dict[str, int] = field(default_factory=dict)  # digest -> the earlier member that reads it: shown, free

    @property
    def policy(self) -> GatePolicy:
        return self.sm.policy

    def inputs(self) -> dict[str, Any]:
        """The member's gate inputs (``history.gate_inputs``): what its stored verdict was decided on."""
        return history.gate_inputs(self.policy, self.protocol_hash, self.sel_m.content_sha256 if self.sel_m else "",
                                   self.dec_m.content_sha256, self.part.usable, self.base_digest)

    def result(self, verdict: Verdict, p_value: float | None = None) -> MemberResult:
        """The member's ``MemberResult`` with ``verdict`` (its entry's role, selection and threshold)."""
        spec = self.sm.spec
        return MemberResult(spec.name, spec.role, spec.select, spec.threshold, verdict, p_value)


def _check(m: _Member, manager: SplitManager, who: str, evaluate_decision: bool) -> None:
    """A member's checks before anything is read (``reads.check_tiers``' rules; the protocol; the chain)."""
    p = m.policy
    if m.sm.has_selection:
        m.sel_m, m.dec_m = reads.check_tiers(p, manager)
    else:
        m.dec_m = manager.manifest(p.decision_split)
        if m.dec_m.tier != Tier.PRIVATE:
            raise BadInput(f"member {m.sm.name}: decision split {m.dec_m.name} is tier {m.dec_m.tier}; the release "
                           "decision reads a private-tier split: set decision_split to one")
    try:
        reads.check_protocol(p, evaluate_decision)
    except BadInput as e:
        raise BadInput(f"member {m.sm.name}: {e}") from e


def _baseline_dev(m: _Member, store: Store, who: str, evaluate_decision: bool, progress: bool) -> float | None:
    """The baseline's value on a selecting member's dev split: a fixed value, or its stored dev run there (evaluated
    now, dev tier, when there is none and decision runs are evaluated); None when unknown."""
    p = m.policy
    if p.baseline.checkpoint is None:
        return p.baseline.value
    runs = [r for r in m.sel_runs if r.status == "complete" and r.checkpoint_digest == m.base_digest
            and r.split_sha256 == m.sel_m.content_sha256 and r.backend == p.backend]
    if not runs and evaluate_decision:
        reads.evaluate_for_gate(p.protocol_file or "", p.baseline.checkpoint, p.selection_split,
                                reads.SELECTION_PURPOSE, who, store, backend=p.backend, progress=progress)
        m.sel_runs, _ = pipeline._stored_runs(p, store, m.dec_m.content_sha256, True)
        return _baseline_dev(m, store, who, False, progress)
    value = runs[-1].metrics.get(p.metric) if runs and runs[-1].metrics else None
    return float(value) if isinstance(value, int | float) else None


def _member_seeds(m: _Member, picks: dict[SeedKey, Pick], template: dict[SeedKey, SeedResult]) -> list[SeedResult]:
    """The member's seeds with the suite's pick as each seed's best: its own dev results where it has them (its
    rules' failed reasons kept for the report), else a seed holding only the picked checkpoint (its training-log
    guards run under the member's rules on the log found next to it)."""
    own = {(s.train_run, s.train_seed): s for s in m.own_seeds}
    out, bare = [], []
    for key, pick in picks.items():
        s = own.get(key)
        if s is None:
            s = SeedResult(train_seed=key[1], train_run=key[0], checkpoints=[], best=None, last=None)
            bare.append(s)
        best = None
        if pick.digest is not None:
            best = next((c for c in s.checkpoints if c.digest == pick.digest), None)
            if best is None:
                tmpl = next((c for c in template[key].checkpoints if c.digest == pick.digest), None)
                best = CheckpointResult(digest=pick.digest, path=pick.path or "", step=pick.step,
                                        train_run=key[0], run_id="", status="complete",
                                        value=None, stderr=None, metrics=Metrics(),
                                        provenance=tmpl.provenance if tmpl else None)
                if s in bare:
                    s.checkpoints, s.last = [best], best
        s.best = best
        out.append(s)
    if bare:
        logs = guards.train_logs(m.policy, [template[(s.train_run, s.train_seed)] for s in bare])
        per_seed = guards.seed_guards(m.policy, bare, logs)
        for s in bare:
            key = (s.train_run, s.train_seed)
            guards.attach_diagnostics(s, logs.get(key), per_seed.get(key))
    return out


def _member_baseline(m: _Member, reader: reads.DecisionReader, who: str) -> BaselineResult:
    if m.sm.has_selection:
        return pipeline._baseline(m.policy, reader, m.sel_runs, m.sel_m.content_sha256, who, m.base_digest)
    p = m.policy
    if p.baseline.checkpoint is None:
        return BaselineResult(value=p.baseline.value)
    return BaselineResult(checkpoint=p.baseline.checkpoint, decision=reader.read(p.baseline.checkpoint, None,
                                                                                 m.base_digest))


def _p_value(m: _Member, store: Store, chosen: list[SeedResult], baseline: BaselineResult) -> float | None:
    """The member's one-sided bootstrap p-value (``suite_decide.bootstrap_p_value``) over the items every seed and
    the baseline scored, with the gate's bootstrap seed and resamples."""
    p = m.policy
    with store.session():  # the runs' scores read in one opening of the store
        per_seed = [pipeline.item_values(store.sample_scores(s.decision.run_id), p.metric)
                    for s in chosen if s.decision]
        b = (pipeline.item_values(store.sample_scores(baseline.decision.run_id), p.metric)
             if per_seed and baseline.decision is not None else {})
    if not per_seed:
        return None
    items = sorted(set.intersection(*(set(v) for v in per_seed)))
    base: Any = float(baseline.value or 0.0)
    if baseline.decision is not None:
        items = [i for i in items if i in b]
        base = np.array([b[i] for i in items])
    if not items:
        return None
    cand = np.array([[v[i] for i in items] for v in per_seed])
    return bootstrap_p_value(cand, base, p.rules.min_improvement or 0.0, p.bootstrap_resamples, p.bootstrap_seed)


def run_suite(suite: Suite, store: Store, actor: str | None = None, evaluate_decision: bool = True,
              expect_head: tuple[int, str] | None = None, progress: bool = False) -> SuiteVerdict:
    """Decide PASS/FAIL for a suite: every member must pass (each member's verdict stored as a gate of its own).

    Args:
        suite: the loaded suite (``gate.suite.load_suite``).
        store, actor, evaluate_decision, expect_head, progress: as ``pipeline.run_gate``.

    Raises:
        BadInput: a member's split is unknown or its decision split not private, its protocol file is missing, does
            not match, or its scorer does not produce its metric (before anything is read).
        RefusedByPolicy: a selection split is not dev; the access log does not hold; the candidates span several
            training runs; a member's budget cannot cover its reads (logged on every member's split; nothing spent
            on any member).
        ProtocolDrift: a member's protocol file no longer matches its lock (before any read).
    """
    sp = suite.policy
    accesslog.check_for_gate(store, expect_head, sp.require_expect_head,
                             accept_broken=sp.accept_broken_chain is not None)
    who, manager = actor_name(actor, env=store.env), SplitManager(store)
    members = [_Member(sm) for sm in suite.members]
    _prepare(members, sp.train_run, store, manager, who, evaluate_decision, progress)
    picks = _pick(members, store, who, evaluate_decision, progress)
    _check_identities(members, picks, manager, who, evaluate_decision)
    early = _before_private(members, picks, store, manager, who)
    if early is not None:
        return _stored(SuiteVerdict(suite, early, picks, [x.name for x in early
                                                          if any(not r.passed for r in x.verdict.rules)]),
                       store, manager, members, who)
    readers, reused = _reserve(suite.name, members, store, manager, who, evaluate_decision)
    baselines = _read(members, readers, who, progress, manager)
    results = [_member_verdict(m, store, manager, who, reader, baseline, r, picks)
               for m, reader, baseline, r in zip(members, readers, baselines, reused, strict=True)]
    any_improved = _holm(results) if sp.holm else None
    _, failing = intersection_union({x.name: x.passed for x in results})
    return _stored(SuiteVerdict(suite, results, picks, failing, any_improved), store, manager, members, who)


def _stored(v: SuiteVerdict, store: Store, manager: SplitManager, members: list[_Member], who: str) -> SuiteVerdict:
    """``v`` stored (``suite_results.record``, after its members' gates) with its uncounted ``result`` row on the
    first member's decision split (``history.VERDICT_DETAIL``), which ``evalgate report`` checks it against."""
    row = record_suite(store, v, who)
    manager.log_event(members[0].dec_m, who, reads.RELEASE_GATE, Outcome.RESULT.value,
                      detail=history.VERDICT_DETAIL.format(sha256=history.verdict_sha256(row), gate_id=v.gate_id,
                                                           verdict=row.verdict))
    return v


def _prepare(members: list[_Member], train_run: str | None, store: Store, manager: SplitManager, who: str,
             evaluate_decision: bool, progress: bool) -> None:
    """Every member's checks (all before any read), its stored runs, baseline digest and candidates, then its
    selection read logged and its own best / last / failed per seed (``pipeline._select``)."""
    for m in members:
        _check(m, manager, who, evaluate_decision)
    for m in members:
        m.broken = reads.check_chain(m.policy, manager, m.dec_m, who)
    digests: dict[str, str | None] = {}
    for m in members:
        p = m.policy
        if m.sm.has_selection:
            m.sel_runs, m.dec_runs = pipeline._stored_runs(p, store, m.dec_m.content_sha256, evaluate_decision)
        elif not evaluate_decision:
            m.dec_runs = pipeline._stored_runs(p.model_copy(update={"selection_split": p.decision_split}), store,
                                               m.dec_m.content_sha256, False)[1]
        key = p.baseline.checkpoint or ""
        if key not in digests or not evaluate_decision:  # a baseline's files are hashed once
            digests[key] = reads.baseline_digest(p, m.dec_runs, evaluate_decision, store,
                                                 progress)
        m.base_digest = digests[key]
        if m.sm.has_selection:
            m.part = partition_runs(m.sel_runs, m.sel_m.content_sha256, p.backend, m.base_digest)
    check_one_training_run([r for m in members for r in m.part.usable], train_run)
    for m in members:
        if m.sm.has_selection:
            manager.check(m.policy.selection_split, reads.SELECTION_PURPOSE, who)
            manager.log_read(m.sel_m, who, reads.SELECTION_PURPOSE, cached=True, detail=f"gate {m.policy.name}")
        name, version = m.policy.protocol.split("@", 1)
        m.protocol_hash = store.protocol_hash(name, version)
        if m.part.usable:
            m.own_seeds = pipeline._select(m.policy, m.part.usable)


def _pick(members: list[_Member], store: Store, who: str, evaluate_decision: bool,
          progress: bool) -> dict[SeedKey, Pick]:
    """Each seed's checkpoint for the suite (``suite_decide.pick_checkpoints`` over the selecting members), set as
    every member's best (``_member_seeds``)."""
    selecting = [m for m in members if m.sm.spec.select]
    # with no candidate on any selection split there is nothing to pick: the baseline's dev runs are not evaluated
    candidates = evaluate_decision and any(m.part.usable for m in selecting)
    picks = pick_checkpoints([SelectingMember(m.sm.name, m.sm.spec.role, m.sm.spec.margin, m.own_seeds,
                                              _baseline_dev(m, store, who, candidates, progress))
                              for m in selecting])
    template: dict[SeedKey, SeedResult] = {}
    for m in selecting:
        for s in m.own_seeds:
            template.setdefault((s.train_run, s.train_seed), s)
    for m in members:
        m.seeds = _member_seeds(m, picks, template)
    return picks


def _check_identities(members: list[_Member], picks: dict[SeedKey, Pick], manager: SplitManager, who: str,
                      evaluate_decision: bool) -> None:
    """``reads.check_identities`` once over every checkpoint the suite decides on (the picks; the baselines when
    their digest came from the store), before any decision read."""
    cks = {p.digest: p.path for p in picks.values() if p.digest is not None}
    cks.update({m.base_digest: m.policy.baseline.checkpoint for m in members
                if m.policy.baseline.checkpoint and m.base_digest and not evaluate_decision})
    if members:
        reads.check_identities(members[0].policy, manager, who, [(str(path), d) for d, path in cks.items()
                                                                 if d and path])


def _before_private(members: list[_Member], picks: dict[SeedKey, Pick], store: Store, manager: SplitManager,
                    who: str) -> list[MemberResult] | None:
    """Every member's rules that need no private data (``decide.selection_rules`` and the proxy rules, as a single
    gate applies them before its first private read). When one fails for any member the suite cannot pass: every
    member's verdict is stored as FAIL with ``decision_not_read`` and nothing private is read or reserved. None when
    all pass."""
    early = [([pipeline.runs_present_rule(m.policy, m.part)] if m.sm.has_selection and not m.part.usable else [])
             + decide.selection_rules(m.policy, m.seeds) + pipeline._proxy_rules(
        m.policy, store, m.seeds, [s for s in m.seeds if s.best is not None], who)[2] for m in members]
    bad = [f"{m.sm.name} ({', '.join(r.rule for r in rules if not r.passed)})"
           for m, rules in zip(members, early, strict=True) if any(not r.passed for r in rules)]
    if not bad:
        return None
    why = (f"member(s) {'; '.join(bad)} failed on data that is not private, so the suite failed before reading "
           "any member's decision split: no private read spent")
    out = []
    for m, rules in zip(members, early, strict=True):
        p = m.policy
        verdict = Verdict(False, p, rules, m.seeds, BaselineResult(checkpoint=p.baseline.checkpoint,
                                                                   value=p.baseline.value),
                          protocol_hash=m.protocol_hash, stale=m.part.stale, ignored=m.part.ignored,
                          failures=m.part.failures, broken_chain=m.broken, decision_not_read=why)
        pipeline._record(store, manager, m.dec_m, verdict, m.inputs(), who)
        out.append(m.result(verdict))
    return out


def _reserve(name: str, members: list[_Member], store: Store, manager: SplitManager, who: str,
             evaluate_decision: bool) -> tuple[list[reads.DecisionReader], list[ReusedDecision | None]]:
    """Per member, its decision reader: an unchanged earlier gate's runs (nothing read), or new reads planned
    (``pipeline.decision_plan``); every plan then reserved at once (``reads.commit``: all members or none)."""
    readers: list[reads.DecisionReader] = []
    plans: list[reads.Reservation | None] = []
    reused: list[ReusedDecision | None] = []
    planned: dict[tuple[Any, ...], dict[str, int]] = {}  # what a decision read shows -> digest -> member reading it
    for k, m in enumerate(members):
        chosen = [s for s in m.seeds if s.best is not None]
        inputs = m.inputs()
        targets: list[tuple[str, str | None]] = [(s.best.path, s.best.digest) for s in chosen if s.best]
        if m.policy.baseline.checkpoint:
            targets.insert(0, (m.policy.baseline.checkpoint, m.base_digest))
        prior = history.reusable(store, inputs, [d for _, d in targets]) if chosen else None
        if prior is not None and all(reads.stored_result_holds(store, manager, m.dec_m, who, m.policy, r)
                                     for r in prior[1]):
            readers.append(reads.DecisionReader(m.policy, store, who, prior[1]))
            reused.append(history.reused_decision(prior[0]))
            plans.append(None)
            continue
        targets = _share(k, m, targets if chosen else [], planned)
        reader, plan = pipeline.decision_plan(m.policy, store, manager, m.dec_m, who, targets, m.dec_runs,
                                              evaluate_decision, m.protocol_hash)
        readers.append(reader)
        reused.append(None)
        plans.append(plan)
    pending = [(i, p) for i, p in enumerate(plans) if p is not None]
    if pending:  # every member's reads in one locked step, or none
        grants = reads.commit([p for _, p in pending], manager, who, whole=f"suite {name}")
        for (i, _), g in zip(pending, grants, strict=True):
            readers[i].grant = g
    for m, r in zip(members, reused, strict=True):
        if r is not None:
            manager.log_event(m.dec_m, who, reads.RELEASE_GATE, "reused", cached=True, protocol_hash=m.protocol_hash,
                              detail=f"gate {m.policy.name} reused the decision runs of gate {r.gate_id} "
                              f"({r.created_at}): unchanged inputs, nothing read")
    return readers, reused


def _share(k: int, m: _Member, targets: list[tuple[str, str | None]],
           planned: dict[tuple[Any, ...], dict[str, int]]) -> list[tuple[str, str | None]]:
    """The targets member ``k`` reads itself: those an earlier member of the suite already reads on the same
    decision split content with the same protocol hash and backend (another metric of the same runs) are left to
    the member that reads each (``planned``: digest -> member) and shown to this one (``_show_shared``: logged
    ``re-read``, not charged); the ones left are booked as member ``k``'s, so a later member is shown them by
    ``k``."""
    readers = planned.setdefault((m.dec_m.content_sha256, m.protocol_hash, m.policy.backend), {})
    m.shares = {d: readers[d] for _, d in targets if d is not None and d in readers}
    for _, d in targets:
        if d is not None:
            readers.setdefault(d, k)
    return [t for t in targets if t[1] not in m.shares]


def _show_shared(members: list[_Member], readers: list[reads.DecisionReader], j: int, manager: SplitManager,
                 who: str) -> None:
    """After member ``j``'s reads: each later member that ``j`` reads for (``_Member.shares``) is shown those runs,
    one uncounted ``re-read`` row each on its split.

    Raises:
        EvalgateError: a run member ``j`` was to read for another is not among its reads (nothing shown silently
            in its place).
    """
    runs = {s.decision.digest: s.decision for s in members[j].seeds if s.decision is not None}
    base = readers[j].base_decision
    if base is not None:
        runs[base.digest] = base
    for m, reader in zip(members, readers, strict=True):
        for digest in sorted(d for d, by in m.shares.items() if by == j):
            run = runs.get(digest)
            if run is None:
                raise EvalgateError(f"suite member {m.sm.name} was to be shown member {members[j].sm.name}'s read "
                                    f"of checkpoint {digest}, which that member did not make")
            reader.shown[digest] = DecisionRun(run.run_id, run.metrics, digest)
            manager.log_event(m.dec_m, who, reads.RELEASE_GATE, reads.REREAD, cached=True, run_id=run.run_id,
                              protocol_hash=m.protocol_hash, checkpoint_digest=digest,
                              detail=f"gate {m.policy.name} shows the read member {members[j].sm.name} of the suite "
                                     "made of the same checkpoint, protocol, split content and backend (another "
                                     "metric of the same run): logged, not charged")


def _read(members: list[_Member], readers: list[reads.DecisionReader], who: str,
          progress: bool, manager: SplitManager) -> list[BaselineResult]:
    """Every member's decision reads (its baseline's, then each seed's pick); the grants are revoked when they end,
    whether or not they all completed. Returns each member's baseline."""
    baselines = []
    try:
        for j, (m, reader) in enumerate(zip(members, readers, strict=True)):
            reader.progress = progress
            chosen = [s for s in m.seeds if s.best is not None]
            baselines.append(_member_baseline(m, reader, who) if chosen else BaselineResult(
                checkpoint=m.policy.baseline.checkpoint, value=m.policy.baseline.value))
            reader.base_decision = baselines[-1].decision
            for s in chosen:
                assert s.best is not None
                s.decision = reader.read(s.best.path, {"train_run": s.best.train_run, "train_seed": s.train_seed,
                                                       "step": s.best.step}, s.best.digest)
            _show_shared(members, readers, j, manager, who)
    finally:
        for reader in readers:
            revoke(reader.grant)
    return baselines


def _holm(results: list[MemberResult]) -> bool:
    """Set each target's Holm-adjusted p-value (a target with none counts as p = 1); whether the smallest is <=
    the one-sided level (1 - confidence) / 2: "at least one target improved"."""
    targets = [x for x in results if x.role == "target"]
    for x, adj in zip(targets, holm([x.p_value if x.p_value is not None else 1.0 for x in targets]), strict=True):
        x.holm_p = adj
    alpha = (1 - results[0].verdict.policy.rules.confidence) / 2
    return any(x.holm_p is not None and x.holm_p <= alpha for x in targets)


def _member_verdict(m: _Member, store: Store, manager: SplitManager, who: str, reader: reads.DecisionReader,
                    baseline: BaselineResult, reused: Any, picks: dict[SeedKey, Pick]) -> MemberResult:
    """The member's statistics, rules and stored verdict (as ``pipeline.run_gate`` builds a single gate's)."""
    p = m.policy
    chosen = [s for s in m.seeds if s.best is not None]
    if not picks:
        rules = [RuleOutcome("runs_present", False, "no checkpoint of a training run and seed has runs on the "
                                                    "selecting members' splits; evaluate them with 'evalgate run'")]
        verdict = Verdict(False, p, rules, protocol_hash=m.protocol_hash, stale=m.part.stale,
                          ignored=m.part.ignored, failures=m.part.failures, broken_chain=m.broken)
        stats = None
    else:
        stats = pipeline._statistics(p, store, chosen, baseline) if chosen else None
        rules = decide.rules(p, m.seeds, baseline, stats)
        audits, calibration, proxy_rules = pipeline._proxy_rules(p, store, m.seeds, chosen, who)
        rules += proxy_rules
        verdict = Verdict(all(r.passed for r in rules), p, rules, m.seeds, baseline, stats, m.protocol_hash,
                          pipeline._audit_samples(store, [s for s in chosen if s.best and s.best.run_id]),
                          stale=m.part.stale, ignored=m.part.ignored, failures=m.part.failures, reused_from=reused,
                          reward_audit=audits, calibration=calibration,
                          rereads=[r.run_id for r in reader.shown.values()], broken_chain=m.broken)
    pipeline._record(store, manager, m.dec_m, verdict, m.inputs(), who)
    pv = _p_value(m, store, chosen, baseline) if stats else None
    return m.result(verdict, pv)
