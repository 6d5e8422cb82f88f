"""Statistics and rules on the decision split: pure functions over typed values (no store, no split read).

``statistics`` turns per-item values into per-seed estimates, the aggregate with its stderrs and the bootstrap of
candidate - baseline; ``rules`` reads those values and returns every rule's outcome.
"""

from __future__ import annotations

import numpy as np

from evalgate.core.errors import BadInput
from evalgate.core.stats import (
    bootstrap_ci,
    mean_stderr,
    paired_bootstrap_diff,
    stderr,
    stderr_items_paired,
    stderr_mean_of_means,
    stderr_over_seeds,
    stderr_paired_difference,
)
from evalgate.diagnostics.signals import SIGNAL_SERIES
from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import Aggregate, BaselineResult, Difference, Estimate, RuleOutcome, SeedResult, Statistics
from evalgate.gate.select import finite


def statistics(metric: str, per_seed: dict[int | None, dict[str, float]], baseline: dict[str, float] | float,
               confidence: float, resamples: int, boot_seed: int) -> Statistics:
    """Per-seed and aggregate means with their stderrs, and the paired bootstrap CI of the difference.

    Args:
        metric: the metric's name (for the record).
        per_seed: training seed -> item id -> the seed's best checkpoint's per-item value (at least one seed).
        baseline: item id -> the baseline checkpoint's per-item value, or a fixed value.
        confidence: two-sided level of every interval.
        resamples: bootstrap resamples.
        boot_seed: numpy generator seed of the bootstraps.

    Returns:
        The statistics over the items every seed scored (each seed's own estimate over all its items).

    Raises:
        BadInput: the seeds share no item; the baseline lacks items the seeds share.
    """
    estimates = {}
    for seed, vals in per_seed.items():
        mean, se = mean_stderr(list(vals.values()))
        ci = bootstrap_ci(list(vals.values()), confidence, resamples, boot_seed)
        estimates[seed] = Estimate(mean, se, len(vals), ci)
    items = sorted(set.intersection(*(set(v) for v in per_seed.values())))
    if not items:
        raise BadInput("the seeds' decision runs share no items")
    cand = np.array([[v[i] for i in items] for v in per_seed.values()])
    aggregate = Aggregate(
        mean_of_seed_means=float(cand.mean(axis=1).mean()),
        stderr_seeds_fixed=stderr_mean_of_means([stderr(row) for row in cand]),
        stderr_items_paired=stderr_items_paired(cand),
        stderr_over_seeds=stderr_over_seeds(cand) if len(per_seed) > 1 else None)
    base: np.ndarray | float
    b_est: Estimate | None = None
    paired: float | None = None
    if isinstance(baseline, dict):
        missing = [i for i in items if i not in baseline]
        if missing:
            raise BadInput(f"the baseline's decision run lacks {len(missing)} items the candidates have")
        base = np.array([baseline[i] for i in items])
        b_est = Estimate(*mean_stderr(list(base)), items=len(items))
        paired = stderr_paired_difference(cand, base)
    else:
        base = float(baseline)
    boot = paired_bootstrap_diff(cand, base, confidence, resamples, boot_seed)
    method = ("paired bootstrap over items" if len(per_seed) == 1
              else "two-stage bootstrap: seeds, then items (same item draw for the baseline)")
    method += "" if isinstance(baseline, dict) else "; baseline is a fixed value"
    diff = Difference(boot["diff"], boot["low"], boot["high"], boot["stderr"], int(boot["resamples"]),
                      boot["confidence"], method)
    return Statistics(metric, len(items), len(per_seed), estimates, b_est, aggregate, paired, diff)


def _join(vals: dict[int | None, float], fmt: str) -> str:
    return ", ".join(f"seed {k}: {v:{fmt}}" for k, v in vals.items())


def _behaviour_rules(policy: GatePolicy, chosen: list[SeedResult], baseline: BaselineResult) -> list[RuleOutcome]:
    r = policy.rules
    out = []
    for key, label, limit in (("truncation_rate", "max_truncation_rate", r.max_truncation_rate),
                              ("mean_repetition", "max_repetition", r.max_repetition)):
        if limit is None:
            continue
        vals = {s.train_seed: s.decision.metrics.get(key, 0.0) for s in chosen if s.decision}
        worst = max(vals.values(), default=0.0)
        out.append(RuleOutcome(label, worst <= limit, f"{key} on {policy.decision_split}: {_join(vals, '.3f')}; "
                                                      f"allowed <= {limit}"))
    if r.max_length_inflation is not None and baseline.decision is not None:
        bt = baseline.decision.metrics.get("mean_completion_tokens") or float("nan")
        ratios = {s.train_seed: s.decision.metrics.get("mean_completion_tokens", float("nan")) / bt
                  for s in chosen if s.decision}
        ok = all(finite(v) and v <= r.max_length_inflation for v in ratios.values())
        each = ", ".join(f"seed {k}: {v:.2f}x" for k, v in ratios.items())
        out.append(RuleOutcome("max_length_inflation", ok, f"mean completion tokens / baseline's ({bt:.1f}): {each}"
                                                           f"; allowed <= {r.max_length_inflation}x"))
    return out + _tool_rules(policy, chosen, baseline)


