"""Gate policies and the release verdict.

A gate policy (YAML, ``extra="forbid"``) names the protocol (``name@version``), the split whose runs are compared,
the metric and the rules. ``run_gate`` reads the complete runs the store holds for that protocol and split, takes
the latest run of each checkpoint, picks the best checkpoint by the metric, applies every rule and returns a
``Verdict`` listing each rule's outcome. Showing a split's numbers in a report is a read: it is logged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate.errors import BadInput
from evalgate.splits import SplitManager, actor_name
from evalgate.store import Store


class GateRules(BaseModel):
    """Rules a release must meet."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    min_value: float | None = None
    """The best checkpoint's metric must be at least this. Default: no rule."""
    max_truncation_rate: float | None = Field(None, ge=0, le=1)
    """Share of samples cut off by max_tokens, at most. Default: no rule."""
    max_repetition: float | None = Field(None, ge=0, le=1)
    """Mean repetition ratio of the best checkpoint's samples, at most. Default: no rule."""


class GatePolicy(BaseModel):
    """A gate policy file (``gates/*.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """Gate name, shown in reports."""
    protocol: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    """Protocol ``name@version`` whose runs are compared."""
    split: str
    """Split whose runs are compared."""
    metric: str = "pass@1"
    """Metric key in the run's metrics (e.g. ``pass@1``, ``mean_score``). Default: pass@1."""
    rules: GateRules = GateRules()
    """Rules; every rule must pass."""


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
        rules: every rule's outcome (a FAIL lists which failed and why).
        candidates: per checkpoint, its latest complete run (metrics, step, run id), best first.
        best: the chosen candidate, or None when there are no runs.
        samples: a few sample completions of the best run (never for the private tier).
        access: the audit entry of the split.
    """

    passed: bool
    policy: GatePolicy
    rules: list[RuleOutcome]
    candidates: list[dict[str, Any]]
    best: dict[str, Any] | None
    samples: list[dict[str, Any]] = field(default_factory=list)
    access: dict[str, Any] = field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        return [f"{r.rule}: {r.detail}" for r in self.rules if not r.passed]

    def as_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "verdict": "PASS" if self.passed else "FAIL", "gate": self.policy.name,
            "protocol": self.policy.protocol, "split": self.policy.split, "metric": self.policy.metric,
            "rules": [r.__dict__ for r in self.rules], "reasons": self.reasons,
            "best": _public_run(best) if best else None,
            "candidates": [_public_run(c) for c in self.candidates],
        }


def _public_run(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("run_id", "checkpoint_path", "checkpoint_digest", "train_run", "train_seed", "step", "protocol_hash",
            "split", "tier", "metrics", "counts", "backend")
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.items() if k in keys}


def load_policy(path: str | Path) -> GatePolicy:
    """Load a gate policy file.

    Raises:
        BadInput: missing file, malformed YAML, invalid or unknown fields (with the field path).
    """
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"gate policy {path} not found; pass the path of a gate policy YAML file")
    try:
        raw = yaml.safe_load(path.read_text())
        return GatePolicy.model_validate(raw)
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: gate policy is not valid YAML ({e})") from e
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise BadInput(f"{path}: invalid gate policy: {errs}") from e


def run_gate(policy: GatePolicy, store: Store | None = None, actor: str | None = None) -> Verdict:
    """Decide PASS/FAIL for a policy over the runs in the store.

    Raises:
        BadInput: unknown split.
        RefusedByPolicy: the split's tier refuses the read.
    """
    store = store or Store()
    name, version = policy.protocol.split("@", 1)
    manager = SplitManager(store)
    who = actor_name(actor)
    manifest, _ = manager.check(policy.split, "gate-report", who)
    runs = store.runs(protocol_name=name, protocol_version=version, split=policy.split, status="complete")
    latest: dict[str, dict[str, Any]] = {}
    for r in runs:  # oldest first: the last one per checkpoint wins
        latest[r["checkpoint_digest"]] = r
    candidates = sorted(latest.values(), key=lambda r: r["metrics"].get(policy.metric, float("-inf")), reverse=True)
    manager.log_read(manifest, who, "gate-report", cached=True, detail=f"gate {policy.name}")
    rules: list[RuleOutcome] = []
    best = candidates[0] if candidates else None
    if best is None:
        rules.append(RuleOutcome("runs_present", False, f"no complete run of {policy.protocol} on {policy.split}; "
                                                        "run 'evalgate run' first"))
        return Verdict(False, policy, rules, [], None)
    if policy.metric not in best["metrics"]:
        raise BadInput(f"metric {policy.metric!r} is not in the runs' metrics ({', '.join(best['metrics'])})")
    value = best["metrics"][policy.metric]
    r = policy.rules
    if r.min_value is not None:
        se = best["metrics"].get(f"{policy.metric}_stderr")
        se_txt = f" ± {se:.3f} (stderr)" if isinstance(se, float) and se == se else ""
        rules.append(RuleOutcome("min_value", value >= r.min_value,
                                 f"{policy.metric} = {value:.4f}{se_txt}, required >= {r.min_value}"))
    if r.max_truncation_rate is not None:
        tr = best["metrics"].get("truncation_rate", 0.0)
        rules.append(RuleOutcome("max_truncation_rate", tr <= r.max_truncation_rate,
                                 f"truncation rate {tr:.3f}, allowed <= {r.max_truncation_rate}"))
    if r.max_repetition is not None:
        rep = best["metrics"].get("mean_repetition", 0.0)
        rules.append(RuleOutcome("max_repetition", rep <= r.max_repetition,
                                 f"mean repetition {rep:.3f}, allowed <= {r.max_repetition}"))
    samples = [] if manifest.tier == "private" else store.samples(best["run_id"])[:6]
    return Verdict(all(x.passed for x in rules), policy, rules, candidates, best, samples)
