"""``run_gate``: the gate's steps in order.

1. read the store's complete and failed runs of the protocol on the selection split, the latest per checkpoint,
   grouped by training seed (the selection split's read is logged);
2. per seed, pick best / last / failed (``select``), with the training-log guards (``guards``);
3. evaluate the proxy protocols (an LLM judge, a reward model; ``gate.proxies``) on each seed's best and the
   baseline on a dev-tier split, for the report: they decide nothing, and a failure spends nothing private;
   then apply every rule that needs no private data (``decide.selection_rules``: training-log guards and triad,
   ``min_seeds``; the proxy calibration, the RM triad, the reward audit): one that fails ends the gate here, FAIL,
   with no private read spent (``Verdict.decision_not_read``);
4. when an earlier stored gate had the very same inputs (``history``: policy, protocol hash, split contents,
   candidate runs, baseline), take its decision runs: nothing is read or spent;
5. else reserve every decision read at once (``reads.reserve``: one locked step; refused, having spent nothing, when
   the private budget cannot cover all of them), then evaluate each seed's best (and a baseline checkpoint) on the
   decision split with purpose ``release-gate``; the generation cache makes a repeated evaluation cheap;
6. compute the statistics and apply every rule (``decide``), store the verdict (``history``) and return it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import evalgate.access.log as accesslog
import evalgate.gate.decide as decide
import evalgate.gate.guards as guards
import evalgate.gate.history as history
import evalgate.gate.reads as reads
from evalgate.core.enums import Outcome, Tier
from evalgate.core.results import Metrics
from evalgate.gate.policy import GatePolicy
from evalgate.gate.proxies import Target, check_proxies, proxy_section
from evalgate.gate.results import (
    AuditSample,
    AuditSamples,
    BaselineResult,
    CalibrationRow,
    DecisionRun,
    DevRun,
    ReusedDecision,
    RewardAudit,
    RuleOutcome,
    SeedResult,
    Statistics,
    Verdict,
    not_checkable,
)
from evalgate.gate.select import (
    RunPartition,
    check_one_training_run,
    partition_runs,
    select_checkpoints,
    weights_finite,
)
from evalgate.rlhf.calibration import calibration_rule, calibration_section
from evalgate.rlhf.reward_audit import audits_for_checkpoints
from evalgate.rlhf.triad import triad_rule
from evalgate.runner.grant import revoke
from evalgate.scoring import metrics
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import RELEASE_GATE, actor_name
from evalgate.store import RunRepo, RunRow, SampleScore, Store


def item_values(rows: list[SampleScore], metric: str) -> dict[str, float]:
    """Per-item metric values from a run's sample scores (``Store.sample_scores``); see
    ``evalgate.scoring.metrics.get_metric`` for the definitions.

    Raises:
        BadInput: an item with fewer than k samples for pass@k.
    """
    return metrics.item_values(metrics.group_by_item(r.as_dict() for r in rows), metric)


def _select(policy: GatePolicy, runs: list[RunRow]) -> list[SeedResult]:
    """Best/last/failed per seed, with the guards' trips and the training-log diagnostics attached."""
    prelim = select_checkpoints(runs, policy.metric, policy.selection.collapse_drop)
    logs = guards.train_logs(policy, prelim)
    per_seed = guards.seed_guards(policy, prelim, logs)
    trips = {s: g.trips for s, g in per_seed.items()}
    bad_w: set[str] = set()
    if policy.selection.check_weights:
        bad_w = {c.digest for s in prelim for c in s.checkpoints if weights_finite(c.path) is False}
    seeds = select_checkpoints(runs, policy.metric, policy.selection.collapse_drop, trips, bad_w)
    for s in seeds:
        guards.attach_diagnostics(s, logs.get((s.train_run, s.train_seed)), per_seed.get((s.train_run, s.train_seed)))
    return seeds


