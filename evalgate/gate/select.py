"""Best, last and failed checkpoints per training seed, from the selection split's runs (no split is read here).

Per seed: **last** = highest step; **failed** = a run error, a NaN/inf metric, non-finite weights, a training-log
guard trip at or before the checkpoint's step, or a collapse (the metric dropped more than ``collapse_drop`` from
the previous checkpoint); **best** = the highest metric among the rest (ties: the earlier step).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalgate.gate.results import CheckpointResult, SeedResult
from evalgate.trainlogs import Diagnostic

BEHAVIOUR_METRICS = ("mean_completion_tokens", "truncation_rate", "mean_repetition")


def finite(x: Any) -> bool:
    """True for an int or float that is neither NaN nor infinite."""
    return isinstance(x, int | float) and math.isfinite(x)


def weights_finite(path: str | Path) -> bool | None:
    """True when every tensor in the checkpoint's ``*.safetensors`` is finite; None when there are none to read."""
    files = sorted(Path(path).glob("*.safetensors")) if Path(path).is_dir() else []
    if not files:
        return None
    import torch
    from safetensors import safe_open

    for f in files:
        with safe_open(str(f), framework="pt") as fh:
            for k in fh.keys():  # noqa: SIM118 - safe_open has no __iter__
                t = fh.get_tensor(k)
                if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                    return False
    return True


def _checkpoint(run: dict[str, Any], metric: str) -> CheckpointResult:
    m = run.get("metrics") or {}
    return CheckpointResult(digest=run["checkpoint_digest"], path=run["checkpoint_path"], step=run["step"],
                            train_run=run["train_run"], run_id=run["run_id"], status=run["status"],
                            value=m.get(metric), stderr=m.get(f"{metric}_stderr"),
                            metrics={k: m.get(k) for k in BEHAVIOUR_METRICS})


def _mark_failed(cks: list[CheckpointResult], metric: str, collapse_drop: float | None,
                 trips: list[Diagnostic], bad_weights: set[str]) -> None:
    """Fill each checkpoint's ``failed_reasons`` (checkpoints in step order)."""
    prev_ok: float | None = None
    for c in cks:
        why = c.failed_reasons
        if c.status == "failed":
            why.append("run error")
        elif not finite(c.value):
            why.append(f"{metric} is {c.value!r} (NaN, inf or missing)")
        elif any(v is not None and not finite(v) for v in c.metrics.values()):
            why.append("NaN/inf in behaviour metrics")
        if c.digest in bad_weights:
            why.append("NaN/inf in weights")
        for d in trips:
            if c.step is not None and c.step >= d.step:
                why.append(f"guard {d.kind} tripped at step {d.step}")
        if c.value is not None and finite(c.value):
            if collapse_drop is not None and prev_ok is not None and prev_ok - c.value > collapse_drop:
                why.append(f"collapse: {metric} fell {prev_ok - c.value:.4f} from the previous checkpoint "
                           f"({prev_ok:.4f} -> {c.value:.4f}), more than {collapse_drop}")
            prev_ok = c.value


def select_checkpoints(runs: list[dict[str, Any]], metric: str, collapse_drop: float | None,
                       guard_steps: dict[int | None, list[Diagnostic]] | None = None,
                       bad_weights: set[str] | None = None) -> list[SeedResult]:
    """Best, last and failed checkpoints per training seed.

    Args:
        runs: complete or failed runs of the selection split (store rows), oldest first (the latest per checkpoint
            counts).
        metric: the selection metric.
        collapse_drop: absolute drop from the previous checkpoint (by step) that marks a collapse; None: off.
        guard_steps: training seed -> guard trips; a checkpoint at or after a trip's step is failed.
        bad_weights: checkpoint digests with non-finite weights.

    Returns:
        One ``SeedResult`` per training seed, by seed; its checkpoints by step; best is None when every checkpoint
        failed.
    """
    latest: dict[str, dict[str, Any]] = {}
    for r in runs:
        latest[r["checkpoint_digest"]] = r
    by_seed: dict[int | None, list[CheckpointResult]] = {}
    for r in latest.values():
        by_seed.setdefault(r["train_seed"], []).append(_checkpoint(r, metric))
    out = []
    for seed in sorted(by_seed, key=lambda s: (s is None, s)):
        cks = sorted(by_seed[seed], key=lambda c: (c.step is None, c.step or 0))
        _mark_failed(cks, metric, collapse_drop, (guard_steps or {}).get(seed, []), bad_weights or set())
        ok = [c for c in cks if not c.failed_reasons]
        best = max(ok, key=lambda c: (c.value or 0.0, -(c.step or 0))) if ok else None
        out.append(SeedResult(train_seed=seed, train_run=cks[0].train_run, checkpoints=cks, best=best,
                              last=cks[-1] if cks else None))
    return out
