"""The release gate: gate policies, best/last/failed checkpoints per training seed, and the verdict.

Modules: ``policy`` (the policy file's models, ``load_policy``), ``select`` (best/last/failed per seed, the weight
scan), ``guards`` (training-log guards), ``reads`` (every split read: tiers, budget, decision runs), ``decide``
(statistics and rules, pure functions), ``results`` (``Verdict`` and the per-seed results), ``pipeline``
(``run_gate``). Writing the reports lives in ``evalgate.gate.report.outputs`` (``gate_and_report``).
"""

from evalgate.gate.decide import rules, statistics
from evalgate.gate.pipeline import item_values, run_gate
from evalgate.gate.policy import Baseline, GatePolicy, GateRules, Guards, ProxyProtocol, Selection, load_policy
from evalgate.gate.reads import SELECTION_PURPOSE
from evalgate.gate.results import (
                                   Aggregate,
                                   BaselineResult,
                                   CheckpointResult,
                                   DecisionRun,
                                   DevRun,
                                   Difference,
                                   Estimate,
                                   RuleOutcome,
                                   SeedResult,
                                   Statistics,
                                   TrainLogInfo,
                                   Verdict,
)
from evalgate.gate.select import select_checkpoints, weights_finite

__all__ = [
    "SELECTION_PURPOSE", "Aggregate", "Baseline", "BaselineResult", "CheckpointResult", "DecisionRun", "DevRun",
    "Difference", "Estimate", "GatePolicy", "GateRules", "Guards", "ProxyProtocol", "RuleOutcome", "SeedResult",
    "Selection", "Statistics", "TrainLogInfo", "Verdict", "item_values", "load_policy", "rules", "run_gate",
    "select_checkpoints", "statistics", "weights_finite",
]
