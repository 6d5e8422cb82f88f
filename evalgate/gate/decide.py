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
from evalgate.gate.results import (
    Aggregate,
    BaselineResult,
    Difference,
    Estimate,
    RuleOutcome,
    SeedResult,
    Statistics,
    not_checkable,
)
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


def _count(ok: list[bool], what: str) -> str:
    """A rule's detail for experiment trackers (``RuleOutcome.export_detail``): how many seeds' best meet it (``ok``,
    one per seed), never a seed's value on the decision split."""
    return f"{sum(ok)} of {len(ok)} seeds' best: {what}"


def _behaviour_rules(policy: GatePolicy, chosen: list[SeedResult], baseline: BaselineResult) -> list[RuleOutcome]:
    """``max_truncation_rate``, ``max_repetition`` and ``max_length_inflation`` over the decision runs' behaviour
    metrics; a run without the metric a rule reads (a log-likelihood scorer generates no completion) makes the rule
    not checkable rather than read as 0."""
    r = policy.rules
    accept = r.accept_not_checkable
    out = []
    for key, label, limit in (("truncation_rate", "max_truncation_rate", r.max_truncation_rate),
                              ("mean_repetition", "max_repetition", r.max_repetition)):
        if limit is None or not chosen:
            continue
        vals = {s.train_seed: s.decision.metrics.get(key) for s in chosen if s.decision}
        absent = [f"seed {k}" for k, v in vals.items() if v is None]
        if absent or not vals:
            out.append(not_checkable(label, f"the {policy.decision_split} runs of {', '.join(absent) or 'no seed'} "
                                            f"hold no {key}", accept))
            continue
        got = {k: float(v) for k, v in vals.items() if v is not None}
        out.append(RuleOutcome(label, max(got.values()) <= limit,
                               f"{key} on {policy.decision_split}: {_join(got, '.3f')}; allowed <= {limit}",
                               export_detail=_count([v <= limit for v in got.values()],
                                                    f"{key} on {policy.decision_split} <= {limit}")))
    if r.max_length_inflation is not None and baseline.decision is not None and chosen:
        bt = baseline.decision.metrics.get("mean_completion_tokens")
        toks = {s.train_seed: s.decision.metrics.get("mean_completion_tokens") for s in chosen if s.decision}
        absent = [f"seed {k}" for k, v in toks.items() if v is None] + ([] if bt else ["the baseline"])
        if absent:
            out.append(not_checkable("max_length_inflation", f"the {policy.decision_split} runs of "
                                     f"{', '.join(absent)} hold no mean_completion_tokens (or the baseline's is 0)",
                                     accept))
        else:
            most = r.max_length_inflation
            ratios = {k: float(v) / float(bt) for k, v in toks.items() if v is not None and bt}
            ok = all(finite(v) and v <= most for v in ratios.values())
            each = ", ".join(f"seed {k}: {v:.2f}x" for k, v in ratios.items())
            out.append(RuleOutcome("max_length_inflation", ok, f"mean completion tokens / baseline's ({bt:.1f}): "
                                                               f"{each}; allowed <= {r.max_length_inflation}x",
                                   export_detail=_count([finite(v) and v <= most for v in ratios.values()],
                                                        "mean completion tokens within "
                                                        f"{r.max_length_inflation}x the baseline's")))
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

    def no_tools(rule: str, missing: list[str]) -> RuleOutcome:
        return not_checkable(rule, f"the {split} runs of {', '.join(missing)} hold no tool-use metrics "
                                   f"(metrics.tools): protocol {policy.protocol} offers no tools, or they were run "
                                   "before tool use was counted; drop the rule or gate an agentic protocol",
                             r.accept_not_checkable)

    out = []
    absent = [f"seed {k}" for k, t in tools.items() if not t]
    if r.max_tool_call_inflation is not None:
        if absent or not base:
            out.append(no_tools("max_tool_call_inflation", absent + ([] if base else ["the baseline"])))
        else:
            b, most = base["tool_calls_per_sample"], r.max_tool_call_inflation
            calls = {k: float(t["tool_calls_per_sample"]) for k, t in tools.items() if t}
            ratios = {k: _inflation(v, b) for k, v in calls.items()}
            each = ", ".join(f"seed {k}: {v:.2f}x ({calls[k]:.3f})" for k, v in ratios.items())
            out.append(RuleOutcome("max_tool_call_inflation",
                                   all(v <= r.max_tool_call_inflation for v in ratios.values()),
                                   f"tool calls per sample on {split} / baseline's ({b:.3f}): {each}; allowed <= "
                                   f"{r.max_tool_call_inflation}x",
                                   export_detail=_count([v <= most for v in ratios.values()],
                                                        f"tool calls per sample within {r.max_tool_call_inflation}x "
                                                        "the baseline's")))
    if r.max_tool_violation_rate is not None:
        if absent:
            out.append(no_tools("max_tool_violation_rate", absent))
        else:
            rates = {k: float(t["violation_rate"]) for k, t in tools.items() if t}
            out.append(RuleOutcome("max_tool_violation_rate", max(rates.values()) <= r.max_tool_violation_rate,
                                   f"share of samples with a tool violation on {split}: {_join(rates, '.3f')}; "
                                   f"allowed <= {r.max_tool_violation_rate}",
                                   export_detail=_count([v <= (r.max_tool_violation_rate or 0) for v in rates.values()],
                                                        f"tool violation rate on {split} <= "
                                                        f"{r.max_tool_violation_rate}")))
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


