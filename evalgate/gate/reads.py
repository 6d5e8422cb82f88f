"""Everything the gate reads from splits: tier checks, the private budget (every decision read reserved in one
locked step before the first), the decision runs (evaluated through ``evalgate.runner.evaluate.evaluate`` with purpose
``release-gate``, or taken from the store: by benchmarks, or from an unchanged earlier gate) and the baseline's
selection run."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.enums import Outcome, Tier
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.core.results import Metrics
from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import BrokenChain, DecisionRun
from evalgate.runner.grant import ReleaseGrant, _reserve_release_reads, _reserve_release_reads_all
from evalgate.scoring import metrics
from evalgate.scoring.base import SCORERS
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import RELEASE_GATE
from evalgate.store import AccessLogRepo, RunRow, Store

SELECTION_PURPOSE = "gate-selection"
REREAD = Outcome.REREAD.value
"""Outcome of a decision read that shows a stored private result again: logged, never charged (no budget counts
it, ``store._COUNTED``)."""
BROKEN_CHAIN_ACCEPTED = "broken-chain-accepted"
"""Outcome of the row a gate logs when it runs on a broken access-log chain under ``accept_broken_chain``."""
# outcomes of a logged (shown) decision read
_SHOWN = tuple(o.value for o in (Outcome.READ, Outcome.OVERRIDE, Outcome.RESERVED_READ, Outcome.REREAD))


def check_chain(policy: GatePolicy, manager: SplitManager, manifest: Any, actor: str) -> BrokenChain | None:
    """Verify the whole access-log chain before any read (``access.log.verify``): on a broken chain the budget cannot
    be counted (a deleted row reads as a refund), so the gate is refused unless ``policy.accept_broken_chain``
    gives a reason, which is logged.

    Returns:
        None for an intact chain; the ``BrokenChain`` accepted.

    Raises:
        RefusedByPolicy: the chain is broken and not accepted (logged as refused; nothing read or spent).
    """
    from evalgate.access.log import verify

    chain = verify(manager.store)
    if chain["ok"]:
        return None
    if chain["first_bad_seq"] is None:  # the rows chain, but the signed head does not hold (accesslog.check_for_gate)
        seq, why = chain["signature"].get("first_bad_seq"), f"signed head: {chain['signature']['reason']}"
        chain = {**chain, "first_bad_seq": seq, "reason": why}
    where = f"the access log's hash chain is broken at row {chain['first_bad_seq']} ({chain['reason']})"
    if not policy.accept_broken_chain:
        manager.refuse(manifest.name, RELEASE_GATE, actor,
                       f"gate {policy.name}: {where}, so the budget of split {manifest.name} cannot be counted (a "
                       "deleted row would read as reads left); nothing was read. Find out who edited the store "
                       "('evalgate audit verify'), or gate anyway with --accept-broken-chain REASON (or "
                       "accept_broken_chain in the policy), which is logged and shown in every report")
    manager.log_event(manifest, actor, RELEASE_GATE, BROKEN_CHAIN_ACCEPTED,
                      detail=f"gate {policy.name}: {where}; accepted: {policy.accept_broken_chain}")
    return BrokenChain(chain["first_bad_seq"], chain["reason"], policy.accept_broken_chain)


def decision_settings_sha256(backend: str, request: str = "generate") -> str:
    """The generation settings hash a gate's decision run has on ``backend`` (the gate passes no backend options)
    for a protocol whose scorer asks the engine for ``request`` (``scoring.base.scorer_request``)."""
    from evalgate.backends.base import check_backend
    from evalgate.backends.settings import generation_settings, settings_sha256

    return settings_sha256(generation_settings(backend, check_backend(backend, {}), request))


def shown_before(store: AccessLogRepo, names: tuple[str, ...], runs: list[RunRow], digest: str | None,
                 protocol_hash: str | None, settings: str | None) -> RunRow | None:
    """The stored decision run that a read of checkpoint ``digest`` would show again, if any: a complete run among
    ``runs`` (the decision split's content under the policy's backend) with the same checkpoint digest, protocol
    hash and, when ``settings`` is given, generation settings hash, whose result an earlier logged read of the split
    (under any of its ``names``) already showed. Showing it again reveals nothing new, so it is not charged.

    Returns:
        The latest such run, or None.
    """
    if digest is None:
        return None
    cands = [r for r in runs if r.status == "complete" and r.checkpoint_digest == digest
             and r.protocol_hash == protocol_hash and (settings is None or r.settings_sha256 == settings)]
    if not cands:
        return None
    with store.session():
        seen = {r.run_id for n in names for r in store.access_rows(n) if r.outcome in _SHOWN and r.run_id}
    shown = [r for r in cands if r.run_id in seen]
    return shown[-1] if shown else None


def stored_result_holds(store: Store, manager: SplitManager, manifest: Any, actor: str, policy: GatePolicy,
                        run: RunRow) -> bool:
    """Whether the stored decision run ``run`` may be shown again without a read (reused, or re-read): the access
    log, hash-chained and signed, recorded its result when it completed, and the store still holds that result
    (metrics and per-sample scores, ``RunRepo.result_sha256``). The store beside the log is not signed, so a result
    edited there (a failing checkpoint's private scores set to 1) must not be taken for the one the gate read.

    Returns:
        True when it holds; False when the log recorded no result for the run (a run from before these rows, or
        one the log never saw): the gate reads afresh instead.

    Raises:
        RefusedByPolicy: the stored result is not the recorded one (logged as refused; nothing read or spent).
    """
    recorded = manager.recorded_result(manifest, run.run_id)
    if recorded is None:
        return False
    now = store.result_sha256(run.run_id)
    if now == recorded:
        return True
    manager.refuse(manifest.name, RELEASE_GATE, actor,
                   f"gate {policy.name}: run {run.run_id}'s stored result (its metrics and per-sample scores, "
                   f"sha256 {now[:12]}) is not the one the access log recorded when the run completed "
                   f"({recorded[:12]}): the store was edited after the run, so its decision cannot be shown again; "
                   "nothing was read or "
                   "spent. Restore the store from a good copy and find out who edited it ('evalgate audit log "
                   f"--split {manifest.name}')", checkpoint_digest=run.checkpoint_digest)


def check_tiers(policy: GatePolicy, manager: SplitManager) -> tuple[Any, Any]:
    """The selection and decision splits' manifests, after checking their tiers (dev and private).

    Raises:
        RefusedByPolicy: the selection split is not dev tier.
        BadInput: the decision split is not private tier; a split is unknown.
    """
    sel = manager.manifest(policy.selection_split)
    if sel.tier != Tier.DEV:
        raise RefusedByPolicy(f"selection split {sel.name} is tier {sel.tier}: checkpoints are selected on a dev "
                              "split only (selecting on public or private data tunes on it); set selection_split "
                              "to a dev-tier split")
    dec = manager.manifest(policy.decision_split)
    if dec.tier != Tier.PRIVATE:
        raise BadInput(f"decision split {dec.name} is tier {dec.tier}; the release decision reads a private-tier "
                       "split: set decision_split to one")
    return sel, dec


def check_protocol(policy: GatePolicy, evaluate_decision: bool) -> None:
    """The policy's protocol file must exist and match its lock (when decision runs are evaluated), be
    ``policy.protocol`` (name@version), offer the policy's metric and, for the tool-use rules, offer tools: all
    before any read, so a typo or an edited protocol spends no private read.

    Raises:
        BadInput: naming what does not match and how to fix the policy.
        ProtocolDrift: the protocol file no longer matches its lock (evaluating only).
    """
    proto_file = policy.protocol_file or ""
    if not Path(proto_file).is_file():
        if evaluate_decision:
            raise BadInput(f"protocol file {proto_file} not found; set protocol_file in the gate policy")
        return
    from evalgate.protocol.spec import load_protocol, verify

    lp = load_protocol(proto_file)
    if lp.ref != policy.protocol:
        raise BadInput(f"gate policy {policy.name}: protocol is {policy.protocol} but protocol_file {proto_file} "
                       f"is {lp.ref}; make them agree")
    check_metric_produced(policy, lp, proto_file)
    k = metrics.pass_at_k_of(policy.metric)
    if k is not None and k not in lp.spec.pass_at_k:
        raise BadInput(f"gate policy {policy.name}: metric {policy.metric} is not reported by {lp.ref} "
                       f"(its pass_at_k is {lp.spec.pass_at_k}); use one of "
                       f"{', '.join(f'pass@{k}' for k in lp.spec.pass_at_k)} or mean_score")
    if policy.rules.tool_rules and not lp.spec.tools.agentic:
        raise BadInput(f"gate policy {policy.name}: rules.{' and rules.'.join(policy.rules.tool_rules)} cannot be "
                       f"checked: protocol {lp.ref} ({proto_file}) offers no tools, so its runs count no tool calls "
                       "or violations; drop the rule(s), or gate a protocol with a tools section")
    if evaluate_decision:
        verify(lp)


def check_metric_produced(policy: GatePolicy, lp: Any, proto_file: str) -> None:
    """The policy's metric must be one the protocol's scorer produces (``ScorerEntry.produces``): a judge's or a
    reward model's samples are never ``correct``, so their pass@1 is 0 for every checkpoint, and a gate on it would
    compare two zeros.

    Raises:
        BadInput: naming the metric, the scorer and the metrics it produces.
    """
    scorer = lp.spec.scorer.name
    entry = SCORERS.require(scorer, f" in protocol {proto_file}")
    produced = entry.produces()
    if metrics.registered_name(policy.metric) in produced:
        return
    names = [n for p in produced for n in ([f"pass@{k}" for k in lp.spec.pass_at_k] if p == "pass@k" else [p])]
    why = (f"its samples are never 'correct' (statuses: {', '.join(entry.statuses)}), so pass@k is 0 for every "
           "checkpoint" if metrics.pass_at_k_of(policy.metric) is not None else "its samples give no value of it")
    raise BadInput(f"gate policy {policy.name}: metric {policy.metric} is not produced by the {scorer} scorer of "
                   f"{lp.ref} ({proto_file}): {why}; it produces {', '.join(names)}: set metric to one of them")


@dataclass
class Reservation:
    """A gate's decision reads, planned (``plan_reserve``) and not yet logged: ``commit`` logs them."""

    gate: str
    manifest: Any
    reads: list[dict[str, Any]]
    refusal: str
    evaluate_decision: bool

    @property
    def new(self) -> int:
        """Reads the budget counts (not re-reads)."""
        return sum(1 for r in self.reads if r["outcome"] == "read")


def plan_reserve(policy: GatePolicy, manager: SplitManager, manifest: Any, actor: str,
                 targets: list[tuple[str, str | None, str | None]], evaluate_decision: bool,
                 protocol_hash: str | None, rereads: dict[int, str] | None = None) -> Reservation:
    """Check that the decision split may be read for ``release-gate`` at all (purposes, readability; a refusal is
    logged) and plan every decision read of the gate, logging none (``commit`` does).

    Args:
        targets: per read, (checkpoint path, checkpoint digest or None, stored run id or None).
        evaluate_decision: False: the reads take stored runs (logged as cached reads; no grant).
        rereads: index in ``targets`` -> the stored run (``shown_before``) the read shows again: logged as
            ``re-read``, not charged, and not evaluated (no grant read for it).

    Raises:
        RefusedByPolicy: the purpose is not allowed or the key is missing (logged).
    """
    # purposes and readability; the budget is decided by the reservation, under the lock
    manager.check(manifest.name, RELEASE_GATE, actor, reserved=True)
    again = rereads or {}
    n = len(targets)
    reads = [{"checkpoint_digest": digest, "run_id": again.get(i - 1, run_id), "cached": not evaluate_decision,
              "protocol_hash": protocol_hash, "outcome": REREAD if i - 1 in again else "read",
              "detail": f"gate {policy.name}: read {i} of {n} " + (
                  f"shows stored run {again[i - 1]} again (same checkpoint, protocol, split content and backend "
                  f"settings; seen before): logged, not charged ({path})" if i - 1 in again
                  else f"reserved before reading ({path})")}
             for i, (path, digest, run_id) in enumerate(targets, 1)]
    new = sum(1 for r in reads if r["outcome"] == "read")
    pol = manager.owner(manifest).manifest.effective_policy()
    refusal = (f"the gate needs {new} read{'s' if new != 1 else ''} of private split {manifest.name} (one per "
               f"seed's best checkpoint and the baseline not shown before), but only {{left}} of {pol.max_reads} per "
               f"{pol.window_days} days are left; nothing was read or spent. Wait for the window to pass or gate "
               "fewer seeds (another gate may hold the reads: 'evalgate audit --split " + manifest.name + "')")
    if pol.max_reads is not None and new > pol.max_reads:  # no window will ever hold them: say so, not "wait"
        refusal = (f"the gate needs {new} reads of private split {manifest.name} (one per seed's best checkpoint "
                   f"and the baseline not shown before), more than its whole budget of {pol.max_reads} per "
                   f"{pol.window_days} days: no window will ever cover this gate; nothing was read or spent. Use a "
                   "fixed baseline value (baseline: {{value: ...}}, no read) or evaluate fewer seeds on the selection "
                   "split (docs/GATING.md, 'Budget and concurrency')")
    return Reservation(policy.name, manifest, reads, refusal, evaluate_decision)


def commit(plans: list[Reservation], manager: SplitManager, actor: str, whole: str | None = None
           ) -> list[ReleaseGrant | None]:
    """Log every planned read at once (one locked step, all or none) and issue, per plan that evaluates new reads,
    the grant its decision runs are made under (each logged as ``reserved-read``). One plan: that gate's reads of
    its split (``SplitManager.reserve``); several (a suite's members, ``whole`` naming the suite): every member's
    reads of its split within every split's budget (``SplitManager.reserve_all``).

    Returns:
        Per plan, its grant (None: stored runs are taken, or nothing new is read).

    Raises:
        RefusedByPolicy: a budget cannot cover its plan's new reads (logged; nothing is spent on any plan).
    """
    if len(plans) == 1 and whole is None:
        p = plans[0]
        if p.evaluate_decision and p.new:
            return [_reserve_release_reads(p.gate, manager, p.manifest, actor, p.reads, p.refusal)]
        manager.reserve(p.manifest, actor, RELEASE_GATE, p.reads, p.refusal)
        return [None]
    return _reserve_release_reads_all(manager, actor, [(p.gate, p.manifest, p.reads, p.refusal, p.evaluate_decision)
                                                       for p in plans], whole or "the gate")


def reserve(policy: GatePolicy, manager: SplitManager, manifest: Any, actor: str,
            targets: list[tuple[str, str | None, str | None]], evaluate_decision: bool,
            protocol_hash: str | None, rereads: dict[int, str] | None = None) -> ReleaseGrant | None:
    """Reserve every decision read of the gate at once (``plan_reserve`` then ``commit``: one locked step, all or
    none), after checking that the split may be read for ``release-gate`` at all; evaluating, return the grant its
    new decision runs are made under (each logged as ``reserved-read``).

    Raises:
        RefusedByPolicy: the purpose is not allowed, the key is missing, or the budget cannot cover every new read
            (logged; nothing is spent).
    """
    plan = plan_reserve(policy, manager, manifest, actor, targets, evaluate_decision, protocol_hash, rereads)
    return commit([plan], manager, actor)[0]


def check_identities(policy: GatePolicy, manager: SplitManager, actor: str,
                     targets: list[tuple[str, str]]) -> None:
    """Refuse the gate when a checkpoint it decides on (each seed's best, the baseline) no longer holds the files
    its stored runs were made of: each ``(path, digest)`` is hashed from its bytes (``verify_identity``; no digest
    from the stat-keyed cache, whose entries a store writer can edit), before any decision read.

    A path that holds no checkpoint any more (moved or deleted) is not verified, with a warning on stderr: the
    gate certifies no bytes there, as it cannot for a checkpoint changed after it ran (``ship`` names the identity
    to check a copy against).

    Raises:
        RefusedByPolicy: a checkpoint's files changed (logged on the decision split, nothing read or spent).
    """
    from evalgate.checkpoints.identity import verify_identity
    from evalgate.checkpoints.layout import is_checkpoint
    from evalgate.core.formatting import short_digest

    for path, digest in targets:
        p = Path(path)
        if not is_checkpoint(p):
            print(f"warning: gate {policy.name}: {path} holds no checkpoint now; its identity "
                  f"{short_digest(digest)} was not verified from its files", file=sys.stderr)
            continue
        now = verify_identity(p, digest, env=manager.store.env)
        if now != digest:
            manager.refuse(policy.decision_split, RELEASE_GATE, actor, (
                f"gate {policy.name}: checkpoint {path} is not the checkpoint its runs evaluated (identity "
                f"{short_digest(digest)} in the store, {short_digest(now)} from its files now): its weights, config, "
                "tokenizer or index changed since. Evaluate it again ('evalgate run' on "
                f"{policy.selection_split}), then gate"), checkpoint_digest=digest)


def baseline_digest(policy: GatePolicy, decision_runs: list[RunRow], resolve: bool,
                    store: Store, progress: bool = False) -> str | None:
    """The baseline checkpoint's digest (it is no training candidate), or None for a fixed value (``store``: its
    ``recorded_checkpoint``, so a baseline known by a sha256 identity keeps it, as its evaluation will, and its
    environment's caches; ``progress``: show the libraries' bars while it resolves, e.g. a GGUF file's
    conversion)."""
    path = policy.baseline.checkpoint
    if path is None:
        return None
    if resolve:
        from evalgate.checkpoints.resolve import resolve_checkpoint
        from evalgate.core.progress import progress_bars

        with progress_bars(progress):
            return resolve_checkpoint(path, recorded=store.recorded_checkpoint, verify=True, env=store.env).digest
    prior = [r for r in decision_runs if r.checkpoint_path == path]
    return prior[-1].checkpoint_digest if prior else None


def evaluate_for_gate(protocol_file: str, path: str, split: str, purpose: str, actor: str, store: Store,
                      seed_info: dict[str, Any] | None = None, backend: str = "hf",
                      grant: ReleaseGrant | None = None, progress: bool = False) -> dict[str, Any]:
    """Evaluate one checkpoint for the gate (``evalgate.runner.evaluate.evaluate``); the run's document.
    ``grant``: the release grant that admits a decision (release-gate) read. ``progress``: say on stderr what is
    evaluated and show the run's bars, which count samples only (never a score: a private split's values stay
    out of any log)."""
    from evalgate.core.progress import stage
    from evalgate.runner.evaluate import RunOptions, evaluate

    info = seed_info or {}
    stage(f"gate: evaluating {path} on {split} ({purpose})", progress)
    return evaluate(protocol_file, path, split,
                    RunOptions(purpose=purpose, actor=actor, backend=backend, train_run=info.get("train_run"),
                               train_seed=info.get("train_seed"), step=info.get("step"), progress=progress,
                               grant=grant), store)


class DecisionReader:
    """Reads the decision split for one gate, after ``reserve``: with a grant, evaluates a checkpoint there (its
    read reserved); without one, takes the latest stored run of the checkpoint among ``prior_runs`` (benchmarks'
    release-gate runs, or the decision runs of an unchanged earlier gate), logging nothing more."""

    def __init__(self, policy: GatePolicy, store: Store, actor: str, prior_runs: list[RunRow],
                 grant: ReleaseGrant | None = None):
        self.policy, self.store, self.actor, self.prior_runs, self.grant = policy, store, actor, prior_runs, grant
        self.evaluate_decision = grant is not None
        self.shown: dict[str, DecisionRun] = {}  # checkpoint digest -> the stored run a re-read shows again
        self.progress = False  # evaluations say what they read and show sample counts on stderr
        # the decision split's guard: a stored run taken for a charged read has its result checked or recorded
        self.manager: SplitManager | None = None
        self.manifest: Any = None
        self.base_decision: DecisionRun | None = None  # the baseline's decision run once read (a suite shares it)

    def prior(self, path: str, digest: str | None) -> RunRow:
        """The latest stored run of the checkpoint (by digest when known, else by path).

        Raises:
            BadInput: the store holds none.
        """
        prior = [r for r in self.prior_runs if (r.checkpoint_digest == digest if digest is not None
                                                else r.checkpoint_path == path)]
        if not prior:
            raise BadInput(f"no decision run of {path} on {self.policy.decision_split} in the store")
        return prior[-1]

    def read(self, path: str, seed_info: dict[str, Any] | None, digest: str | None) -> DecisionRun:
        """The decision run of the checkpoint at ``path`` (``digest``: its digest when known).

        Raises:
            BadInput: reusing, and the store holds no decision run of that checkpoint.
            RefusedByPolicy: a stored run taken for a charged read is not the result the access log recorded
                (``stored_result_holds``); one whose result it never recorded gets its ``result`` row now.
        """
        p = self.policy
        if digest is not None and digest in self.shown:  # a re-read: the stored result, nothing evaluated
            return self.shown[digest]
        if self.grant is not None:
            doc = evaluate_for_gate(p.protocol_file or "", path, p.decision_split, RELEASE_GATE, self.actor,
                                    self.store, seed_info, p.backend, self.grant, self.progress)
            return DecisionRun(doc["run_id"], Metrics(doc["metrics"]), doc["checkpoint"]["digest"])
        run = self.prior(path, digest)
        m = self.manager
        with self.store.session():  # store-only from here: the log's record and the stored result, one opening
            if m is not None and not stored_result_holds(self.store, m, self.manifest, self.actor, p, run):
                m.log_result(self.manifest, self.actor, run.run_id, run.checkpoint_digest,
                             run.protocol_hash, self.store.result_sha256(run.run_id))  # what this read showed
        return DecisionRun(run.run_id, Metrics(run.metrics), run.checkpoint_digest)
