"""Gate policy files (``gates/*.yaml``): pydantic models with ``extra="forbid"`` and ``load_policy``.

A gate policy names the protocol (``name@version``), the selection split (dev tier: it picks each seed's best
checkpoint), the decision split (private tier: it decides release), the metric, the baseline (a checkpoint, or a
fixed value) and the rules.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, model_validator

from evalgate.core.errors import BadInput
from evalgate.core.fileio import read_text
from evalgate.core.models import StrictModel
from evalgate.core.userfiles import NAME_AT_VERSION, FieldProblem, format_validation_error, load_yaml_mapping
from evalgate.diagnostics.guards import Guards
from evalgate.rlhf.reward_rules import RewardAuditRules
from evalgate.scoring import metrics


class Baseline(StrictModel):
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


class Selection(StrictModel):
    """How checkpoints are marked failed before the best is picked."""

    collapse_drop: float | None = Field(default=0.1, ge=0)
    """A checkpoint whose metric fell more than this (absolute) from the seed's previous checkpoint is failed.
    None: no collapse check. Default: 0.1."""
    check_weights: bool = False
    """Load each candidate's safetensors and mark checkpoints with NaN/inf weights failed (reads every weight
    file; off by default). Default: false."""


class GateRules(StrictModel):
    """Rules a release must meet; a rule left null is not applied."""

    min_improvement: float | None = None
    """The lower end of the paired bootstrap CI of (candidate - baseline) on the decision split must be at least
    this (absolute metric units; 0 = not worse than the baseline with the stated confidence: a candidate equal to
    it on every item, CI [0, 0], passes; a positive value asks for an improvement; a negative one, -M, is a
    non-inferiority margin M). Finite; for a rate metric (pass@k, the IFEval accuracies: ``metrics.is_rate``) in
    (-1, 1], since candidate - baseline lies in [-1, 1]. Default: off."""
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
    max_tool_call_inflation: float | None = Field(default=None, gt=0)
    """Agentic protocols: each best checkpoint's mean tool calls per sample / the baseline checkpoint's, at most
    (decision split; ``metrics.tools.tool_calls_per_sample``, refused calls included). A baseline that made no call:
    a candidate that made none is 1x, one that made any is infinitely inflated (fails). Needs a baseline checkpoint;
    a protocol that offers no tools is refused before any read, and runs without tool metrics fail the rule as not
    checkable. Default: off."""
    max_tool_violation_rate: float | None = Field(default=None, ge=0, le=1)
    """Agentic protocols: each best checkpoint's share of samples with at least one permission violation
    (``metrics.tools.violation_rate``: a disallowed tool, the call budget spent, network, file scope or writing),
    at most, on the decision split (0 = no sample may violate). Refused before any read, or failed as not
    checkable, like ``max_tool_call_inflation``. Default: off."""
    accept_not_checkable: bool = False
    """What a rule that can check nothing does (no training log or no training reward for a seed, no tool metrics,
    no two consecutive dev checkpoints with a reward-model run, no human-rated sample for ``reward_audit``'s rule,
    a decision run without the behaviour metric a rule reads): false fails it, true passes it; either way it says
    "not checkable" and why, in every report format. One setting for every rule. ``guards.require`` still fails a
    required signal that is not checkable, and ``min_proxy_agreement`` still fails an uncalibrated proxy (lack of
    evidence is what those rules fail on). Default: false."""
    training_guards: bool = True
    """Fail when any seed's training log has a finding whose severity is in ``guards.fail_on``, or cannot check a
    signal in ``guards.require``; a seed without a training log, or whose log checks no signal, makes the rule not
    checkable (``accept_not_checkable``). Default: true."""
    reward_hacking: bool = True
    """Fail when any seed shows the reward-hacking triad (training reward up, dev metric down, length or truncation
    up); a seed whose log has no training reward, or without two dev checkpoints to compare, makes the rule not
    checkable (``accept_not_checkable``). Default: true."""
    min_proxy_agreement: float | None = Field(default=None, ge=-1, le=1)
    """A proxy scorer's metric (a reward model's, a judge's: ``ScorerEntry.proxy``) may decide only when the scorer
    agrees with people on the human-audit tier: Spearman's rho of its score vs the raters' mean score, pooled over
    the rated samples of the protocol's runs on human-audit splits, at least this; no rated sample fails the rule
    (``evalgate.rlhf.calibration``). A protocol whose scorer is not a proxy passes. Default: none, which a proxy
    scorer's protocol fails (its metric never decides uncalibrated) and any other protocol ignores."""
    reward_model_protocol: str | None = Field(default=None, pattern=NAME_AT_VERSION)
    """The RLHF reward-hacking triad: a ``reward_model`` protocol (``name@version``) whose runs on the selection
    split give each dev checkpoint's reward-model score (``reward_mean``); fail when, between two consecutive dev
    checkpoints of a seed, that score rose while the policy's metric fell and the mean completion tokens rose
    (``evalgate.rlhf.triad``). Default: off."""

    @property
    def tool_rules(self) -> list[str]:
        """The tool-use rules this policy sets (they need a protocol that offers tools)."""
        return [r for r in ("max_tool_call_inflation", "max_tool_violation_rate") if getattr(self, r) is not None]