def _baseline(policy: GatePolicy, reader: reads.DecisionReader, sel_runs: list[RunRow], sel_sha256: str,
              who: str, digest: str | None) -> BaselineResult:
    bl = policy.baseline
    if bl.checkpoint is None:
        return BaselineResult(value=bl.value)
    decision = reader.read(bl.checkpoint, None, digest)
    dev_runs = [r for r in sel_runs if r.status == "complete" and r.checkpoint_digest == decision.digest
                and r.split_sha256 == sel_sha256 and r.backend == policy.backend]
    dev = None
    if dev_runs:
        dev = DevRun(dev_runs[-1].run_id, Metrics(dev_runs[-1].metrics))
    elif reader.evaluate_decision:
        doc = reads.evaluate_for_gate(policy.protocol_file or "", bl.checkpoint, policy.selection_split,
                                      reads.SELECTION_PURPOSE, who, reader.store, backend=policy.backend,
                                      progress=reader.progress)
        dev = DevRun(doc["run_id"], Metrics(doc["metrics"]))
    return BaselineResult(checkpoint=bl.checkpoint, decision=decision, dev=dev)


def _stored_runs(policy: GatePolicy, store: RunRepo, decision_sha256: str,
                 evaluate_decision: bool) -> tuple[list[RunRow], list[RunRow]]:
    """The protocol's runs on the selection split (of ``policy.train_run`` when set), and, when decision runs are
    reused, the complete ones on the decision split's current content under the policy's backend."""
    name, version = policy.protocol.split("@", 1)
    where: dict[str, Any] = {"protocol_name": name, "protocol_version": version, "split": policy.selection_split}
    if policy.train_run:
        where["train_run"] = policy.train_run
    with store.session():
        dec_runs = [] if evaluate_decision else store.runs(  # by content: a decision split's runs under any name
            protocol_name=name, protocol_version=version, tier=Tier.PRIVATE, status="complete",
            split_sha256=decision_sha256, backend=policy.backend)
        return store.runs(**where), dec_runs


def _statistics(policy: GatePolicy, store: RunRepo, chosen: list[SeedResult], baseline: BaselineResult) -> Statistics:
    """``decide.statistics`` over the per-item values of the seeds' and the baseline's decision runs (read in one
    store session)."""
    with store.session():
        per_seed = {s.train_seed: item_values(store.sample_scores(s.decision.run_id), policy.metric)
                    for s in chosen if s.decision}
        base: dict[str, float] | float = (item_values(store.sample_scores(baseline.decision.run_id), policy.metric)
                                          if baseline.decision else float(baseline.value or 0.0))
    return decide.statistics(policy.metric, per_seed, base, policy.rules.confidence, policy.bootstrap_resamples,
                             policy.bootstrap_seed)


