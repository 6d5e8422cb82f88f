"""Suite policies: one gate over several members (a target that must improve, guards that must not regress), each
member a single gate of its own (protocol, splits, metric, rules) built from the suite's shared fields, its own
entry and, optionally, an existing single-gate file (``policy:``). ``load_suite`` reads the file; ``is_suite`` says
whether a policy file is one. The format and its statistics: docs/GATING.md, "Suite gates"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, model_validator

from evalgate.core.errors import BadInput
from evalgate.core.fileio import read_text
from evalgate.core.models import StrictModel
from evalgate.core.userfiles import (
    NAME_AT_VERSION,
    SIMPLE_NAME,
    FieldProblem,
    format_validation_error,
    load_yaml_mapping,
)
from evalgate.diagnostics.guards import Guards
from evalgate.gate.policy import Baseline, GatePolicy, GateRules, Selection, load_policy, path_resolver
from evalgate.scoring import metrics


def _metric(v: str | None) -> str | None:
    return None if v is None else metrics.check_metric(v)


class Inherited(StrictModel):
    """The fields a suite's top level sets for every member and a member's entry sets for itself (over the suite's:
    ``selection``, ``guards`` and ``rules`` key by key, the others whole)."""

    baseline: Baseline | None = None
    """The comparison point (e.g. a published value): the suite's is every member's; a member's entry or its policy
    file may set its own."""
    backend: str | None = None
    """The backend (``GatePolicy.backend``): the suite's is every member's, a member's entry overrides it.
    Default: hf."""
    selection: Selection | None = None
    """Failed-checkpoint rules: the suite's, then a member's own key by key."""
    guards: Guards | None = None
    """Training-log guards: the suite's, then a member's own key by key."""
    training_logs: dict[int, str] | None = None
    """Training seed -> log path: the suite's is every member's, a member's entry replaces it."""
    rules: GateRules | None = None
    """Every other rule (truncation, length, repetition, seeds, training-log guards...): the suite's, then a
    member's own key by key. Not ``min_improvement`` (set a target's ``min_improvement`` or a guard's ``margin``);
    the suite's ``confidence`` is each member's test level (docs/GATING.md, "Suite gates")."""


class Member(Inherited):
    """One member of a suite: a single gate with a role. A field this entry leaves out comes from the suite's top
    level, else from the member's ``policy`` file (when given), else from ``GatePolicy``'s defaults."""

    name: str = Field(pattern=SIMPLE_NAME)
    """The member's name, unique in the suite (reports, trackers, the ship line)."""
    role: Literal["target", "guard"]
    """``target``: must improve (the lower end of the CI of candidate - baseline >= ``min_improvement``);
    ``guard``: must not regress beyond ``margin`` (non-inferiority: lower end >= -``margin``)."""
    min_improvement: float | None = None
    """A target's required lower CI end (metric units), >= 0 (a negative value would let the target get worse: that
    member is a guard with ``margin``); at most 1 for a rate metric. Required for a target, refused for a guard."""
    margin: float | None = Field(default=None, ge=0)
    """A guard's non-inferiority margin M >= 0: the lower CI end must be >= -M; below 1 for a rate metric (a margin
    of 1 passes every candidate). Required for a guard, refused for a target."""
    select: bool = True
    """Whether the member takes part in picking each seed's checkpoint on its dev split (docs/GATING.md, "Suite
    gates"). A member with ``select: false`` is evaluated on the shipped checkpoints and the baseline only, and needs
    no selection split. Default: true."""
    policy: str | None = None
    """A single-gate policy file (relative to the suite file; ``$VARS`` expanded) the member reuses: its protocol,
    splits, metric, baseline and rules; the suite's top-level fields and this entry's own keys override it."""
    protocol: str | None = Field(default=None, pattern=NAME_AT_VERSION)
    """Protocol ``name@version``. Required unless ``policy`` gives it."""
    protocol_file: str | None = None
    """Protocol YAML. Default: ``../protocols/<name>.yaml`` next to the file that names the protocol."""
    selection_split: str | None = None
    """Dev-tier split that picks checkpoints. Required when ``select`` is true (unless ``policy`` gives it)."""
    decision_split: str | None = None
    """Private-tier split that decides the member. Required (unless ``policy`` gives it)."""
    metric: Annotated[str | None, AfterValidator(_metric)] = None
    """The member's metric (``GatePolicy.metric``). Default: the policy file's, else pass@1."""
    @model_validator(mode="after")
    def _threshold(self) -> Member:
        if self.role == "target":
            if self.margin is not None:
                raise FieldProblem("margin", f"member {self.name}: a target has min_improvement, not margin (margin "
                                             "is a guard's non-inferiority margin)")
            if self.min_improvement is None:
                raise FieldProblem("role", f"member {self.name}: a target needs min_improvement (the lower CI end "
                                           "of candidate - baseline must reach it; 0 = not worse)")
            if self.min_improvement < 0:
                raise FieldProblem("min_improvement", f"member {self.name}: min_improvement {self.min_improvement} "
                                                      "is below 0, which lets a target get worse; give a value >= 0 "
                                                      "(0 = not worse), or make the member a guard (role: guard, "
                                                      f"margin: {-self.min_improvement})")
        else:
            if self.min_improvement is not None:
                raise FieldProblem("min_improvement", f"member {self.name}: a guard has margin, not "
                                                      "min_improvement (it must not fall more than margin)")
            if self.margin is None:
                raise FieldProblem("role", f"member {self.name}: a guard needs margin (>= 0; the lower CI end of "
                                           "candidate - baseline must be >= -margin)")
        if self.rules is not None and "min_improvement" in self.rules.model_fields_set:
            raise FieldProblem("rules", f"member {self.name}: set the member's min_improvement (target) or margin "
                                        "(guard), not rules.min_improvement")
        if self.policy is None:
            missing = [k for k in ("protocol", "decision_split") if getattr(self, k) is None]
            if self.select and self.selection_split is None:
                missing.append("selection_split (or select: false)")
            if missing:
                raise FieldProblem("name", f"member {self.name}: no {', '.join(missing)}; give them, or a single-gate "
                                           "file as policy:")
        return self

    @property
    def threshold(self) -> float:
        """The lower CI end the member needs: ``min_improvement`` (target) or ``-margin`` (guard)."""
        if self.role == "target":
            return float(self.min_improvement or 0.0)
        return -float(self.margin or 0.0)