class ProxyProtocol(StrictModel):
    """A proxy scorer's protocol (an LLM judge, a reward model) that the gate evaluates on each seed's best checkpoint
    and the baseline checkpoint, on a dev-tier split, for the release report's "Proxy scores" section: the judge's
    win rate against the baseline with its CI and position-flip rate (and, pairwise over more than two checkpoints,
    their Bradley-Terry ratings, the judge's baseline at 1000), the reward model's mean score. Informational:
    it adds no rule and decides nothing (``evalgate.gate.proxies``). A proxy decides a release only as the gated
    ``protocol``, where ``rules.min_proxy_agreement`` asks for its agreement with people first."""

    protocol: str = Field(pattern=NAME_AT_VERSION)
    """The proxy's protocol ``name@version`` (its file must be frozen and say the same). Required."""
    protocol_file: str | None = None
    """Its YAML file (relative to the policy file; ``$VARS`` expanded). Default: ``../protocols/<name>.yaml``."""
    split: str | None = None
    """A dev-tier split it runs on (a proxy never reads a public or private split: each read there would spend the
    budget on a number that decides nothing). Default: the policy's ``selection_split``."""


class GatePolicy(StrictModel):
    """A gate policy file (``gates/*.yaml``)."""

    name: str
    """Gate name, shown in reports."""
    protocol: str = Field(pattern=NAME_AT_VERSION)
    """Protocol ``name@version`` whose runs are compared."""
    protocol_file: str | None = None
    """Protocol YAML (relative to the policy file) used for decision runs. Default: ``../protocols/<name>.yaml``."""
    selection_split: str
    """Dev-tier split that picks each seed's best checkpoint (public and private tiers are refused)."""
    decision_split: str
    """Private-tier split that decides release."""
    metric: Annotated[str, AfterValidator(metrics.check_metric)] = "pass@1"
    """A metric of ``scoring.metrics.METRICS``: ``pass@k`` (k >= 1) or ``mean_score``, or a plugin's (each has
    per-item values for paired statistics), that the protocol's scorer produces (``ScorerEntry.produces``; a judge
    or reward model: ``mean_score`` only; another is refused before any read). Default: pass@1."""
    train_run: str | None = None
    """Only checkpoints of this training run name. Default: every run of the protocol on the selection split."""
    backend: str = "hf"
    """Backend whose runs are compared and which evaluates the decision runs (``hf``, ``vllm``, ``openai``): sampled
    outputs differ by engine, so runs of other backends are listed as ignored. Default: hf."""
    baseline: Baseline
    """The comparison point."""
    selection: Selection = Selection()
    """Failed-checkpoint rules."""
    guards: Guards = Guards()
    """Training-log guards: the diagnostics' thresholds (``evalgate.diagnostics.Thresholds``), ``fail_on`` and
    ``require`` (docs/DIAGNOSTICS.md, "The gate's guards"). Renamed keys: ``clip_window`` is ``window``, ``nan`` is
    ``nonfinite`` (a file using an old name is refused with the new one)."""
    training_logs: dict[int, str] = {}
    """Training seed -> training log path (trainer_state.json, .jsonl, event file or run directory), relative
    to the policy file. Default: found next to the checkpoints."""
    rules: GateRules = GateRules()
    """Rules; every rule must pass."""
    bootstrap_resamples: int = Field(default=10_000, ge=100)
    """Bootstrap resamples. Default: 10000."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap's numpy generator. Default: 0."""
    accept_broken_chain: str | None = None
    """A reason to gate although the access log's hash chain is broken (a deleted or edited row would otherwise
    refund the budget unseen). The acceptance is logged and shown in every report; ``evalgate gate
    --accept-broken-chain REASON`` sets it for one run. Default: None, a broken chain refuses the gate (exit 2)."""
    require_expect_head: bool = False
    """Refuse the gate unless it is given the access-log head pinned by the previous run (``--expect-head`` or
    ``$EVALGATE_EXPECT_HEAD``): only a head kept outside the store shows that the store was not rolled back to an
    older copy. Default: false (the newest signed head is checked either way)."""
    reward_audit: RewardAuditRules = RewardAuditRules()
    """Reward-audit thresholds (the chapter's rule) for the release report's "Reward audit" section over the best
    checkpoints' human-rated runs, and the gate rule ``min_reward_human_spearman``. Default: the chapter's
    thresholds, rule off."""
    proxy_protocols: list[ProxyProtocol] = []
    """Proxy protocols (an LLM judge, a reward model) evaluated on each seed's best checkpoint and the baseline
    checkpoint on a dev-tier split, before the decision reads (a run stored for the same checkpoint, protocol hash,
    split content and backend is taken instead), and shown in the release report as proxies with their calibration
    against people; they decide nothing. Default: none."""

    @model_validator(mode="after")
    def _inflation_needs_checkpoint(self) -> GatePolicy:
        for rule in ("max_length_inflation", "max_tool_call_inflation"):
            if getattr(self.rules, rule) is not None and self.baseline.checkpoint is None:
                raise FieldProblem("rules", f"rules.{rule} needs a baseline checkpoint (baseline.checkpoint)")
        return self

    @model_validator(mode="after")
    def _threshold_in_range(self) -> GatePolicy:
        t = self.rules.min_improvement
        if t is not None and metrics.is_rate(self.metric) and not -1 < t <= 1:
            raise FieldProblem("rules.min_improvement", f"{t} is outside (-1, 1]: {self.metric} is a "
                                                  "share in [0, 1], so candidate - baseline lies in [-1, 1] (-1 or "
                                                  "below passes anything, above 1 nothing); give a value in (-1, 1] "
                                                  "(0 = not worse, -0.05 = a non-inferiority margin of 0.05)")
        return self

    @model_validator(mode="after")
    def _proxies_once(self) -> GatePolicy:
        seen = [self.protocol]
        for i, p in enumerate(self.proxy_protocols):
            if p.protocol in seen:
                what = "the gated protocol" if p.protocol == self.protocol else "listed twice"
                raise FieldProblem("proxy_protocols", f"entry {i}: {p.protocol} is {what}; list each proxy once, and "
                                                      "not the protocol the gate decides on")
            seen.append(p.protocol)
        return self


