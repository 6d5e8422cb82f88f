"""``evalgate gate --evaluate-missing``: the sweep a gate runs first, so every candidate has a selection run."""

from __future__ import annotations

from pathlib import Path

from evalgate.core.errors import EvalgateError
from evalgate.gate.policy import load_policy
from evalgate.runner.plan import RunOptions
from evalgate.store import Store
from evalgate.sweep import SweepOptions, SweepSummary, run_sweep


def evaluate_missing(policy_path: str | Path, checkpoints: str, actor: str | None = None,
                     progress: bool = True, store: Store | None = None) -> SweepSummary:
    """Before a gate: sweep the checkpoints matching ``checkpoints`` on the gate policy's selection split with its
    protocol file and backend, so every candidate has a complete selection run (units already complete are
    skipped; ``evalgate gate --evaluate-missing``).

    Returns:
        The ``SweepSummary``.

    Raises:
        BadInput: a bad policy or glob (as ``sweep``).
        EvalgateError: some units failed (the message names them; exit code the highest of theirs), so the gate
            does not decide on an incomplete set of candidates.
    """
    policy = load_policy(policy_path)
    summary = run_sweep(policy.protocol_file or "", checkpoints, [policy.selection_split],
                        SweepOptions(run=RunOptions(backend=policy.backend, actor=actor, progress=progress)), store)
    failed = summary.failed
    if failed:
        err = EvalgateError(f"--evaluate-missing: {len(failed)} of {len(summary.units)} selection runs failed ("
                            + "; ".join(f"{u['checkpoint']}: {u['error']}" for u in failed[:3])
                            + "); fix them and rerun (completed runs are kept and skipped)")
        err.exit_code = summary.exit_code
        raise err
    return summary
