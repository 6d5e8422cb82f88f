"""Does a training log belong to a seed's checkpoints? (A log that goes to step 500 is not the log of checkpoints
that stop at step 12.)"""

from __future__ import annotations

from evalgate.diagnostics.log import TrainLog


def coverage(log: TrainLog, checkpoint_steps: list[int], overrun_factor: float = 2.0) -> list[str]:
    """Warnings when a log's logged steps do not cover the checkpoints' steps, or run far past them.

    Args:
        log: the seed's training log.
        checkpoint_steps: the steps of the seed's checkpoints (``checkpoint-N``).
        overrun_factor: warn when the log's last step is beyond this times the last checkpoint's step
            (``Thresholds.log_overrun_factor``).

    Returns:
        One sentence per problem (empty when the log fits): the log stops before the last checkpoint; it starts after
        the first checkpoint; it extends far past the last checkpoint.
    """
    span = log.steps
    steps = sorted(s for s in checkpoint_steps if s is not None)
    if not steps:
        return []
    if span is None:
        return [f"training log {log.source} has no logged step; it cannot describe checkpoints at steps "
                f"{steps[0]}..{steps[-1]}"]
    first, last = span
    out = []
    if last < steps[-1]:
        out.append(f"training log {log.source} stops at step {last} but checkpoints go to step {steps[-1]}: the "
                   f"log is older than the checkpoints or belongs to another run; steps after {last} are unchecked")
    if first > steps[0]:
        out.append(f"training log {log.source} starts at step {first}, after the checkpoint at step {steps[0]}: "
                   "the early steps are not in this log (a resumed run's new log?)")
    if last > overrun_factor * steps[-1]:
        out.append(f"training log {log.source} runs to step {last}, far past the last checkpoint at step "
                   f"{steps[-1]} (more than {overrun_factor:g}x): is it this seed's log?")
    return out
