"""Scoring: pass@k, sandboxed code execution, behaviour metrics, and the scorer registry.

The names below are imported on first use (PEP 562 ``__getattr__``), so ``import evalgate.scoring`` loads no scorer:
the registry (``base.SCORERS``) imports a scorer's module only when a protocol uses it.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "SCORERS": "base", "SampleToScore": "base", "Scorer": "base", "ScoreResult": "base", "get_scorer": "base",
    "aggregate_behavior": "behavior", "repetition_ratio": "behavior", "sample_behavior": "behavior",
    "ExecResult": "code", "run_code": "code", "run_many": "code",
    "exact_match": "exact", "normalize": "exact", "extract_answer": "extract", "math_equal": "math",
    "mean_pass_at_k": "passk", "pass_at_k": "passk",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"evalgate.scoring.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evalgate.scoring' has no attribute {name!r}")
