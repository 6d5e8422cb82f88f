"""Gate policies, best/last/failed checkpoints per training seed, and the release verdict.

A gate policy (``gates/*.yaml``, ``extra="forbid"``) names the protocol (``name@version``), the selection split
(dev tier: it picks each seed's best checkpoint), the decision split (private tier: it decides release), the
metric, the baseline (a checkpoint, or a fixed value) and the rules.

``run_gate``:

1. reads the store's complete and failed runs of the protocol on the selection split, the latest per checkpoint,
   grouped by training seed (the selection split's read is logged);
2. per seed: **last** = highest step; **failed** = a run error, a NaN/inf metric, non-finite weights (when
   ``selection.check_weights``), a training-log guard trip at or before the checkpoint's step, or a collapse (the
   metric dropped more than ``selection.collapse_drop`` from the previous checkpoint); **best** = the highest
   metric among the rest (ties: the earlier step);
3. evaluates each seed's best (and a baseline checkpoint) on the decision split through ``evalgate.run.evaluate``
   with purpose ``release-gate``: each is a read counted against the private split's budget, and the generation
   cache makes a repeated gate cheap. The budget is checked for all of them before the first read;
4. applies every rule and returns a ``Verdict`` that lists each rule's outcome.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalgate.errors import BadInput, RefusedByPolicy
from evalgate.scoring import metrics
from evalgate.splits import RELEASE_GATE, SplitManager, actor_name
from evalgate.stats import bootstrap_ci, mean_stderr, paired_bootstrap_diff, stderr_mean_of_means
from evalgate.store import Store
from evalgate.trainlogs import Diagnostic, TrainLog, find_train_log, guard_diagnostics, read_path, reward_hacking
from evalgate.userfiles import FieldProblem, format_validation_error

SELECTION_PURPOSE = "gate-selection"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Baseline(_Strict):
    """What the candidates are compared with: a checkpoint or a fixed value (exactly one)."""

    checkpoint: str | None = None
    """HF directory or GGUF file (relative to the policy file's directory), evaluated on both splits."""
    value: float | None = None
    """A fixed metric value (e.g. the released model's published score). Length inflation needs a checkpoint."""

    @model_validator(mode="after")
    def _one(self) -> Baseline:
        if (self.checkpoint is None) == (self.value is None):
            raise ValueError("give exactly one of 'checkpoint' or 'value'")
        return self


class Selection(_Strict):
    """How checkpoints are marked failed before the best is picked."""

    collapse_drop: float | None = Field(default=0.1, ge=0)
    """A checkpoint whose metric fell more than this (absolute) from the seed's previous checkpoint is failed.
    None: no collapse check. Default: 0.1."""
    check_weights: bool = False
    """Load each candidate's safetensors and mark checkpoints with NaN/inf weights failed (reads every weight
    file; off by default). Default: false."""


class Guards(_Strict):
    """Training-log guards (see ``evalgate.trainlogs.guard_diagnostics``); null turns one off."""

    kl_target: float | None = Field(default=None, gt=0)
    """KL target; KL above 2x this trips. Default: off."""
    clip_fraction_max: float | None = Field(default=0.4, ge=0, le=1)
    """Clip fraction above this for ``clip_window`` consecutive logged steps trips. Default: 0.4."""
    clip_window: int = Field(default=5, ge=1)
    """Consecutive logged steps for the clip-fraction guard. Default: 5."""
    entropy_floor: float | None = None
    """Entropy below this trips. Default: off."""
    grad_norm_spike: float | None = Field(default=10.0, gt=1)
    """Grad norm above this times the median of the previous ``grad_norm_window`` values trips. Default: 10."""
    grad_norm_window: int = Field(default=10, ge=3)
    """Previous logged values for the grad-norm median. Default: 10."""
    nan: bool = True
    """NaN/inf in any logged value trips. Default: true."""


class GateRules(_Strict):
    """Rules a release must meet; a rule left null is not applied."""

    min_improvement: float | None = None
    """The lower end of the paired bootstrap CI of (candidate - baseline) on the decision split must be at least
    this (absolute metric units; 0 = better than the baseline with the stated confidence). Default: off."""
    confidence: float = Field(default=0.95, gt=0, lt=1)
    """Two-sided confidence level of that interval. Default: 0.95."""
    min_seeds: int | None = Field(default=None, ge=1)
    """At least this many training seeds must have a best checkpoint that is not failed. Default: off."""
    seeds_beat_baseline_share: float | None = Field(default=None, ge=0, le=1)
    """At least this share of the seeds' best checkpoints must score >= the baseline on the decision split
    (1 = all seeds). Default: off."""
    max_truncation_rate: float | None = Field(default=None, ge=0, le=1)
    """Each best checkpoint's share of samples cut off by max_tokens on the decision split, at most. Default: off."""
    max_length_inflation: float | None = Field(default=None, gt=0)
    """Each best checkpoint's mean completion tokens / the baseline checkpoint's, at most (decision split).
    Default: off."""
    max_repetition: float | None = Field(default=None, ge=0, le=1)
    """Each best checkpoint's mean repetition ratio on the decision split, at most. Default: off."""
    training_guards: bool = True
    """Fail when any seed's training log trips a guard. Default: true."""
    reward_hacking: bool = True
    """Fail when any seed shows the reward-hacking triad. Default: true."""


class GatePolicy(_Strict):
    """A gate policy file (``gates/*.yaml``)."""

    name: str
    """Gate name, shown in reports."""
    protocol: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    """Protocol ``name@version`` whose runs are compared."""
    protocol_file: str | None = None
    """Protocol YAML (relative to the policy file) used for decision runs. Default: ``../protocols/<name>.yaml``."""
    selection_split: str
    """Dev-tier split that picks each seed's best checkpoint (public and private tiers are refused)."""
    decision_split: str
    """Private-tier split that decides release."""
    metric: str = Field(default="pass@1", pattern=metrics.METRIC_PATTERN)
    """``pass@k`` or ``mean_score`` (both have per-item values for paired statistics). Default: pass@1."""
    train_run: str | None = None
    """Only checkpoints of this training run name. Default: every run of the protocol on the selection split."""
    baseline: Baseline
    """The comparison point."""
    selection: Selection = Selection()
    """Failed-checkpoint rules."""
    guards: Guards = Guards()
    """Training-log guards."""
    training_logs: dict[int, str] = {}
    """Training seed -> training log path (trainer_state.json, .jsonl, event file or run directory), relative
    to the policy file. Default: found next to the checkpoints."""
    rules: GateRules = GateRules()
    """Rules; every rule must pass."""
    bootstrap_resamples: int = Field(default=10_000, ge=100)
    """Bootstrap resamples. Default: 10000."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap's numpy generator. Default: 0."""

    @model_validator(mode="after")
    def _length_needs_checkpoint(self) -> GatePolicy:
        if self.rules.max_length_inflation is not None and self.baseline.checkpoint is None:
            raise FieldProblem("rules", "rules.max_length_inflation needs a baseline checkpoint (baseline.checkpoint)")
        return self


@dataclass
class RuleOutcome:
    """One rule's result: name, passed, human-readable detail."""

    rule: str
    passed: bool
    detail: str


@dataclass
class Verdict:
    """The gate's decision and everything the report shows.

    Attributes:
        passed: True for PASS.
        policy: the policy.
        rules: every rule's outcome.
        seeds: per training seed: best, last, failed checkpoints, dev curve, decision run, training log series
            and diagnostics.
        baseline: baseline checkpoint's runs (dev and decision) or the fixed value.
        stats: the statistics, each with the formula used.
        protocol_hash: the protocol's sha256.
        samples: dev samples for audit (never the private split's).
        access: the decision split's audit entry.
    """

    passed: bool
    policy: GatePolicy
    rules: list[RuleOutcome]
    seeds: list[dict[str, Any]] = field(default_factory=list)
    baseline: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    protocol_hash: str | None = None
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    access: dict[str, Any] = field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        return [f"{r.rule}: {r.detail}" for r in self.rules if not r.passed]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready verdict (no per-item outputs of any split)."""
        p = self.policy
        return {
            "verdict": "PASS" if self.passed else "FAIL", "gate": p.name, "protocol": p.protocol,
            "protocol_hash": self.protocol_hash, "selection_split": p.selection_split,
            "decision_split": p.decision_split, "metric": p.metric,
            "rules": [r.__dict__ for r in self.rules], "reasons": self.reasons,
            "seeds": [{k: v for k, v in s.items() if k not in ("train_series",)} for s in self.seeds],
            "baseline": self.baseline, "stats": self.stats,
        }


def load_policy(path: str | Path) -> GatePolicy:
    """Load a gate policy file. Paths in it may use ``$VARS`` and are resolved against the file's directory.

    Raises:
        BadInput: missing file, malformed YAML, invalid or unknown fields (each with file:line, the field path and,
            for an unknown key, the nearest known one).
    """
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"gate policy {path} not found; pass the path of a gate policy YAML file")
    text = path.read_text()
    try:
        policy = GatePolicy.model_validate(yaml.safe_load(text))
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: gate policy is not valid YAML ({e})") from e
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, GatePolicy, "gate policy")) from e
    base = path.resolve().parent

    def rel(p: str) -> str:
        p = os.path.expandvars(p)
        if "$" in p:
            raise BadInput(f"{path}: path {p!r} names an environment variable that is not set; set it or write the "
                           "path out")
        return str((base / p).resolve()) if not Path(p).is_absolute() else p

    name = policy.protocol.split("@", 1)[0]
    upd: dict[str, Any] = {"protocol_file": rel(policy.protocol_file or f"../protocols/{name}.yaml"),
                           "training_logs": {s: rel(p) for s, p in policy.training_logs.items()}}
    if policy.baseline.checkpoint:
        upd["baseline"] = Baseline(checkpoint=rel(policy.baseline.checkpoint))
    return policy.model_copy(update=upd)


# -- per-item values -------------------------------------------------------------------------------------------------
def item_values(rows: list[dict[str, Any]], metric: str) -> dict[str, float]:
    """Per-item metric values from sample rows (``item_id``, ``status``, ``score``); see
    ``evalgate.scoring.metrics.get_metric`` for the definitions.

    Raises:
        BadInput: an item with fewer than k samples for pass@k.
    """
    return metrics.item_values(metrics.group_by_item(rows), metric)


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def weights_finite(path: str | Path) -> bool | None:
    """True when every tensor in the checkpoint's ``*.safetensors`` is finite; None when there are none to read."""
    files = sorted(Path(path).glob("*.safetensors")) if Path(path).is_dir() else []
    if not files:
        return None
    import torch
    from safetensors import safe_open

    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():  # noqa: SIM118 - safe_open has no __iter__
                t = fh.get_tensor(k)
                if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                    return False
    return True


# -- selection --------------------------------------------------------------------------------------------------------
def select_checkpoints(runs: list[dict[str, Any]], metric: str, collapse_drop: float | None,
                       guard_steps: dict[int | None, list[Diagnostic]] | None = None,
                       bad_weights: set[str] | None = None) -> list[dict[str, Any]]:
    """Best, last and failed checkpoints per training seed.

    Args:
        runs: complete or failed runs of the selection split, oldest first (the latest per checkpoint counts).
        metric: the selection metric.
        collapse_drop: absolute drop from the previous checkpoint (by step) that marks a collapse; None: off.
        guard_steps: training seed -> guard trips; a checkpoint at or after a trip's step is failed.
        bad_weights: checkpoint digests with non-finite weights.

    Returns:
        Per seed (sorted by seed): ``{"train_seed", "train_run", "checkpoints": [...by step], "best", "last",
        "failed": [...]}``; each checkpoint ``{"digest", "path", "step", "run_id", "value", "stderr", "metrics",
        "failed_reasons"}``; best is None when every checkpoint failed.
    """
    latest: dict[str, dict[str, Any]] = {}
    for r in runs:
        latest[r["checkpoint_digest"]] = r
    by_seed: dict[int | None, list[dict[str, Any]]] = {}
    for r in latest.values():
        m = r.get("metrics") or {}
        ck = {"digest": r["checkpoint_digest"], "path": r["checkpoint_path"], "step": r["step"],
              "train_run": r["train_run"], "run_id": r["run_id"], "status": r["status"],
              "value": m.get(metric), "stderr": m.get(f"{metric}_stderr"),
              "metrics": {k: m.get(k) for k in ("mean_completion_tokens", "truncation_rate", "mean_repetition")},
              "failed_reasons": []}
        by_seed.setdefault(r["train_seed"], []).append(ck)
    out = []
    for seed in sorted(by_seed, key=lambda s: (s is None, s)):
        cks = sorted(by_seed[seed], key=lambda c: (c["step"] is None, c["step"] or 0))
        prev_ok: float | None = None
        for c in cks:
            why = c["failed_reasons"]
            if c["status"] == "failed":
                why.append("run error")
            elif not _finite(c["value"]):
                why.append(f"{metric} is {c['value']!r} (NaN, inf or missing)")
            elif any(v is not None and not _finite(v) for v in c["metrics"].values()):
                why.append("NaN/inf in behaviour metrics")
            if bad_weights and c["digest"] in bad_weights:
                why.append("NaN/inf in weights")
            for d in (guard_steps or {}).get(seed, []):
                if c["step"] is not None and c["step"] >= d.step:
                    why.append(f"guard {d.kind} tripped at step {d.step}")
            if _finite(c["value"]):
                if collapse_drop is not None and prev_ok is not None and prev_ok - c["value"] > collapse_drop:
                    why.append(f"collapse: {metric} fell {prev_ok - c['value']:.4f} from the previous checkpoint "
                               f"({prev_ok:.4f} -> {c['value']:.4f}), more than {collapse_drop}")
                prev_ok = c["value"]
        ok = [c for c in cks if not c["failed_reasons"]]
        best = max(ok, key=lambda c: (c["value"], -(c["step"] or 0))) if ok else None
        last = cks[-1] if cks else None
        out.append({"train_seed": seed, "train_run": cks[0]["train_run"], "checkpoints": cks, "best": best,
                    "last": last, "failed": [c for c in cks if c["failed_reasons"]]})
    return out


# -- the gate ---------------------------------------------------------------------------------------------------------
def _check_tiers(policy: GatePolicy, manager: SplitManager) -> tuple[Any, Any]:
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


def _budget_check(manager: SplitManager, manifest: Any, needed: int, actor: str) -> None:
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


def _train_logs(policy: GatePolicy, seeds: list[dict[str, Any]]) -> dict[int | None, TrainLog | None]:
    out: dict[int | None, TrainLog | None] = {}
    for s in seeds:
        seed = s["train_seed"]
        if seed in policy.training_logs:
            out[seed] = read_path(policy.training_logs[seed])
            continue
        log = None
        for c in sorted(s["checkpoints"], key=lambda c: c["step"] or 0, reverse=True):
            p = Path(c["path"])
            if p.is_dir():
                log = find_train_log(p.parent)
                if log:
                    break
        out[seed] = log
    return out


def _guard_trips(policy: GatePolicy, log: TrainLog | None) -> list[Diagnostic]:
    if log is None:
        return []
    g = policy.guards
    trips = guard_diagnostics(log, g.kl_target, g.clip_fraction_max, g.clip_window, g.entropy_floor,
                              g.grad_norm_spike, g.grad_norm_window)
    return [d for d in trips if g.nan or d.kind != "nan"]


def _baseline_digest(policy: GatePolicy, decision_runs: list[dict[str, Any]], resolve: bool) -> str | None:
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


def _evaluate(protocol_file: str, path: str, split: str, purpose: str, actor: str, store: Store,
              seed_info: dict[str, Any] | None = None) -> dict[str, Any]:
    from evalgate.run import RunOptions, evaluate

    info = seed_info or {}
    return evaluate(protocol_file, path, split,
                    RunOptions(purpose=purpose, actor=actor, train_run=info.get("train_run"),
                               train_seed=info.get("train_seed"), step=info.get("step"), progress=False), store)


def _check_protocol(policy: GatePolicy, evaluate_decision: bool) -> None:
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


def run_gate(policy: GatePolicy, store: Store | None = None, actor: str | None = None,
             evaluate_decision: bool = True) -> Verdict:
    """Decide PASS/FAIL for a policy.

    Args:
        policy: the loaded policy (``load_policy``).
        store: the Store (default ``$EVALGATE_HOME``).
        actor: who runs the gate (default ``$EVALGATE_ACTOR`` or the OS user).
        evaluate_decision: False reuses the latest complete release-gate runs in the store instead of evaluating
            (benchmarks); the reads are still logged and counted.

    Raises:
        BadInput: unknown split, decision split not private, missing protocol file, metric absent.
        RefusedByPolicy: selection split not dev; the private budget cannot cover the gate's reads.
        ProtocolDrift: the protocol file no longer matches its lock.
    """
    store = store or Store()
    who = actor_name(actor)
    name, version = policy.protocol.split("@", 1)
    manager = SplitManager(store)
    sel_m, dec_m = _check_tiers(policy, manager)
    _check_protocol(policy, evaluate_decision)  # before any read: a typo must not spend a private read
    where: dict[str, Any] = {"protocol_name": name, "protocol_version": version, "split": policy.selection_split}
    if policy.train_run:
        where["train_run"] = policy.train_run
    sel_runs = store.runs(**where)
    dec_runs = [] if evaluate_decision else store.runs(protocol_name=name, protocol_version=version,
                                                       split=policy.decision_split, status="complete")
    base_digest = _baseline_digest(policy, dec_runs, evaluate_decision)
    runs = [r for r in sel_runs if r["status"] in ("complete", "failed") and r["checkpoint_digest"] != base_digest]
    manager.check(policy.selection_split, SELECTION_PURPOSE, who)
    manager.log_read(sel_m, who, SELECTION_PURPOSE, cached=True, detail=f"gate {policy.name}")
    protocol_hash = store.protocol_hash(name, version)
    if not runs:
        rule = RuleOutcome("runs_present", False, f"no run of {policy.protocol} on {policy.selection_split}; "
                                                  "evaluate the checkpoints with 'evalgate run' first")
        return Verdict(False, policy, [rule], protocol_hash=protocol_hash)

    prelim = select_checkpoints(runs, policy.metric, policy.selection.collapse_drop)
    logs = _train_logs(policy, prelim)
    trips = {s: _guard_trips(policy, lg) for s, lg in logs.items()}
    bad_w: set[str] = set()
    if policy.selection.check_weights:
        bad_w = {c["digest"] for s in prelim for c in s["checkpoints"] if weights_finite(c["path"]) is False}
    seeds = select_checkpoints(runs, policy.metric, policy.selection.collapse_drop, trips, bad_w)
    for s in seeds:
        log = logs.get(s["train_seed"])
        dev = [{"step": c["step"], "value": c["value"], **c["metrics"]} for c in s["checkpoints"]
               if _finite(c["value"]) and c["step"] is not None]
        triad = reward_hacking(log, dev)
        s["diagnostics"] = [d.__dict__ for d in trips.get(s["train_seed"], [])] + ([triad.__dict__] if triad else [])
        s["train_log"] = {"source": log.source, "format": log.format, "keys": sorted(log.series)} if log else None
        s["train_series"] = log.series if log else {}

    chosen = [s for s in seeds if s["best"] is not None]
    bl = policy.baseline
    needed = len(chosen) + (1 if bl.checkpoint else 0)
    if evaluate_decision:
        _budget_check(manager, dec_m, needed, who)
    baseline: dict[str, Any] = {"value": bl.value} if bl.value is not None else {"checkpoint": bl.checkpoint}
    proto_file = policy.protocol_file or ""
    if evaluate_decision and not Path(proto_file).is_file():
        raise BadInput(f"protocol file {proto_file} not found; set protocol_file in the gate policy")

    def decision_run(path: str, info: dict[str, Any] | None, digest: str | None) -> dict[str, Any]:
        if evaluate_decision:
            doc = _evaluate(proto_file, path, policy.decision_split, RELEASE_GATE, who, store, info)
            return {"run_id": doc["run_id"], "metrics": doc["metrics"], "digest": doc["checkpoint"]["digest"]}
        prior = [r for r in dec_runs if digest is None or r["checkpoint_digest"] == digest]
        prior = [r for r in prior if digest is not None or r["checkpoint_path"] == path]
        if not prior:
            raise BadInput(f"no decision run of {path} on {policy.decision_split} in the store")
        manager.check(policy.decision_split, RELEASE_GATE, who)
        manager.log_read(dec_m, who, RELEASE_GATE, cached=True, checkpoint_digest=prior[-1]["checkpoint_digest"],
                         run_id=prior[-1]["run_id"], detail=f"gate {policy.name}")
        return {"run_id": prior[-1]["run_id"], "metrics": prior[-1]["metrics"],
                "digest": prior[-1]["checkpoint_digest"]}

    if bl.checkpoint:
        baseline["decision"] = decision_run(bl.checkpoint, None, None)
        dev_runs = [r for r in sel_runs if r["status"] == "complete"
                    and r["checkpoint_digest"] == baseline["decision"]["digest"]]
        if dev_runs:
            baseline["dev"] = {"run_id": dev_runs[-1]["run_id"], "metrics": dev_runs[-1]["metrics"]}
        elif evaluate_decision:
            doc = _evaluate(proto_file, bl.checkpoint, policy.selection_split, SELECTION_PURPOSE, who, store)
            baseline["dev"] = {"run_id": doc["run_id"], "metrics": doc["metrics"]}
    for s in chosen:
        b = s["best"]
        s["decision"] = decision_run(b["path"], {"train_run": b["train_run"], "train_seed": s["train_seed"],
                                                 "step": b["step"]}, b["digest"])

    stats = _statistics(policy, chosen, baseline, store)
    rules = _rules(policy, seeds, chosen, baseline, stats)
    samples = _audit_samples(store, chosen)
    return Verdict(all(r.passed for r in rules), policy, rules, seeds, baseline, stats, protocol_hash, samples)


def _statistics(policy: GatePolicy, chosen: list[dict[str, Any]], baseline: dict[str, Any],
                store: Store) -> dict[str, Any]:
    """Per-seed and aggregate means with their stderrs, and the paired bootstrap CI of the difference."""
    if not chosen:
        return {}
    metric = policy.metric
    per_seed = []
    for s in chosen:
        vals = item_values(store.sample_scores(s["decision"]["run_id"]), metric)
        s["decision"]["items"] = len(vals)
        mean, se = mean_stderr(list(vals.values()))
        ci = bootstrap_ci(list(vals.values()), policy.rules.confidence, policy.bootstrap_resamples,
                          policy.bootstrap_seed)
        s["decision"].update(value=mean, stderr=se, ci=list(ci))
        per_seed.append(vals)
    items = sorted(set.intersection(*(set(v) for v in per_seed)))
    if not items:
        raise BadInput("the seeds' decision runs share no items")
    cand = np.array([[v[i] for i in items] for v in per_seed])
    seed_means = cand.mean(axis=1)
    out: dict[str, Any] = {"metric": metric, "items": len(items), "seeds": len(chosen)}
    se_items = [float(cand[j].std(ddof=1) / math.sqrt(len(items))) if len(items) > 1 else float("nan")
                for j in range(len(chosen))]
    agg: dict[str, Any] = {
        "mean_of_seed_means": float(seed_means.mean()),
        "stderr_seeds_fixed": stderr_mean_of_means(se_items),
        "stderr_seeds_fixed_formula": "sqrt(sum_s se_s^2) / S, se_s = sd_items(x_s) / sqrt(n) "
                                      "(seeds fixed, independent item errors)",
        "stderr_items_paired": (float(cand.mean(axis=0).std(ddof=1) / math.sqrt(len(items)))
                                if len(items) > 1 else float("nan")),
        "stderr_items_paired_formula": "sd_items(mean_s x_s,i) / sqrt(n) (items as the unit; the seeds share items)",
    }
    if len(chosen) > 1:
        agg["stderr_over_seeds"] = float(seed_means.std(ddof=1) / math.sqrt(len(chosen)))
        agg["stderr_over_seeds_formula"] = "sd_s(seed means) / sqrt(S) (seeds as the random unit)"
    out["aggregate"] = agg
    if baseline.get("decision"):
        bvals = item_values(store.sample_scores(baseline["decision"]["run_id"]), metric)
        missing = [i for i in items if i not in bvals]
        if missing:
            raise BadInput(f"the baseline's decision run lacks {len(missing)} items the candidates have")
        b = np.array([bvals[i] for i in items])
        bmean, bse = mean_stderr(list(b))
        baseline["decision"].update(value=bmean, stderr=bse, items=len(items))
        base: np.ndarray | float = b
        diffs = cand.mean(axis=0) - b
        out["paired_stderr"] = float(diffs.std(ddof=1) / math.sqrt(len(items))) if len(items) > 1 else float("nan")
        out["paired_stderr_formula"] = "sd_items(mean_s x_s,i - b_i) / sqrt(n)"
    else:
        base = float(baseline["value"])
    boot: dict[str, Any] = dict(paired_bootstrap_diff(cand, base, policy.rules.confidence,
                                                      policy.bootstrap_resamples, policy.bootstrap_seed))
    method = ("paired bootstrap over items" if len(chosen) == 1
              else "two-stage bootstrap: seeds, then items (same item draw for the baseline)")
    boot["method"] = method + ("" if baseline.get("decision") else "; baseline is a fixed value")
    out["difference"] = boot
    return out


def _rules(policy: GatePolicy, seeds: list[dict[str, Any]], chosen: list[dict[str, Any]], baseline: dict[str, Any],
           stats: dict[str, Any]) -> list[RuleOutcome]:
    r = policy.rules
    out: list[RuleOutcome] = []
    m = policy.metric
    if not chosen:
        out.append(RuleOutcome("best_checkpoint", False, "every checkpoint of every seed failed; nothing to release"))
    if r.min_seeds is not None:
        out.append(RuleOutcome("min_seeds", len(chosen) >= r.min_seeds,
                               f"{len(chosen)} seed(s) with a non-failed best checkpoint "
                               f"({', '.join(str(s['train_seed']) for s in chosen) or 'none'}), "
                               f"required >= {r.min_seeds}"))
    b_value = baseline["decision"]["value"] if baseline.get("decision") else baseline.get("value")
    if r.min_improvement is not None and stats:
        d = stats["difference"]
        out.append(RuleOutcome("min_improvement", d["low"] >= r.min_improvement,
                               f"{m} difference vs baseline {d['diff']:+.4f}, {d['confidence']:.0%} CI "
                               f"[{d['low']:+.4f}, {d['high']:+.4f}] ({d['method']}); lower end required >= "
                               f"{r.min_improvement:+g}"))
    if r.seeds_beat_baseline_share is not None and chosen and b_value is not None:
        beat = [s for s in chosen if s["decision"]["value"] >= b_value]
        each = ", ".join(f"seed {s['train_seed']}: {s['decision']['value']:.4f}" for s in chosen)
        share = len(beat) / len(chosen)
        out.append(RuleOutcome("seeds_beat_baseline", share >= r.seeds_beat_baseline_share,
                               f"{len(beat)} of {len(chosen)} seeds' best >= baseline {b_value:.4f} "
                               f"({each}); required share >= {r.seeds_beat_baseline_share:g}"))
    for key, label, limit in (("truncation_rate", "max_truncation_rate", r.max_truncation_rate),
                              ("mean_repetition", "max_repetition", r.max_repetition)):
        if limit is None:
            continue
        vals = {s["train_seed"]: s["decision"]["metrics"].get(key, 0.0) for s in chosen}
        worst = max(vals.values(), default=0.0)
        out.append(RuleOutcome(label, worst <= limit, f"{key} on {policy.decision_split}: "
                               + ", ".join(f"seed {k}: {v:.3f}" for k, v in vals.items()) + f"; allowed <= {limit}"))
    if r.max_length_inflation is not None and baseline.get("decision"):
        bt = baseline["decision"]["metrics"].get("mean_completion_tokens") or float("nan")
        ratios = {s["train_seed"]: s["decision"]["metrics"].get("mean_completion_tokens", float("nan")) / bt
                  for s in chosen}
        ok = all(_finite(v) and v <= r.max_length_inflation for v in ratios.values())
        out.append(RuleOutcome("max_length_inflation", ok, "mean completion tokens / baseline's "
                               f"({bt:.1f}): " + ", ".join(f"seed {k}: {v:.2f}x" for k, v in ratios.items())
                               + f"; allowed <= {r.max_length_inflation}x"))
    if r.training_guards:
        hits = [(s["train_seed"], d) for s in seeds for d in s["diagnostics"] if d["kind"] != "reward_hacking"]
        no_log = [s["train_seed"] for s in seeds if s["train_log"] is None]
        detail = "; ".join(f"seed {k}: {d['detail']}" for k, d in hits) or "no guard tripped"
        if no_log:
            detail += f" (no training log found for seed(s) {', '.join(map(str, no_log))})"
        out.append(RuleOutcome("training_guards", not hits, detail))
    if r.reward_hacking:
        hits = [(s["train_seed"], d) for s in seeds for d in s["diagnostics"] if d["kind"] == "reward_hacking"]
        no_reward = [s["train_seed"] for s in seeds if not (s["train_series"] or {}).get("reward")]
        detail = "; ".join(f"seed {k}: triad at step {d['step']}: {d['detail']}" for k, d in hits) or "no triad"
        if no_reward:
            detail += f" (no training reward logged for seed(s) {', '.join(map(str, no_reward))}: not checkable)"
        out.append(RuleOutcome("reward_hacking", not hits, detail))
    return out


def _audit_samples(store: Store, chosen: list[dict[str, Any]], k: int = 3, max_chars: int = 1500) -> dict[str, Any]:
    """Dev samples of the seeds' best checkpoints: highest-scoring, lowest-scoring and longest (never private)."""
    rows: list[dict[str, Any]] = []
    for s in chosen:
        for r in store.samples(s["best"]["run_id"]):
            rows.append({"seed": s["train_seed"], "step": s["best"]["step"], "item_id": r["item_id"],
                         "sample_index": r["sample_index"], "score": r["score"], "status": r["status"],
                         "completion_tokens": r["completion_tokens"], "finish_reason": r["finish_reason"],
                         "extracted": r["extracted"], "text": (r["text"] or "")[:max_chars]})
    if not rows:
        return {}
    return {
        "highest_scoring": sorted(rows, key=lambda r: (-r["score"], r["item_id"]))[:k],
        "lowest_scoring": sorted(rows, key=lambda r: (r["score"], r["item_id"]))[:k],
        "longest": sorted(rows, key=lambda r: (-(r["completion_tokens"] or 0), r["item_id"]))[:k],
    }



def gate_and_report(policy_path: str | Path, store: Store | None = None, report: str | Path | None = None,
                    junit: str | Path | None = None, json_out: str | Path | None = None,
                    markdown: str | Path | None = None, actor: str | None = None) -> tuple[Verdict, dict[str, Any]]:
    """Load a policy, run the gate and write the requested outputs (what ``evalgate gate`` does).

    The Markdown summary is also appended to ``$GITHUB_STEP_SUMMARY`` when that is set.

    Returns:
        (verdict, the verdict's JSON document with the paths written).
    """
    from evalgate.audit import audit_summary
    from evalgate.report import write_html, write_json, write_junit, write_markdown

    store = store or Store()
    verdict = run_gate(load_policy(policy_path), store, actor)
    audit = audit_summary(store, verdict.policy.decision_split)
    doc = verdict.as_dict()
    if report:
        doc["report"] = str(write_html(verdict, report, audit))
    if junit:
        doc["junit"] = str(write_junit(verdict, junit))
    if json_out:
        doc["json_out"] = str(write_json(verdict, json_out, audit))
    written = write_markdown(verdict, markdown)
    if markdown:
        doc["markdown"] = str(markdown)
    doc["step_summary"] = [str(p) for p in written if not markdown or str(p) != str(markdown)]
    return verdict, doc