def run_gate(policy: GatePolicy, store: Store, actor: str | None = None,
             evaluate_decision: bool = True, expect_head: tuple[int, str] | None = None,
             progress: bool = False) -> Verdict:
    """Decide PASS/FAIL for a policy, and store the verdict (``Verdict.gate_id``).

    Args:
        policy: the loaded policy (``load_policy``).
        store: the Store (default ``$EVALGATE_HOME``).
        actor: who runs the gate (default ``$EVALGATE_ACTOR`` or the OS user).
        evaluate_decision: False reuses the latest complete release-gate runs in the store instead of evaluating
            (benchmarks); the reads are still reserved, logged and counted.
        expect_head: ``(seq, row_hash)`` the access log must hold (``--expect-head``; default
            ``$EVALGATE_EXPECT_HEAD``); ``policy.require_expect_head`` refuses a gate without one.
        progress: say on stderr what each evaluation reads, with bars counting its samples (counts only).

    Raises:
        BadInput: unknown split, decision split not private, missing protocol file, metric absent.
        RefusedByPolicy: selection split not dev; the private budget cannot cover the gate's reads (nothing spent);
            the access log's signed head or expected head does not hold (``access.log.check_for_gate``).
        ProtocolDrift: the protocol file no longer matches its lock (before any read).
        RefusedByPolicy: the candidates span several training runs and the policy names none (``train_run``;
            ``select.check_one_training_run``; before any read).
        EvalgateError: a proxy protocol is invalid or cannot run (``gate.proxies``; before any decision read).
    """
    accesslog.check_for_gate(store, expect_head, policy.require_expect_head,  # before any read
                             accept_broken=policy.accept_broken_chain is not None)
    who = actor_name(actor, env=store.env)
    name, version = policy.protocol.split("@", 1)
    manager = SplitManager(store)
    sel_m, dec_m = reads.check_tiers(policy, manager)
    reads.check_protocol(policy, evaluate_decision)  # before any read: a typo must not spend a private read
    proxy_checked = check_proxies(policy, manager)
    broken = reads.check_chain(policy, manager, dec_m, who)  # a broken chain cannot count the budget
    sel_runs, dec_runs = _stored_runs(policy, store, dec_m.content_sha256, evaluate_decision)
    base_digest = reads.baseline_digest(policy, dec_runs, evaluate_decision, store, progress)
    part = partition_runs(sel_runs, sel_m.content_sha256, policy.backend, base_digest)
    check_one_training_run(part.usable, policy.train_run)  # before any read: seeds of two runs are not one seed
    manager.check(policy.selection_split, reads.SELECTION_PURPOSE, who)
    manager.log_read(sel_m, who, reads.SELECTION_PURPOSE, cached=True, detail=f"gate {policy.name}")
    protocol_hash = store.protocol_hash(name, version)
    inputs = history.gate_inputs(policy, protocol_hash, sel_m.content_sha256, dec_m.content_sha256, part.usable,
                                 base_digest)
    if not part.usable:
        rule = runs_present_rule(policy, part)
        verdict = Verdict(False, policy, [rule], protocol_hash=protocol_hash, stale=part.stale,
                          ignored=part.ignored, failures=part.failures, broken_chain=broken)
        _record(store, manager, dec_m, verdict, inputs, who)
        return verdict

    seeds = _select(policy, part.usable)
    chosen = [s for s in seeds if s.best is not None]
    reads.check_identities(policy, manager, who, [(s.best.path, s.best.digest) for s in chosen if s.best] + (
        [(policy.baseline.checkpoint, base_digest)]  # resolved from its bytes above when evaluate_decision
        if policy.baseline.checkpoint and base_digest and not evaluate_decision else []))
    proxies = proxy_section(policy, proxy_checked, _proxy_targets(policy, chosen, base_digest), store, manager, who,
                            evaluate_decision, progress)  # on dev, before any decision read
    early = decide.selection_rules(policy, seeds)  # every rule that needs no private data, before the first read
    audits, calibration, proxy_rules = _proxy_rules(policy, store, seeds, chosen, who)
    failed = [r.rule for r in early + proxy_rules if not r.passed]
    if failed:
        verdict = Verdict(False, policy, early + proxy_rules, seeds,
                          BaselineResult(checkpoint=policy.baseline.checkpoint, value=policy.baseline.value), None,
                          protocol_hash,
                          _audit_samples(store, chosen), stale=part.stale, ignored=part.ignored, failures=part.failures,
                          reward_audit=audits, calibration=calibration, proxies=proxies, broken_chain=broken,
                          decision_not_read=f"{', '.join(failed)} failed on data that is not private, so the gate "
                                            f"failed before reading {policy.decision_split}: no private read spent")
        _record(store, manager, dec_m, verdict, inputs, who)
        return verdict
    reader, reused = _decision_reader(policy, store, manager, dec_m, who, inputs, chosen, dec_runs,
                                      evaluate_decision, protocol_hash)
    reader.progress = progress
    try:
        baseline = _baseline(policy, reader, sel_runs, sel_m.content_sha256, who, base_digest)
        for s in chosen:
            assert s.best is not None
            s.decision = reader.read(s.best.path, {"train_run": s.best.train_run, "train_seed": s.train_seed,
                                                   "step": s.best.step}, s.best.digest)
    finally:
        revoke(reader.grant)  # the grant lives inside this decision only

    stats = _statistics(policy, store, chosen, baseline) if chosen else None
    rules = decide.rules(policy, seeds, baseline, stats) + proxy_rules
    samples = _audit_samples(store, chosen)
    verdict = Verdict(all(r.passed for r in rules), policy, rules, seeds, baseline, stats, protocol_hash, samples,
                      stale=part.stale, ignored=part.ignored, failures=part.failures, reused_from=reused,
                      reward_audit=audits, calibration=calibration, proxies=proxies,
                      rereads=[r.run_id for r in reader.shown.values()], broken_chain=broken)
    _record(store, manager, dec_m, verdict, inputs, who)
    return verdict