class SuitePolicy(Inherited):
    """A suite policy file: shared fields (inherited by every member) and the members."""

    name: str
    """Suite name, shown in reports."""
    members: list[Member] = Field(min_length=1)
    """The members, in report order."""
    train_run: str | None = None
    """Only checkpoints of this training run (every member). Default: the candidates' one run."""
    bootstrap_resamples: int = Field(default=10_000, ge=100)
    """Bootstrap resamples (every member). Default: 10000."""
    bootstrap_seed: int = 0
    """Seed of the bootstrap's numpy generator (every member). Default: 0."""
    accept_broken_chain: str | None = None
    """As ``GatePolicy.accept_broken_chain``, for the whole suite."""
    require_expect_head: bool = False
    """As ``GatePolicy.require_expect_head``."""
    holm: bool = False
    """Also report the claim "at least one target improved" with Holm's (1979) step-down adjustment of the targets'
    one-sided bootstrap p-values (family-wise level (1 - confidence) / 2). Informational: the verdict is the
    intersection-union test of every member (docs/GATING.md). Default: false."""

    @model_validator(mode="after")
    def _members(self) -> SuitePolicy:
        seen: set[str] = set()
        for m in self.members:
            if m.name in seen:
                raise FieldProblem("members", f"member name {m.name} appears twice; give each member its own name")
            seen.add(m.name)
        if self.rules is not None and "min_improvement" in self.rules.model_fields_set:
            raise FieldProblem("rules", "rules.min_improvement is each member's: set min_improvement on the targets "
                                        "and margin on the guards")
        if not any(m.role == "target" and m.select for m in self.members):
            raise FieldProblem("members", "no member is a target with select: true; the suite picks each seed's "
                                          "checkpoint by its targets' dev metric, so at least one target must select")
        return self

    @property
    def targets(self) -> list[Member]:
        return [m for m in self.members if m.role == "target"]


@dataclass(frozen=True)
class SuiteMember:
    """A member ready to gate: its entry and the single-gate policy built for it (paths resolved; ``name`` is
    ``<suite>/<member>``; ``rules.min_improvement`` is the member's threshold). ``selection_split`` is "" when the
    member has none (``select: false``)."""

    spec: Member
    policy: GatePolicy

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def has_selection(self) -> bool:
        return bool(self.policy.selection_split)


@dataclass(frozen=True)
class Suite:
    """A loaded suite: the file's model, its path and the members' policies in order."""

    policy: SuitePolicy
    path: Path
    members: list[SuiteMember]

    @property
    def name(self) -> str:
        return self.policy.name


