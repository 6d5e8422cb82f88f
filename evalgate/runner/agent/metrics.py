"""Tool-use metrics of an agentic run, and the scored samples adjusted for trajectories that ended in a violation.

Per sample (joined to its behaviour record): ``tool_calls``, ``violations``, ``parse_errors``, ``turns``,
``agent_status``. Per run (``metrics["tools"]``): means over samples of calls, calls per tool, violations, parse
errors, turns and completion tokens over all turns; the fraction of samples with a violation; samples by ending
status; turns generated and replayed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

from evalgate.runner.agent.loop import AgentRun
from evalgate.runner.plan import RunPlan
from evalgate.runner.score import Scored, compute_metrics


def tool_metrics(run: AgentRun) -> dict[str, Any]:
    """The run's tool-use metrics (see the module docstring); per-turn timing from ``run``'s clocks."""
    sums = [tr.summary() for tr in run.trajectories.values()]
    n = max(len(sums), 1)
    by_tool: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for s in sums:
        by_tool.update(s["calls_by_tool"])
        kinds.update(s["violations_by_kind"])
    turns = sum(s["turns"] for s in sums)
    return {
        "tool_calls_per_sample": sum(s["tool_calls"] for s in sums) / n,
        "calls_per_tool": {k: v / n for k, v in sorted(by_tool.items())},
        "violations_per_sample": sum(s["violations"] for s in sums) / n,
        "violation_rate": sum(s["violations"] > 0 for s in sums) / n,
        "violations_by_kind": dict(sorted(kinds.items())),
        "parse_errors_per_sample": sum(s["parse_errors"] for s in sums) / n,
        "turns_per_sample": turns / n,
        "tokens_per_sample": sum(s["tokens"] for s in sums) / n,
        "by_status": dict(sorted(Counter(str(s["status"]) for s in sums).items())),
        "turns_generated": run.turns_generated, "turns_cached": run.turns_cached,
        "timing": {"loop_s": run.loop_s, "generate_s": run.gen_s, "tool_s": run.tool_s},
    }


def apply_trajectories(plan: RunPlan, scored: Scored, run: AgentRun) -> Scored:
    """``scored`` with each sample's tool-use counts in its behaviour record, samples that ended in a violation
    (``tools.violation: end``) scored 0 with status ``tool_violation``, the run metrics recomputed over them and
    ``metrics["tools"]`` added."""
    samples, per_item = [], defaultdict(list)
    for s in scored.samples:
        summ = run.trajectories[(s["item_id"], s["sample_index"], s["seed"])].summary()
        s = {**s, "behavior": {**s["behavior"], "tool_calls": summ["tool_calls"], "violations": summ["violations"],
                               "parse_errors": summ["parse_errors"], "turns": summ["turns"],
                               "agent_status": summ["status"]}}
        if summ["status"] == "tool_violation":
            s.update(score=0.0, status="tool_violation")
        samples.append(s)
        per_item[s["item_id"]].append(s)
    items = {str(it["id"]): it for it in plan.items}
    metrics = {**compute_metrics(plan.protocol, per_item, items, plan.scorer), "tools": tool_metrics(run)}
    return replace(scored, samples=samples, metrics=metrics)