def _record(store: Store, manager: SplitManager, dec_m: Any, verdict: Verdict, inputs: dict[str, Any],
            who: str) -> None:
    """Store the verdict (``history.record``) and append its uncounted ``result`` row to the decision split's log
    (``history.VERDICT_DETAIL``), which ``evalgate report`` checks the stored verdict against; in one store
    session (each write still its own transaction)."""
    with store.session():
        gate_id = history.record(store, verdict, inputs, who)
        row = store.gates(gate_id=gate_id)[0]
        manager.log_event(dec_m, who, RELEASE_GATE, Outcome.RESULT.value, protocol_hash=verdict.protocol_hash,
                          detail=history.VERDICT_DETAIL.format(sha256=history.verdict_sha256(row), gate_id=gate_id,
                                                               verdict=row.verdict))


def _proxy_targets(policy: GatePolicy, chosen: list[SeedResult], base_digest: str | None) -> list[Target]:
    """What the proxy protocols (``policy.proxy_protocols``) score: the baseline checkpoint first (a pairwise judge
    reads its stored completions), then each seed's best."""
    out = [Target("baseline", policy.baseline.checkpoint, base_digest)] if policy.baseline.checkpoint else []
    return out + [Target("seed", s.best.path, s.best.digest, s.best.train_run, s.train_seed, s.best.step)
                  for s in chosen if s.best is not None]


def _proxy_rules(policy: GatePolicy, store: Store, seeds: list[SeedResult], chosen: list[SeedResult], who: str
                 ) -> tuple[list[RewardAudit], list[CalibrationRow], list[RuleOutcome]]:
    """The rules on proxy rewards: the reward audit of the best checkpoints' human-rated runs (its Spearman rule
    applies where people rated), each proxy scorer's calibration against raters (a proxy's metric decides only
    when calibrated) and the RLHF triad (RM score up, the metric down, length up).

    Returns:
        (reward audits, calibration rows for the report, the rules they add).
    """
    audits = [RewardAudit.from_dict(a) for a in audits_for_checkpoints(
        store, [s.best.digest for s in chosen if s.best], policy.reward_audit, who)]
    rules = [RuleOutcome("reward_human_spearman", bool(a.rule.passed), f"{a.checkpoint}: {a.rule.detail}")
             for a in audits if a.rule.passed is not None]
    if policy.reward_audit.min_reward_human_spearman is not None and not rules:
        rules.append(not_checkable("reward_human_spearman", "no best checkpoint has a human-rated run with a defined "
                                   "reward-human Spearman's rho (" + ("; ".join(
                                       f"{a.checkpoint}: {a.rule.detail}" for a in audits)
                                       or "no rated run") + "); rate one in 'evalgate serve'",
                                   policy.rules.accept_not_checkable))
    calibration = calibration_section(store, policy)
    gated = next((c for c in calibration if c["role"] == "gated"), None)
    for found in (calibration_rule(store, policy, gated), triad_rule(store, policy, seeds)):
        if found is not None:
            rule, passed, detail = found
            rules.append(RuleOutcome(rule, passed, detail) if passed is not None
                         else not_checkable(rule, detail, policy.rules.accept_not_checkable))
    return audits, [CalibrationRow.from_dict(c) for c in calibration], rules