def _unguarded(seeds: list[SeedResult]) -> list[str]:
    """The seeds whose guards checked nothing: no training log, or a log on which every signal is not checkable or
    off."""
    out = []
    for s in seeds:
        d = s.guards.diagnosis if s.guards else None
        if d is None or not any(f.status not in ("not_checkable", "off") for f in d.findings):
            out.append(f"seed {s.train_seed} ({'no training log' if d is None else 'its log checks no signal'})")
    return out


def _guards_rule(policy: GatePolicy, seeds: list[SeedResult]) -> RuleOutcome:
    """``training_guards``: fails on a trip (a finding whose severity is in ``guards.fail_on``) or on a required
    signal a seed's log cannot check; names every signal that is not checkable and every coverage warning, so a
    guard that could not run never passes silently. A seed whose guards checked nothing (no log, or no checkable
    signal) makes the rule not checkable when nothing tripped (``results.not_checkable``)."""
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
    detail = ". ".join(p.rstrip(".") for p in parts)
    unguarded = _unguarded(seeds)
    if not hits and not unmet and unguarded:
        return not_checkable("training_guards", f"{', '.join(unguarded)}; pass the log under training_logs or "
                                                f"write it beside the checkpoints. {detail}",
                             policy.rules.accept_not_checkable)
    return RuleOutcome("training_guards", not hits and not unmet, detail + ".")


def _triad_rule(policy: GatePolicy, seeds: list[SeedResult]) -> RuleOutcome:
    """``reward_hacking``: fails on a seed's triad; a seed the triad cannot check (no training reward logged, or no
    two dev checkpoints with training reward around both) makes it not checkable when no seed shows one."""
    hits = [(s.train_seed, d) for s in seeds for d in s.diagnostics if d.signal == "reward_hacking"]
    detail = "; ".join(f"seed {k}: triad at step {d.step}: {d.message}" for k, d in hits)
    if hits:
        return RuleOutcome("reward_hacking", False, detail)
    unchecked = [f"seed {s.train_seed} (" + ("no training reward logged" if not s.train_series.get("reward") else
                                              "no two dev checkpoints with training reward logged before each") + ")"
                 for s in seeds if not s.triad_checked]
    checked = sum(s.triad_checked for s in seeds)
    if unchecked:
        return not_checkable("reward_hacking", "; ".join(unchecked) + (
            f" ({checked} checkpoint step(s) of other seeds checked, no triad)" if checked else ""),
                             policy.rules.accept_not_checkable)
    return RuleOutcome("reward_hacking", True, f"no triad over {checked} dev checkpoint step(s)")


def _training_rules(policy: GatePolicy, seeds: list[SeedResult]) -> list[RuleOutcome]:
    out = []
    if policy.rules.training_guards:
        out.append(_guards_rule(policy, seeds))
    if policy.rules.reward_hacking:
        out.append(_triad_rule(policy, seeds))
    return out


def selection_rules(policy: GatePolicy, seeds: list[SeedResult]) -> list[RuleOutcome]:
    """The rules that need no decision read (the dev runs and the training logs only), so the gate applies them
    before its first private read: ``best_checkpoint`` (only when no seed has one), ``min_seeds``,
    ``training_guards``, ``reward_hacking`` -- each when the policy sets it."""
    chosen = [s for s in seeds if s.best is not None]
    out: list[RuleOutcome] = []
    if not chosen:
        out.append(RuleOutcome("best_checkpoint", False, "every checkpoint of every seed failed; nothing to release"
                               if seeds else "no checkpoint was picked for any seed; nothing to release"))
    if policy.rules.min_seeds is not None:
        out.append(RuleOutcome("min_seeds", len(chosen) >= policy.rules.min_seeds,
                               f"{len(chosen)} seed(s) with a non-failed best checkpoint "
                               f"({', '.join(str(s.train_seed) for s in chosen) or 'none'}), "
                               f"required >= {policy.rules.min_seeds}"))
    return out + _training_rules(policy, seeds)


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
    early = selection_rules(policy, seeds)
    out = [x for x in early if x.rule in ("best_checkpoint", "min_seeds")]
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
                               f"({_join(values, '.4f')}); required share >= {r.seeds_beat_baseline_share:g}",
                               export_detail=f"{len(beat)} of {len(values)} seeds' best >= the baseline on "
                                             f"{policy.decision_split}; required share >= "
                                             f"{r.seeds_beat_baseline_share:g}"))
    return out + _behaviour_rules(policy, chosen, baseline) + [x for x in early if x not in out]
