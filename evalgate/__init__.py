"""evalgate: evaluate LLM post-training checkpoints on tiered splits and gate the release (docs/API.md).

The public API, imported lazily (lm-evaluation-harness's module ``__getattr__``): ``import evalgate`` loads
neither torch, transformers, DuckDB, vLLM nor the sandbox; each name below is imported on first use.

    import evalgate
    ws = evalgate.Workspace(home=".evalgate/nb", actor="alice")
    run = ws.evaluate("protocols/addition.yaml", checkpoint, split="addition-dev")   # -> evalgate.RunRecord
    verdict = ws.gate("gates/demo.yaml")                                             # -> evalgate.Verdict
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it (no import statement here: the package must import none of its
# modules, which import it back, e.g. ``from evalgate import accesslog``)
_EXPORTS: dict[str, str] = {
    "Workspace": "evalgate.workspace", "Environment": "evalgate.environment",
    "RunOptions": "evalgate.runner.plan", "RunRecord": "evalgate.runner.record",
    "Verdict": "evalgate.gate.results", "RuleOutcome": "evalgate.gate.results",
    "GateReport": "evalgate.report", "SweepSummary": "evalgate.sweep", "Diagnosis": "evalgate.diagnostics.diagnose",
    "DiagnosisSummary": "evalgate.diagnostics.results",
    "Samples": "evalgate.samples", "Sample": "evalgate.samples", "Comparison": "evalgate.samples",
    "AuditSummary": "evalgate.audit",
    "Tier": "evalgate.enums", "RunStatus": "evalgate.enums", "SampleStatus": "evalgate.enums",
    "Outcome": "evalgate.enums",
    "EvalgateError": "evalgate.errors", "BadInput": "evalgate.errors", "RefusedByPolicy": "evalgate.errors",
    "ProtocolDrift": "evalgate.errors", "EngineError": "evalgate.errors", "MissingExtra": "evalgate.errors",
    "EvalgateCallback": "evalgate.callback",
}

__all__ = ["AuditSummary", "BadInput", "Comparison", "Diagnosis", "DiagnosisSummary", "EngineError", "Environment",
           "EvalgateCallback", "EvalgateError", "GateReport", "MissingExtra", "Outcome", "ProtocolDrift",
           "RefusedByPolicy", "RuleOutcome", "RunOptions", "RunRecord", "RunStatus", "Sample", "SampleStatus",
           "Samples", "SweepSummary", "Tier", "Verdict", "Workspace", "__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562) and keep it in the module."""
    if name == "__version__":
        from evalgate.version import installed_version

        value: Any = installed_version() or "0+unknown"
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'evalgate' has no attribute {name!r}; the public API is evalgate.__all__")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