def _decision_reader(policy: GatePolicy, store: Store, manager: SplitManager, dec_m: Any, who: str,
                     inputs: dict[str, Any], chosen: list[SeedResult], dec_runs: list[RunRow],
                     evaluate_decision: bool, protocol_hash: str | None
                     ) -> tuple[reads.DecisionReader, ReusedDecision | None]:
    """The reader of the decision runs: an unchanged earlier gate's, when the log recorded each one's result and the
    store still holds it (nothing read or spent; one uncounted ``reused`` row says so in the access log), or new
    reads, all reserved first (``reads.reserve``).

    Raises:
        RefusedByPolicy: a stored decision run it would show again was edited (``reads.stored_result_holds``)."""
    targets: list[tuple[str, str | None]] = [(s.best.path, s.best.digest) for s in chosen if s.best is not None]
    if policy.baseline.checkpoint:
        targets.insert(0, (policy.baseline.checkpoint, inputs["baseline_digest"]))
    prior = history.reusable(store, inputs, [d for _, d in targets]) if targets else None
    if prior is not None and all(reads.stored_result_holds(store, manager, dec_m, who, policy, r) for r in prior[1]):
        row, runs = prior
        reused = history.reused_decision(row)
        manager.log_event(dec_m, who, RELEASE_GATE, "reused", cached=True, protocol_hash=protocol_hash,
                          detail=f"gate {policy.name} reused the decision runs of gate {reused.gate_id} "
                          f"({reused.created_at}): unchanged inputs, nothing read")
        return reads.DecisionReader(policy, store, who, runs), reused
    reader, plan = decision_plan(policy, store, manager, dec_m, who, targets, dec_runs, evaluate_decision,
                                 protocol_hash)
    if plan is not None:
        reader.grant = reads.commit([plan], manager, who)[0]
    return reader, None


def decision_plan(policy: GatePolicy, store: Store, manager: SplitManager, dec_m: Any, who: str,
                  targets: list[tuple[str, str | None]], dec_runs: list[RunRow], evaluate_decision: bool,
                  protocol_hash: str | None) -> tuple[reads.DecisionReader, reads.Reservation | None]:
    """The reader of new decision reads of ``targets`` (baseline first, then each seed's best) and its planned
    reservation (``reads.plan_reserve``; None: no target), not yet logged: the caller commits it
    (``reads.commit``) and sets ``reader.grant`` to the grant it returns. A suite commits every member's plan at
    once."""
    reader = reads.DecisionReader(policy, store, who, dec_runs)
    if not targets:
        return reader, None
    shown = _shown_before(policy, store, manager, dec_m, who, targets, evaluate_decision, protocol_hash)
    runs_of = [None if evaluate_decision or i in shown else reader.prior(path, digest).run_id
               for i, (path, digest) in enumerate(targets)]
    plan = reads.plan_reserve(policy, manager, dec_m, who, [(p, d, r) for (p, d), r in zip(targets, runs_of,
                                                                                             strict=True)],
                              evaluate_decision, protocol_hash, {i: run.run_id for i, run in shown.items()})
    reader.shown = {run.checkpoint_digest: DecisionRun(run.run_id, Metrics(run.metrics), run.checkpoint_digest)
                    for run in shown.values()}
    reader.evaluate_decision = evaluate_decision
    reader.manager, reader.manifest = manager, dec_m
    return reader, plan


def _shown_before(policy: GatePolicy, store: Store, manager: SplitManager, dec_m: Any, who: str,
                  targets: list[tuple[str, str | None]], evaluate_decision: bool,
                  protocol_hash: str | None) -> dict[int, RunRow]:
    """Per target index, the stored decision run a read would show again (``reads.shown_before``): same checkpoint
    digest, protocol hash, split content and backend (and, when evaluating, the generation settings the decision
    run would have), already shown by a logged read, its result the one the log recorded
    (``reads.stored_result_holds``; an edited one is refused). Those reads are logged as ``re-read`` and not
    charged."""
    name, version = policy.protocol.split("@", 1)
    runs = store.runs(protocol_name=name, protocol_version=version, status="complete", tier=Tier.PRIVATE,
                      split_sha256=dec_m.content_sha256, backend=policy.backend, purpose=RELEASE_GATE)
    settings = None
    if evaluate_decision:
        from evalgate.scoring.base import scorer_request

        recorded = store.protocol_resolved(name, version)
        scorer = (recorded[1].get("scorer") or {}).get("name") if recorded else None
        request = scorer_request(scorer) if scorer else "generate"
        settings = reads.decision_settings_sha256(policy.backend, request)
    names = manager.owner(dec_m).names
    out = {}
    for i, (_, digest) in enumerate(targets):
        run = reads.shown_before(store, names, runs, digest, protocol_hash, settings)
        if run is not None and reads.stored_result_holds(store, manager, dec_m, who, policy, run):
            out[i] = run
    return out


