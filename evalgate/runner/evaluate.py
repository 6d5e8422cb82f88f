"""``evaluate()``: protocol x checkpoint x split x sampling seed -> samples, scores and metrics in the store.

The run is a pipeline of stages with typed values between them (``evalgate.runner``): ``prepare`` -> ``RunPlan``
(protocol verified against its lock, checkpoint resolved, the read admitted by the release grant and the split's
tier policy, items read, prompts rendered, every sample looked up in the generation cache); ``start`` logs the read
(cached or not) and stores the draft ``RunRecord``; ``generate_missing`` -> ``Generated`` (only what is missing,
each request's completions stored as they finish, so a killed run resumes where it stopped); ``score`` ->
``Scored``; ``record`` -> the complete ``RunRecord``, stored with the samples in one transaction and returned as
the run document.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.checkpoints.resolve import Checkpoint
from evalgate.core.errors import EvalgateError, Terminated
from evalgate.core.progress import progress_bars
from evalgate.runner.generate import Generated, generate_missing
from evalgate.runner.grant import ReleaseGrant
from evalgate.runner.plan import RunOptions, RunPlan, effective_params, prepare
from evalgate.runner.record import RunRecord, record, start
from evalgate.runner.score import compute_metrics, score
from evalgate.splits.manifest import RELEASE_GATE
from evalgate.store import Store, handed_down

if TYPE_CHECKING:
    from evalgate.runner.agent.loop import AgentRun

__all__ = ["ReleaseGrant", "RunOptions", "RunRecord", "compute_metrics", "effective_params", "evaluate",
           "evaluate_checkpoint", "finish", "marking_stops"]


def evaluate(protocol_path: str | Path, checkpoint: str | Path | Checkpoint, split: str,
             options: RunOptions | None = None, store: Store | None = None) -> dict[str, Any]:
    """``evaluate_checkpoint(...).as_dict()``: the run document (what ``evalgate run --json`` prints and the
    ``runs`` row holds): run_id, status, protocol, checkpoint, split, backend, versions, effective parameters,
    metrics, counts, warnings, wall_s, actor, purpose, host, pid, version. Arguments and errors as
    ``evaluate_checkpoint``."""
    return evaluate_checkpoint(protocol_path, checkpoint, split, options, handed_down(store, "evaluate")).as_dict()


def evaluate_checkpoint(protocol_path: str | Path, checkpoint: str | Path | Checkpoint, split: str,
                        options: RunOptions | None = None, store: Store | None = None) -> RunRecord:
    """Evaluate a checkpoint on a split under a frozen protocol.

    Args:
        protocol_path: protocol YAML (must match its ``.lock``).
        checkpoint: HF directory, GGUF file, or a resolved Checkpoint.
        split: split name.
        options: RunOptions (purpose ``release-gate`` needs the gate's ``ReleaseGrant`` in ``options.grant``).
        store: the Store (``Workspace.store``); without one (deprecated, one release: a ``DeprecationWarning``) the
            store of the process's ``EVALGATE_*`` variables.

    Returns:
        The complete ``RunRecord`` (stored in the ``runs`` table with its samples).

    Raises:
        BadInput: malformed protocol, unknown split, missing checkpoint, bad template (nothing is written).
        ProtocolDrift: the protocol no longer matches its lock.
        RefusedByPolicy: the split's tier policy refuses the read, or purpose ``release-gate`` without a valid
            grant (the refusal is logged).
        EngineError: generation failed (the run is marked failed; stored generations are kept for resume).
    """
    opts = options or RunOptions()
    with progress_bars(opts.progress):  # also the libraries' bars: model loading, GGUF conversion
        plan = prepare(protocol_path, checkpoint, split, opts, handed_down(store, "evaluate_checkpoint"))
        started = start(plan)
        agent = None
        with marking_stops(plan):
            if plan.protocol.tools:  # agentic: a multi-turn loop per sample (evalgate.runner.agent)
                from evalgate.runner.agent.loop import run_agent

                agent = run_agent(plan)
                generated = agent.generated
            else:
                generated = generate_missing(plan)
        return finish(plan, started, generated, agent)


@contextmanager
def marking_stops(plan: RunPlan) -> Iterator[None]:
    """Within the block, a run that stops is marked ``interrupted`` (Ctrl-C, or SIGTERM under the CLI) or ``failed``
    (anything else, with its error) before the exception goes on; its stored generations are kept for the next
    run. Where the store cannot be written either (its server went away), the run stays ``running`` and the
    exception that stopped it goes on: the next run on this machine marks it interrupted (``record.start``)."""
    try:
        yield
    except KeyboardInterrupt as e:
        how = "by SIGTERM (preempted or killed)" if isinstance(e, Terminated) else "by the user (Ctrl-C)"
        _mark(plan, f"stopped {how}; its stored generations are reused by the next identical run", "interrupted")
        raise
    except BaseException as e:
        _mark(plan, f"{type(e).__name__}: {e}", "failed")
        raise


def _mark(plan: RunPlan, error: str, status: str) -> None:
    """``fail_run``, unless the store cannot be reached (the error that stopped the run says why already)."""
    with suppress(EvalgateError):
        plan.store.fail_run(plan.run_id, error, status=status)


def finish(plan: RunPlan, started: RunRecord, generated: Generated, agent: AgentRun | None = None) -> RunRecord:
    """Score the generated samples and store the complete record with the samples (a run that stops on the way is
    marked as ``marking_stops`` says). ``agent``: an agentic run's trajectories, whose tool-use counts join the
    samples' behaviour and the metrics (``evalgate.runner.agent.metrics``).

    Returns:
        The complete ``RunRecord``.
    """
    with marking_stops(plan):
        scored = score(plan, generated)
        if agent is not None:
            from evalgate.runner.agent.metrics import apply_trajectories

            scored = apply_trajectories(plan, scored, agent)
        done = record(plan, started, generated, scored)
        plan.store.finish_run(done.row(), scored.samples)
        if plan.options.purpose == RELEASE_GATE:  # what later gates show again is checked against this row
            plan.access.log_result(plan.manifest, plan.actor, plan.run_id, plan.checkpoint.digest,
                                   plan.protocol.sha256, plan.store.result_sha256(plan.run_id))
    return done
