"""Calibration of a proxy scorer against people: may a reward model's (or a judge's) metric decide a release?

A proxy scorer (its registry entry sets ``proxy``: ``reward_model``, and an LLM judge) stands in for human
preference, which it tracks only as far as it was shown to (Gao et al. 2022, "Scaling Laws for Reward Model
Overoptimization"). The human-audit tier exists to measure that: people rate samples blind (``evalgate serve``)
and ``evalgate.agreement`` compares their scores with the scorer's. The gate rule ``rules.min_proxy_agreement``
lets such a metric decide only when that agreement reaches the policy's threshold: Spearman's rho between the
scorer's score and the raters' mean score, over every human-rated sample of a run of the gated protocol on a
human-audit split (pooled over those runs, any checkpoint), with its percentile bootstrap CI
(``agreement.spearman_ci``). No such rated sample means the proxy is not calibrated, and the rule fails; so does a
policy gating on a proxy's metric that sets no threshold at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.agreement import run_agreement, spearman_ci
from evalgate.store import Store

RULE = "proxy_calibrated"


def audit_agreement(store: Store, protocol: str, resamples: int = 2000) -> dict[str, Any]:
    """The scorer-human agreement of protocol ``name@version`` on the human-audit tier.

    Returns:
        ``{"runs": [run ids], "n_samples", "spearman": {"n", "rho", "ci"}}`` over every rated sample of the
        protocol's complete runs on human-audit splits, pooled.
    """
    name, _, version = protocol.partition("@")
    runs, auto, human = [], [], []
    for b in store.batches():
        run = store.runs(run_id=b["run_id"])
        if b["run_id"] in runs or not run or (run[0]["protocol_name"], run[0]["protocol_version"]) != (name, version) \
                or run[0]["tier"] != "human-audit":
            continue
        runs.append(b["run_id"])
        for s in run_agreement(store, b["run_id"], resamples=resamples)["samples"]:
            auto.append(s["auto"])
            human.append(s["human"])
    return {"runs": runs, "n_samples": len(auto), "spearman": spearman_ci(auto, human, resamples=resamples)}


def _scorer(protocol_file: str | None) -> str | None:
    """The scorer name of the policy's protocol file, or None when there is no such file."""
    if not protocol_file or not Path(protocol_file).is_file():
        return None
    from evalgate.protocol import load_protocol

    return load_protocol(protocol_file).spec.scorer.name


def calibration_rule(store: Store, policy: Any) -> tuple[str, bool, str] | None:
    """The gate rule ``min_proxy_agreement`` of ``policy`` (a ``GatePolicy``).

    Returns:
        ``(rule name, passed, detail)``. Passed with a note when the protocol's scorer is not a proxy (a verified
        score: the rule does not apply); failed when the protocol file is missing (the scorer cannot be known),
        when the scorer is a proxy (``ScorerEntry.proxy``: a judge, a reward model) and the policy sets no
        threshold (an uncalibrated proxy never decides), when no human-rated audit-tier sample exists, when rho is
        undefined, or when rho is below the threshold. None when the rule is off and the protocol file is missing
        or its scorer is not a proxy.
    """
    from evalgate.scoring.base import SCORERS

    x = policy.rules.min_proxy_agreement
    scorer = _scorer(policy.protocol_file)
    if scorer is None:
        if x is None:
            return None
        return RULE, False, (f"not checkable: protocol file {policy.protocol_file} not found, so its scorer is not "
                             "known; set protocol_file in the gate policy")
    entry = SCORERS.get(scorer)
    if entry is None or not entry.proxy:
        return None if x is None else (RULE, True, f"does not apply: scorer {scorer} is not a proxy for people")
    if x is None:
        return RULE, False, (f"not calibrated: {policy.protocol}'s scorer {scorer} is a proxy for people and the "
                             "policy sets no rules.min_proxy_agreement; set the Spearman's rho its scores must reach "
                             "against human ratings on the human-audit tier before its metric may decide")
    found = audit_agreement(store, policy.protocol, policy.bootstrap_resamples)
    sp = found["spearman"]
    if not found["n_samples"]:
        return RULE, False, (f"not calibrated: no human-rated sample of a {policy.protocol} run on a human-audit "
                             f"split; rate one with 'evalgate serve' before the {scorer} metric may decide")
    if sp["rho"] is None:
        return RULE, False, (f"not calibrated: {found['n_samples']} rated sample(s) and no defined Spearman's rho "
                             "(fewer than 3, or one side constant)")
    ci = f", 95% CI [{sp['ci'][0]:.3f}, {sp['ci'][1]:.3f}]" if sp["ci"] else ""
    return RULE, sp["rho"] >= x, (f"{scorer}-human Spearman rho {sp['rho']:.3f}{ci} over {found['n_samples']} "
                                  f"human-audit samples ({len(found['runs'])} run(s)); required at least {x}")