def runs_present_rule(policy: GatePolicy, part: RunPartition) -> RuleOutcome:
    """The failed ``runs_present`` rule of a gate (or a suite's selecting member) whose selection split holds no
    usable run of a candidate checkpoint: what is missing and the command that adds it."""
    return RuleOutcome("runs_present", False, f"no run of {policy.protocol} on {policy.selection_split} (current "
                                              f"content, backend {policy.backend}) of a checkpoint with a training "
                                              "run and seed; evaluate the checkpoints with 'evalgate run' or "
                                              "'evalgate sweep' first, or pass 'evalgate gate --evaluate-missing "
                                              "GLOB'" + _aside_note(part))


def _aside_note(part: RunPartition) -> str:
    counts = [f"{len(v)} {k}" for k, v in (("stale", part.stale), ("ignored", part.ignored),
                                           ("failed", part.failures)) if v]
    return f" ({', '.join(counts)} run(s) set aside: see stale, ignored, failures)" if counts else ""


def _audit_samples(store: Store, chosen: list[SeedResult], k: int = 3, max_chars: int = 1500) -> AuditSamples:
    """Dev samples of the seeds' best checkpoints: highest-scoring, lowest-scoring and longest (never private:
    they come from the selection runs, dev tier by ``reads.check_tiers``); a sample of an agentic run carries its
    trajectory (``_with_trajectories``). The runs are read in one store session."""
    with store.session():
        return _audit_samples_read(store, chosen, k, max_chars)


def _audit_samples_read(store: Store, chosen: list[SeedResult], k: int, max_chars: int) -> AuditSamples:
    rows: list[AuditSample] = []
    for s in chosen:
        assert s.best is not None
        for r in store.samples(s.best.run_id):
            rows.append(AuditSample(seed=s.train_seed, step=s.best.step, run_id=s.best.run_id, item_id=r.item_id,
                                    sample_index=r.sample_index, sample_seed=r.seed, score=r.score,
                                    status=r.status, completion_tokens=r.completion_tokens,
                                    finish_reason=r.finish_reason, extracted=r.extracted,
                                    text=(r.text or "")[:max_chars]))
    if not rows:
        return AuditSamples()
    return _with_trajectories(store, AuditSamples(
        highest_scoring=sorted(rows, key=lambda r: (-r.score, r.item_id))[:k],
        lowest_scoring=sorted(rows, key=lambda r: (r.score, r.item_id))[:k],
        longest=sorted(rows, key=lambda r: (-(r.completion_tokens or 0), r.item_id))[:k]), max_chars)


def _with_trajectories(store: Store, shown: AuditSamples, max_chars: int) -> AuditSamples:
    """``shown`` with each sample of an agentic run given its ``trajectory`` (``views.trajectories.trajectory_view``);
    the turns are read for the shown samples only, from the same run as their text."""
    from evalgate.views.trajectories import trajectory_view, turns_by_sample

    items: dict[str, set[str]] = {}
    for r in shown.rows():
        items.setdefault(r.run_id, set()).add(r.item_id)
    turns = {(run_id, *key): ts for run_id, ids in items.items()
             for key, ts in turns_by_sample(store, store.runs(run_id=run_id)[0], sorted(ids)).items()}

    def view(r: AuditSample) -> AuditSample:
        ts = turns.get((r.run_id, r.item_id, r.sample_index, r.sample_seed))
        return dataclasses.replace(r, trajectory=trajectory_view(ts, max_chars)) if ts else r

    return AuditSamples(**{kind: [view(r) for r in getattr(shown, kind)] for kind in AuditSamples.KINDS})