def _inflation(value: float, base: float) -> float:
    """``value / base``; a base of 0 gives 1 for a value of 0 (no change) and inf for any other."""
    if base == 0:
        return 1.0 if value == 0 else float("inf")
    return value / base


def _tool_rules(policy: GatePolicy, chosen: list[SeedResult], baseline: BaselineResult) -> list[RuleOutcome]:
    """``max_tool_call_inflation`` and ``max_tool_violation_rate`` over the decision runs' ``metrics["tools"]``
    (``evalgate.runner.agent.metrics.tool_metrics``). A run without tool metrics (its protocol offers no tools)
    fails the rule, which says it cannot be checked and why."""
    r = policy.rules
    if not r.tool_rules or not chosen:
        return []
    tools = {s.train_seed: (s.decision.metrics.get("tools") if s.decision else None) for s in chosen}
    base = baseline.decision.metrics.get("tools") if baseline.decision else None
    split = policy.decision_split

    def not_checkable(rule: str, missing: list[str]) -> RuleOutcome:
        return RuleOutcome(rule, False, f"cannot be checked: the {split} runs of {', '.join(missing)} hold no "
                                        f"tool-use metrics (metrics.tools): protocol {policy.protocol} offers no "
                                        "tools, or they were run before tool use was counted; drop the rule or "
                                        "gate an agentic protocol")

    out = []
    absent = [f"seed {k}" for k, t in tools.items() if not t]
    if r.max_tool_call_inflation is not None:
        if absent or not base:
            out.append(not_checkable("max_tool_call_inflation", absent + ([] if base else ["the baseline"])))
        else:
            b = base["tool_calls_per_sample"]
            calls = {k: float(t["tool_calls_per_sample"]) for k, t in tools.items() if t}
            ratios = {k: _inflation(v, b) for k, v in calls.items()}
            each = ", ".join(f"seed {k}: {v:.2f}x ({calls[k]:.3f})" for k, v in ratios.items())
            out.append(RuleOutcome("max_tool_call_inflation",
                                   all(v <= r.max_tool_call_inflation for v in ratios.values()),
                                   f"tool calls per sample on {split} / baseline's ({b:.3f}): {each}; allowed <= "
                                   f"{r.max_tool_call_inflation}x"))
    if r.max_tool_violation_rate is not None:
        if absent:
            out.append(not_checkable("max_tool_violation_rate", absent))
        else:
            rates = {k: float(t["violation_rate"]) for k, t in tools.items() if t}
            out.append(RuleOutcome("max_tool_violation_rate", max(rates.values()) <= r.max_tool_violation_rate,
                                   f"share of samples with a tool violation on {split}: {_join(rates, '.3f')}; "
                                   f"allowed <= {r.max_tool_violation_rate}"))
    return out


def _not_checkable(seeds: list[SeedResult]) -> list[str]:
    """The signals each seed's log cannot check, grouped by the series they read, seeds with the same list together:
    ``seeds 1, 2: kl_above_target, kl_rising, kl_negative [kl]; value_loss [value_loss]``."""
    by_text: dict[str, list[str]] = {}
    for s in seeds:
        groups: dict[str, list[str]] = {}
        for f in s.guards.not_checkable if s.guards else []:
            groups.setdefault(SIGNAL_SERIES.get(f.signal, f.signal), []).append(f.signal)
        if groups:
            text = "; ".join(f"{', '.join(v)} [{k}]" for k, v in groups.items())
            by_text.setdefault(text, []).append(str(s.train_seed))
    return [f"seed{'s' if len(ks) > 1 else ''} {', '.join(ks)}: {text}" for text, ks in by_text.items()]