def is_suite(path: str | Path) -> bool:
    """Whether the policy file at ``path`` is a suite (its top level lists ``members``); False for a missing or
    unreadable file (the loader then says what is wrong)."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        return "members" in load_yaml_mapping(p, read_text(p), "gate policy")
    except BadInput:
        return False


_SHARED = (*Inherited.model_fields, "train_run", "bootstrap_resamples", "bootstrap_seed", "accept_broken_chain",
           "require_expect_head")
_NESTED = ("selection", "guards", "rules")  # merged key by key; other fields replace
_OWN = ("protocol", "protocol_file", "selection_split", "decision_split", "metric", *Inherited.model_fields)


def _absolute(d: dict[str, Any], rel: Any) -> dict[str, Any]:
    """``d`` (a policy's fields as a dict) with its paths made absolute by ``rel`` (``policy.path_resolver``)."""
    out = dict(d)
    if out.get("protocol_file"):
        out["protocol_file"] = rel(out["protocol_file"])
    elif out.get("protocol"):
        out["protocol_file"] = rel(f"../protocols/{out['protocol'].split('@', 1)[0]}.yaml")
    if isinstance(out.get("baseline"), dict) and out["baseline"].get("checkpoint"):
        out["baseline"] = {**out["baseline"], "checkpoint": rel(out["baseline"]["checkpoint"])}
    if out.get("training_logs"):
        out["training_logs"] = {k: rel(v) for k, v in out["training_logs"].items()}
    return out


def _overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = {**out.get(k, {}), **v} if k in _NESTED and isinstance(v, dict) else v
    return out


def _member_policy(suite: SuitePolicy, path: Path, m: Member, variables: Mapping[str, str] | None) -> GatePolicy:
    """The single-gate policy of member ``m``: its policy file's fields (paths resolved against that file), then
    the suite's top-level fields the suite file sets, then the member entry's own keys (both resolved against the
    suite file), nested sections key by key; ``rules.min_improvement`` = the member's threshold."""
    rel = path_resolver(path, variables)
    fields: dict[str, Any] = {}
    top = suite.model_dump(mode="json", exclude_unset=True, include=set(_SHARED))
    mine = m.model_dump(mode="json", exclude_unset=True, include=set(_OWN))
    if m.policy is not None:
        file = Path(rel(m.policy))
        own = load_policy(file, resolve_paths=False)
        if own.proxy_protocols:
            raise BadInput(f"{path}: member {m.name}: its policy file {file} has proxy_protocols; a suite member "
                           "decides on its metric only: drop them from the file or gate it alone")
        replaced = {k for k in ("baseline", "training_logs") if k in top or k in mine}  # not resolved: not used
        fields = _absolute(own.model_dump(mode="json", exclude_unset=True, exclude={"proxy_protocols", *replaced}),
                           path_resolver(file, variables))
    if "protocol" in mine and "protocol_file" not in mine:
        fields.pop("protocol_file", None)  # the entry names another protocol: its file, not the policy file's
    fields = _overlay(_overlay(fields, _absolute(top, rel)), _absolute(mine, rel))
    fields["name"] = f"{suite.name}/{m.name}"
    fields["rules"] = {**fields.get("rules", {}), "min_improvement": m.threshold}
    _check_range(path, m, str(fields.get("metric", GatePolicy.model_fields["metric"].default)))
    if not m.select and not fields.get("selection_split"):
        fields["selection_split"] = ""
    if "baseline" not in fields:
        raise BadInput(f"{path}: member {m.name} has no baseline: set baseline: at the suite's top level (or on the "
                       "member, or in its policy file)")
    try:
        return GatePolicy.model_validate(fields)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'policy'}: {err['msg']}" for err in e.errors())
        raise BadInput(f"{path}: member {m.name}: {problems}") from e


def _check_range(path: Path, m: Member, metric: str) -> None:
    """Refuse a target's ``min_improvement`` above 1 or a guard's ``margin`` of 1 or more when ``metric`` is a
    share in [0, 1] (``metrics.is_rate``): candidate - baseline lies in [-1, 1], so the first fails every
    candidate and the second passes every one."""
    if not metrics.is_rate(metric):
        return
    if m.role == "target" and m.min_improvement is not None and m.min_improvement > 1:
        raise BadInput(f"{path}: member {m.name}: min_improvement {m.min_improvement} is above 1, which no candidate "
                       f"can reach ({metric} is a share in [0, 1]); give a value in [0, 1]")
    if m.role == "guard" and m.margin is not None and m.margin >= 1:
        raise BadInput(f"{path}: member {m.name}: margin {m.margin} is 1 or more, which every candidate passes "
                       f"({metric} is a share in [0, 1]); give a value in [0, 1)")


def load_suite(path: str | Path, variables: Mapping[str, str] | None = None) -> Suite:
    """Load a suite policy file and build each member's single-gate policy (``SuiteMember.policy``).

    Args:
        path: the suite file. variables: values for ``$NAME`` in paths before the environment's (``load_policy``).

    Returns:
        The ``Suite``.

    Raises:
        BadInput: missing file, malformed YAML, unknown or invalid fields (file:line), an unknown role, duplicate
            member names, a target without ``min_improvement`` or a guard without ``margin``, a member with no
            decision split or protocol, no selecting target, a member without a baseline, a member policy file
            that is invalid.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "not found"
        raise BadInput(f"suite policy {path} {what}; pass the path of a gate policy YAML file")
    text = read_text(path)
    try:
        suite = SuitePolicy.model_validate(load_yaml_mapping(path, text, "suite policy"))
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, SuitePolicy, "suite policy")) from e
    members = [SuiteMember(m, _member_policy(suite, path, m, variables)) for m in suite.members]
    for sm in members:
        if sm.spec.select and not sm.policy.selection_split:
            raise BadInput(f"{path}: member {sm.name} has select: true but no selection_split; give it one or set "
                           "select: false")
    return Suite(suite, path, members)
