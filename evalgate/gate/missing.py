"""``evalgate gate --evaluate-missing``: the sweep a gate runs first, so every candidate has a selection run."""

from __future__ import annotations

from pathlib import Path

from evalgate.core.errors import EvalgateError
from evalgate.gate.policy import load_policy
from evalgate.runner.plan import RunOptions
from evalgate.store import Store
from evalgate.sweep import SweepOptions, SweepSummary, run_sweep


def evaluate_missing(policy_path: str | Path, checkpoints: str, actor: str | None = None,
                     progress: bool = True, *, store: Store) -> SweepSummary:
    """Before a gate: sweep the checkpoints matching ``checkpoints`` on the gate policy's selection split with its
    protocol file and backend, so every candidate has a complete selection run (units already complete are
    skipped; ``evalgate gate --evaluate-missing``). A suite policy: on each selecting member's selection split with
    the member's protocol file and backend, one sweep per member, summed into one summary.

    Returns:
        The ``SweepSummary``.

    Raises:
        BadInput: a bad policy or glob (as ``sweep``).
        EvalgateError: some units failed (the message names them; exit code the highest of theirs), so the gate
            does not decide on an incomplete set of candidates.
    """
    from evalgate.gate.suite import is_suite, load_suite

    if is_suite(policy_path):  # every member that selects, on its own selection split
        policies = [m.policy for m in load_suite(policy_path).members if m.spec.select and m.has_selection]
    else:
        policies = [load_policy(policy_path)]
    summaries = [run_sweep(p.protocol_file or "", checkpoints, [p.selection_split],
                           SweepOptions(run=RunOptions(backend=p.backend, actor=actor, progress=progress)), store)
                 for p in policies]
    summary = summaries[0] if len(summaries) == 1 else _combined(summaries)
    failed = summary.failed
    if failed:
        err = EvalgateError(f"--evaluate-missing: {len(failed)} of {len(summary.units)} selection runs failed ("
                            + "; ".join(f"{u.checkpoint}: {u.error}" for u in failed[:3])
                            + "); fix them and rerun (completed runs are kept and skipped)")
        err.exit_code = summary.exit_code
        raise err
    return summary


def _combined(summaries: list[SweepSummary]) -> SweepSummary:
    """One summary of several sweeps (a suite's members): their units and splits in order, counts and tokens
    summed, the glob's ignored paths once, the highest exit code; ``protocol`` is the first's."""
    counts: dict[str, int] = {}
    for s in summaries:
        for k, n in s.counts.items():
            counts[k] = counts.get(k, 0) + n
    ignored = list({str(i): i for s in summaries for i in s.ignored}.values())
    return SweepSummary(summaries[0].protocol, [x for s in summaries for x in s.splits], summaries[0].where,
                        [u for s in summaries for u in s.units], counts, ignored, sum(s.tokens for s in summaries),
                        sum(s.wall_s for s in summaries), max(s.exit_code for s in summaries))