_VAR = re.compile(r"\$(?:(\w+)|\{(\w+)\})")  # $NAME or ${NAME}, as os.path.expandvars reads them


def path_resolver(path: Path, variables: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """A function that makes a path written in the policy file ``path`` absolute: ``$VARS`` expanded (``variables``
    first, then the environment), then resolved against the file's directory (an absolute path is kept).

    The function raises BadInput for a path holding a NUL character or naming an unset variable.
    """
    base = path.resolve().parent

    def rel(p: str) -> str:
        given = variables or {}
        p = _VAR.sub(lambda m: given.get(m[1] or m[2], m[0]), p)
        p = os.path.expandvars(p)
        if "\x00" in p:  # a "\0" escape: no file system takes it (Path.resolve raises ValueError)
            raise BadInput(f"{path}: path {p!r} holds a NUL character; write the path out")
        if "$" in p:
            raise BadInput(f"{path}: path {p!r} names an environment variable that is not set; set it or write the "
                           "path out")
        return str((base / p).resolve()) if not Path(p).is_absolute() else p

    return rel


def load_policy(path: str | Path, variables: Mapping[str, str] | None = None, *,
                resolve_paths: bool = True) -> GatePolicy:
    """Load a gate policy file. Paths in it may use ``$VARS`` and are resolved against the file's directory.

    ``variables``: values for ``$NAME`` / ``${NAME}`` in paths, used before the process environment's (a script or
    notebook fills in the demo's ``$EVALGATE_DEMO_BASE`` without setting ``os.environ``). ``resolve_paths=False``
    validates the whole file but leaves its paths (baseline checkpoint, protocol file, training logs) as written,
    unexpanded: for a reader that uses none of them (``evalgate watch`` takes the metric, ``selection`` and
    ``guards``), so an unset ``$EVALGATE_BASELINE`` is not demanded.

    Raises:
        BadInput: missing file, malformed YAML, invalid or unknown fields (each with file:line, the field path and,
            for an unknown key, the nearest known one).
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "not found"
        raise BadInput(f"gate policy {path} {what}; pass the path of a gate policy YAML file")
    text = read_text(path)
    data = load_yaml_mapping(path, text, "gate policy")
    if "members" in data:
        raise BadInput(f"{path} is a suite policy (it lists members:), not a single gate; 'evalgate gate --policy' "
                       "takes it, and Python loads it with evalgate.gate.suite.load_suite (docs/GATING.md, \"Suite "
                       "gates\")")
    try:
        policy = GatePolicy.model_validate(data)
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, GatePolicy, "gate policy")) from e
    if not resolve_paths:
        return policy
    rel = path_resolver(path, variables)
    name = policy.protocol.split("@", 1)[0]
    upd: dict[str, Any] = {"protocol_file": rel(policy.protocol_file or f"../protocols/{name}.yaml"),
                           "training_logs": {s: rel(p) for s, p in policy.training_logs.items()},
                           "proxy_protocols": [p.model_copy(update={"protocol_file": rel(
                               p.protocol_file or f"../protocols/{p.protocol.split('@', 1)[0]}.yaml")})
                               for p in policy.proxy_protocols]}
    if policy.baseline.checkpoint:
        upd["baseline"] = Baseline(checkpoint=rel(policy.baseline.checkpoint))
    return policy.model_copy(update=upd)
