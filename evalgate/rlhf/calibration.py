"""Calibration of a proxy scorer against people: may a reward model's (or a judge's) metric decide a release?

A proxy scorer (its registry entry sets ``proxy``: ``reward_model``, and an LLM judge) stands in for human
preference, which it tracks only as far as it was shown to (Gao et al. 2022, "Scaling Laws for Reward Model
Overoptimization"). The human-audit tier exists to measure that: people rate samples blind (``evalgate serve``)
and ``evalgate.human.agreement`` compares their scores with the scorer's. The gate rule ``rules.min_proxy_agreement``
lets such a metric decide only when that agreement reaches the policy's threshold: Spearman's rho between the
scorer's score and the raters' mean score, over every human-rated sample of a run of the gated protocol on a
human-audit split (pooled over those runs, any checkpoint), with its percentile bootstrap CI
(``agreement.spearman_ci``). No such rated sample means the proxy is not calibrated, and the rule fails; so does a
policy gating on a proxy's metric that sets no threshold at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.core.enums import Tier
from evalgate.human.agreement import proxy_agreement, rated_samples
from evalgate.store import Store

RULE = "proxy_calibrated"


def audit_agreement(store: Store, protocol: str, resamples: int = 2000) -> dict[str, Any]:
    """The scorer-human agreement of protocol ``name@version`` on the human-audit tier.

    Returns:
        ``{"runs": [run ids], "n_samples", **agreement.proxy_agreement}`` over every rated sample of the protocol's
        complete runs on human-audit splits, pooled: Spearman's rho, Cohen's kappa, the quadratic-weighted kappa
        and Krippendorff's alpha, each with its bootstrap CI, on the finest rating scale of those runs' batches
        (``levels``; 5 when nothing is rated).
    """
    name, _, version = protocol.partition("@")
    runs, auto, human, levels = [], [], [], 0
    for b in store.batches():
        run = store.runs(run_id=b.run_id)
        if not run or (run[0].protocol_name, run[0].protocol_version) != (name, version) \
                or run[0].tier != Tier.HUMAN_AUDIT:
            continue
        levels = max(levels, int(b.scale_max - b.scale_min) + 1)
        if b.run_id in runs:
            continue
        runs.append(b.run_id)
        for s in rated_samples(store, b.run_id)[1]:
            auto.append(s["auto"])
            human.append(s["human"])
    return {"runs": runs, "n_samples": len(auto), **proxy_agreement(auto, human, levels or 5, resamples=resamples)}


def calibration_section(store: Store, policy: Any) -> list[dict[str, Any]]:
    """The release report's agreement of each proxy the policy relies on or shows with people on the human-audit
    tier: the gated protocol when its scorer is a proxy (``role: "gated"``), the triad's reward-model protocol
    (``rules.reward_model_protocol``, ``role: "reward model"``) and each of ``proxy_protocols`` (``role: "proxy"``,
    informational; ``gate.proxies``), each protocol once.

    Returns:
        ``[{"protocol", "scorer", "role", **audit_agreement}]``; empty when the policy relies on no proxy.
    """
    from evalgate.scoring.base import SCORERS

    wanted: list[tuple[str, str | None, str]] = []
    scorer = _scorer(policy.protocol_file)
    entry = SCORERS.get(scorer) if scorer else None
    if entry is not None and entry.proxy:
        wanted.append((policy.protocol, scorer, "gated"))
    if policy.rules.reward_model_protocol:
        wanted.append((policy.rules.reward_model_protocol, "reward_model", "reward model"))
    wanted += [(p.protocol, _scorer(p.protocol_file), "proxy") for p in policy.proxy_protocols]
    out, seen = [], set()
    for protocol, name, role in wanted:
        if protocol not in seen:
            seen.add(protocol)
            out.append({"protocol": protocol, "scorer": name, "role": role,
                        **audit_agreement(store, protocol, policy.bootstrap_resamples)})
    return out


def _scorer(protocol_file: str | None) -> str | None:
    """The scorer name of the policy's protocol file, or None when there is no such file."""
    if not protocol_file or not Path(protocol_file).is_file():
        return None
    from evalgate.protocol.spec import load_protocol

    return load_protocol(protocol_file).spec.scorer.name


def calibration_rule(store: Store, policy: Any, found: dict[str, Any] | None = None
                     ) -> tuple[str, bool | None, str] | None:
    """The gate rule ``min_proxy_agreement`` of ``policy`` (a ``GatePolicy``); ``found``: the gated protocol's
    ``audit_agreement`` when already computed (``calibration_section``).

    Returns:
        ``(rule name, passed, detail)``; passed None when the rule is not checkable: the protocol file is missing,
        so the scorer cannot be known (``gate.results.not_checkable`` fails it unless the policy accepts that).
        Passed with a note when the protocol's scorer is not a proxy (a verified score: the rule does not apply);
        failed when the scorer is a proxy (``ScorerEntry.proxy``: a judge, a reward model) and the policy sets no
        threshold (an uncalibrated proxy never decides), when no human-rated audit-tier sample exists, when rho is
        undefined, or when rho is below the threshold: lack of evidence is what this rule fails on, whatever
        ``accept_not_checkable`` says. None when the rule is off and the protocol file is missing or its scorer is
        not a proxy.
    """
    from evalgate.scoring.base import SCORERS

    x = policy.rules.min_proxy_agreement
    scorer = _scorer(policy.protocol_file)
    if scorer is None:
        if x is None:
            return None
        return RULE, None, (f"protocol file {policy.protocol_file} not found, so its scorer is not known; set "
                            "protocol_file in the gate policy")
    entry = SCORERS.get(scorer)
    if entry is None or not entry.proxy:
        return None if x is None else (RULE, True, f"does not apply: scorer {scorer} is not a proxy for people")
    if x is None:
        return RULE, False, (f"not calibrated: {policy.protocol}'s scorer {scorer} is a proxy for people and the "
                             "policy sets no rules.min_proxy_agreement; set the Spearman's rho its scores must reach "
                             "against human ratings on the human-audit tier before its metric may decide")
    found = found or audit_agreement(store, policy.protocol, policy.bootstrap_resamples)
    sp = found["spearman"]
    if not found["n_samples"]:
        return RULE, False, (f"not calibrated: no human-rated sample of a {policy.protocol} run on a human-audit "
                             "split; rate its samples in 'evalgate serve', or export them blind ('evalgate splits "
                             f"export-audit --run') and import the scores, before the {scorer} metric may decide")
    if sp["rho"] is None:
        return RULE, False, (f"not calibrated: {found['n_samples']} rated sample(s) and no defined Spearman's rho "
                             "(fewer than 3, or one side constant)")
    ci = f", 95% CI [{sp['ci'][0]:.3f}, {sp['ci'][1]:.3f}]" if sp["ci"] else ""
    return RULE, sp["rho"] >= x, (f"{scorer}-human Spearman rho {sp['rho']:.3f}{ci} over {found['n_samples']} "
                                  f"human-audit samples ({len(found['runs'])} run(s)); required at least {x}")