def _guards_rule(policy: GatePolicy, seeds: list[SeedResult]) -> RuleOutcome:
    """``training_guards``: fails on a trip (a finding whose severity is in ``guards.fail_on``) or on a required
    signal a seed's log cannot check; names every signal that is not checkable and every coverage warning, so a
    guard that could not run never passes silently."""
    req = policy.guards.require
    hits = [(s.train_seed, d) for s in seeds for d in s.diagnostics if d.signal != "reward_hacking"]
    no_log = [s.train_seed for s in seeds if s.train_log is None]
    unmet = [f"seed {s.train_seed}: {f.signal} ({f.message})" for s in seeds if s.guards
             for f in s.guards.not_checkable if f.signal in req]
    unmet += [f"seed {k}: no training log, so {', '.join(req)} cannot be checked" for k in no_log if req]
    parts = ["; ".join(f"seed {k}: {d.signal} at step {d.step}: {d.message}" for k, d in hits) or "no guard tripped"]
    if unmet:
        parts.append("Required signal(s) not checkable: " + "; ".join(unmet))
    nc = _not_checkable(seeds)
    if nc:
        parts.append("Not checkable from the log (keys absent, zero or NaN throughout, or too few values): "
                     + "; ".join(nc))
    cov = [f"seed {s.train_seed}: {w}" for s in seeds if s.guards for w in s.guards.coverage]
    if cov:
        parts.append("Coverage: " + "; ".join(cov))
    if no_log:
        parts.append(f"No training log found for seed(s) {', '.join(map(str, no_log))}")
    return RuleOutcome("training_guards", not hits and not unmet, ". ".join(p.rstrip(".") for p in parts) + ".")


def _training_rules(policy: GatePolicy, seeds: list[SeedResult]) -> list[RuleOutcome]:
    out = []
    if policy.rules.training_guards:
        out.append(_guards_rule(policy, seeds))
    if policy.rules.reward_hacking:
        hits = [(s.train_seed, d) for s in seeds for d in s.diagnostics if d.signal == "reward_hacking"]
        no_reward = [s.train_seed for s in seeds if not s.train_series.get("reward")]
        detail = "; ".join(f"seed {k}: triad at step {d.step}: {d.message}" for k, d in hits) or "no triad"
        if no_reward:
            detail += f" (no training reward logged for seed(s) {', '.join(map(str, no_reward))}: not checkable)"
        out.append(RuleOutcome("reward_hacking", not hits, detail))
    return out


def rules(policy: GatePolicy, seeds: list[SeedResult], baseline: BaselineResult,
          stats: Statistics | None) -> list[RuleOutcome]:
    """Every rule of the policy that applies, in a fixed order.

    Args:
        policy: the policy (its ``rules``, metric and decision split).
        seeds: every training seed's result; those with a best checkpoint are the candidates.
        baseline: the baseline (its decision run's behaviour metrics for length inflation).
        stats: ``statistics`` over the candidates' decision runs (None: no candidate).

    Returns:
        ``best_checkpoint`` (only when no seed has one), ``min_seeds``, ``min_improvement``, ``seeds_beat_baseline``,
        ``max_truncation_rate``, ``max_repetition``, ``max_length_inflation``, ``max_tool_call_inflation``,
        ``max_tool_violation_rate``, ``training_guards``, ``reward_hacking`` -- each when the policy sets it.
    """
    r = policy.rules
    m = policy.metric
    chosen = [s for s in seeds if s.best is not None]
    out: list[RuleOutcome] = []
    if not chosen:
        out.append(RuleOutcome("best_checkpoint", False, "every checkpoint of every seed failed; nothing to release"))
    if r.min_seeds is not None:
        out.append(RuleOutcome("min_seeds", len(chosen) >= r.min_seeds,
                               f"{len(chosen)} seed(s) with a non-failed best checkpoint "
                               f"({', '.join(str(s.train_seed) for s in chosen) or 'none'}), "
                               f"required >= {r.min_seeds}"))
    b_value = stats.baseline.value if stats and stats.baseline else baseline.value
    if r.min_improvement is not None and stats:
        d = stats.difference
        out.append(RuleOutcome("min_improvement", d.low >= r.min_improvement,
                               f"{m} difference vs baseline {d.diff:+.4f}, {d.confidence:.0%} CI "
                               f"[{d.low:+.4f}, {d.high:+.4f}] ({d.method}); lower end required >= "
                               f"{r.min_improvement:+g}"))
    if r.seeds_beat_baseline_share is not None and stats and b_value is not None:
        values = {seed: e.value for seed, e in stats.per_seed.items()}
        beat = [v for v in values.values() if v >= b_value]
        share = len(beat) / len(values)
        out.append(RuleOutcome("seeds_beat_baseline", share >= r.seeds_beat_baseline_share,
                               f"{len(beat)} of {len(values)} seeds' best >= baseline {b_value:.4f} "
                               f"({_join(values, '.4f')}); required share >= {r.seeds_beat_baseline_share:g}"))
    return out + _behaviour_rules(policy, chosen, baseline) + _training_rules(policy, seeds)
