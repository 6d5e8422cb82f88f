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

from evalgate.core import compat

compat.install()  # the module paths before the domain packages (``evalgate.accesslog`` ...), with a warning

# public name -> the module that defines it (no import statement here: the package must import none of its
# modules, which import it back)
_EXPORTS: dict[str, str] = {
    "Workspace": "evalgate.workspace", "Environment": "evalgate.core.environment",
    "RunOptions": "evalgate.runner.plan", "RunRecord": "evalgate.runner.record",
    "Verdict": "evalgate.gate.results", "RuleOutcome": "evalgate.gate.results",
    "GateReport": "evalgate.gate.report.outputs", "SweepSummary": "evalgate.sweep",
    "Diagnosis": "evalgate.diagnostics.diagnose", "DiagnosisSummary": "evalgate.diagnostics.results",
    "Samples": "evalgate.views.samples", "Sample": "evalgate.views.samples", "Comparison": "evalgate.views.samples",
    "AuditSummary": "evalgate.views.audit",
    "Metrics": "evalgate.core.results", "Estimate": "evalgate.core.results",
    "Tier": "evalgate.core.enums", "RunStatus": "evalgate.core.enums", "SampleStatus": "evalgate.core.enums",
    "Outcome": "evalgate.core.enums",
    "EvalgateError": "evalgate.core.errors", "BadInput": "evalgate.core.errors",
    "RefusedByPolicy": "evalgate.core.errors", "ProtocolDrift": "evalgate.core.errors",
    "EngineError": "evalgate.core.errors", "MissingExtra": "evalgate.core.errors",
    "EvalgateCallback": "evalgate.training.callback",
}

__all__ = ["AuditSummary", "BadInput", "Comparison", "Diagnosis", "DiagnosisSummary", "EngineError", "Environment",
           "Estimate", "EvalgateCallback", "EvalgateError", "GateReport", "Metrics", "MissingExtra", "Outcome",
           "ProtocolDrift", "RefusedByPolicy", "RuleOutcome", "RunOptions", "RunRecord", "RunStatus", "Sample",
           "SampleStatus", "Samples", "SweepSummary", "Tier", "Verdict", "Workspace", "__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562) and keep it in the module."""
    if name == "__version__":
        from evalgate.core.version import installed_version

        value: Any = installed_version() or "0+unknown"
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif f"evalgate.{name}" in compat.MOVED:  # ``evalgate.accesslog`` as an attribute: the moved module, warned
        value = importlib.import_module(f"evalgate.{name}")
    else:
        raise AttributeError(f"module 'evalgate' has no attribute {name!r}; the public API is evalgate.__all__")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
