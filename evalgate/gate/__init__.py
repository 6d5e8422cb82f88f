"""The release gate: gate policies, best/last/failed checkpoints per training seed, and the verdict.

Modules: ``policy`` (the policy file's models, ``load_policy``), ``select`` (best/last/failed per seed, the weight
scan), ``guards`` (training-log guards), ``reads`` (every split read: tiers, budget, decision runs), ``decide``
(statistics and rules, pure functions), ``results`` (``Verdict`` and the per-seed results), ``pipeline``
(``run_gate``). Writing the reports lives in ``evalgate.gate.report.outputs`` (``gate_and_report``).
"""

from __future__ import annotations

from typing import Any

from evalgate.core import lazy

_WHERE = {  # name -> the submodule that defines it
    "rules": "decide", "statistics": "decide", "item_values": "pipeline", "run_gate": "pipeline",
    "Baseline": "policy", "GatePolicy": "policy", "GateRules": "policy", "Guards": "policy",
    "ProxyProtocol": "policy", "Selection": "policy", "load_policy": "policy", "SELECTION_PURPOSE": "reads",
    "Aggregate": "results", "BaselineResult": "results", "CheckpointResult": "results", "DecisionRun": "results",
    "DevRun": "results", "Difference": "results", "Estimate": "results", "RuleOutcome": "results",
    "SeedResult": "results", "Statistics": "results", "TrainLogInfo": "results", "Verdict": "results",
    "select_checkpoints": "select", "weights_finite": "select",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _WHERE, name, globals())
