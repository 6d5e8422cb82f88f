"""Everything the gate reads from splits: tier checks, the private budget (checked for all reads before the first),
the decision runs (evaluated through ``evalgate.run.evaluate`` with purpose ``release-gate``, or reused from the
store by benchmarks) and the baseline's selection run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.errors import BadInput, RefusedByPolicy
from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import DecisionRun
from evalgate.runner.grant import ReleaseGrant
from evalgate.scoring import metrics
from evalgate.splits import RELEASE_GATE, SplitManager
from evalgate.store import Store

SELECTION_PURPOSE = "gate-selection"


def check_tiers(policy: GatePolicy, manager: SplitManager) -> tuple[Any, Any]:
    """The selection and decision splits' manifests, after checking their tiers (dev and private).

    Raises:
        RefusedByPolicy: the selection split is not dev tier.
        BadInput: the decision split is not private tier; a split is unknown.
    """
    sel = manager.manifest(policy.selection_split)
    if sel.tier != "dev":
        raise RefusedByPolicy(f"selection split {sel.name} is tier {sel.tier}: checkpoints are selected on a dev "
                              "split only (selecting on public or private data tunes on it); set selection_split "
                              "to a dev-tier split")
    dec = manager.manifest(policy.decision_split)
    if dec.tier != "private":
        raise BadInput(f"decision split {dec.name} is tier {dec.tier}; the release decision reads a private-tier "
                       "split: set decision_split to one")
    return sel, dec


def check_protocol(policy: GatePolicy, evaluate_decision: bool) -> None:
    """The policy's protocol file must exist (when decision runs are evaluated), be ``policy.protocol``
    (name@version) and offer the policy's metric.

    Raises:
        BadInput: naming what does not match and how to fix the policy.
    """
    proto_file = policy.protocol_file or ""
    if not Path(proto_file).is_file():
        if evaluate_decision:
            raise BadInput(f"protocol file {proto_file} not found; set protocol_file in the gate policy")
        return
    from evalgate.protocol import load_protocol

    lp = load_protocol(proto_file)
    if lp.ref != policy.protocol:
        raise BadInput(f"gate policy {policy.name}: protocol is {policy.protocol} but protocol_file {proto_file} "
                       f"is {lp.ref}; make them agree")
    k = metrics.pass_at_k_of(policy.metric)
    if k is not None and k not in lp.spec.pass_at_k:
        raise BadInput(f"gate policy {policy.name}: metric {policy.metric} is not reported by {lp.ref} "
                       f"(its pass_at_k is {lp.spec.pass_at_k}); use one of "
                       f"{', '.join(f'pass@{k}' for k in lp.spec.pass_at_k)} or mean_score")


def check_budget(manager: SplitManager, manifest: Any, needed: int, actor: str) -> None:
    """Refuse (and log the refusal) when the private split's budget cannot cover ``needed`` reads.

    Raises:
        RefusedByPolicy: too few reads left in the window.
    """
    pol = manifest.effective_policy()
    if pol.max_reads is None:
        return
    used = manager.reads_in_window(manifest.name, pol)
    if used + needed > pol.max_reads:
        msg = (f"the gate needs {needed} reads of private split {manifest.name} (one per seed's best checkpoint "
               f"and the baseline), but only {max(0, pol.max_reads - used)} of {pol.max_reads} per "
               f"{pol.window_days} days are left; wait for the window to pass or gate fewer seeds")
        manager._log(manifest, actor, RELEASE_GATE, "refused", False, None, None, None, msg)
        raise RefusedByPolicy(msg)


def baseline_digest(policy: GatePolicy, decision_runs: list[dict[str, Any]], resolve: bool) -> str | None:
    """The baseline checkpoint's digest (it is no training candidate), or None for a fixed value."""
    path = policy.baseline.checkpoint
    if path is None:
        return None
    if resolve:
        from evalgate.checkpoints import resolve_checkpoint
        from evalgate.progress import progress_bars

        with progress_bars(False):  # the gate shows no progress bars (its evaluations run with progress=False)
            return resolve_checkpoint(path).digest
    prior = [r for r in decision_runs if r["checkpoint_path"] == path]
    return prior[-1]["checkpoint_digest"] if prior else None


def evaluate(protocol_file: str, path: str, split: str, purpose: str, actor: str, store: Store,
             seed_info: dict[str, Any] | None = None, backend: str = "hf",
             grant: ReleaseGrant | None = None) -> dict[str, Any]:
    """Evaluate one checkpoint for the gate (``evalgate.run.evaluate``, no progress bars); the run's document.
    ``grant``: the release grant that admits a decision (release-gate) read."""
    from evalgate.run import RunOptions
    from evalgate.run import evaluate as run_evaluate

    info = seed_info or {}
    return run_evaluate(protocol_file, path, split,
                        RunOptions(purpose=purpose, actor=actor, backend=backend, train_run=info.get("train_run"),
                                   train_seed=info.get("train_seed"), step=info.get("step"), progress=False,
                                   grant=grant), store)


class DecisionReader:
    """Reads the decision split for one gate: evaluates a checkpoint there (a counted private read), or, when
    ``evaluate_decision`` is off (benchmarks), reuses the latest complete release-gate run in the store and logs a
    cached read."""

    def __init__(self, policy: GatePolicy, store: Store, manager: SplitManager, manifest: Any, actor: str,
                 evaluate_decision: bool, prior_runs: list[dict[str, Any]], grant: ReleaseGrant | None = None):
        self.policy, self.store, self.manager, self.manifest = policy, store, manager, manifest
        self.grant = grant
        self.actor, self.evaluate_decision, self.prior_runs = actor, evaluate_decision, prior_runs

    def read(self, path: str, seed_info: dict[str, Any] | None, digest: str | None) -> DecisionRun:
        """The decision run of the checkpoint at ``path`` (``digest``: its digest when known).

        Raises:
            BadInput: reusing, and the store holds no decision run of that checkpoint.
        """
        p = self.policy
        if self.evaluate_decision:
            doc = evaluate(p.protocol_file or "", path, p.decision_split, RELEASE_GATE, self.actor, self.store,
                           seed_info, p.backend, self.grant)
            return DecisionRun(doc["run_id"], doc["metrics"], doc["checkpoint"]["digest"])
        prior = [r for r in self.prior_runs if digest is None or r["checkpoint_digest"] == digest]
        prior = [r for r in prior if digest is not None or r["checkpoint_path"] == path]
        if not prior:
            raise BadInput(f"no decision run of {path} on {p.decision_split} in the store")
        self.manager.check(p.decision_split, RELEASE_GATE, self.actor)
        self.manager.log_read(self.manifest, self.actor, RELEASE_GATE, cached=True,
                              checkpoint_digest=prior[-1]["checkpoint_digest"], run_id=prior[-1]["run_id"],
                              detail=f"gate {p.name}")
        return DecisionRun(prior[-1]["run_id"], prior[-1]["metrics"], prior[-1]["checkpoint_digest"])
