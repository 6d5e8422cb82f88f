"""Best, last and failed checkpoints per training seed, from the selection split's runs (no split is read here).

A seed is a (training run, training seed) pair: seed 1 of one run and seed 1 of another are two seeds. Per seed:
**last** = highest step; **failed** = a run error, a NaN/inf metric, non-finite weights, a training-log guard trip
at or before the checkpoint's step, or a collapse (the metric dropped more than ``collapse_drop`` from the previous
checkpoint); **best** = the highest metric among the rest (ties: the earlier step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.core.errors import RefusedByPolicy
from evalgate.core.results import Metrics
from evalgate.diagnostics.signals import Finding
from evalgate.gate.results import CheckpointResult, SeedResult, SetAside
from evalgate.store import RunRow

BEHAVIOUR_METRICS = ("mean_completion_tokens", "truncation_rate", "mean_repetition")
# errors that say nothing about the checkpoint: a missing engine or library, a bad flag or option, a refused read,
# a drifted protocol, Ctrl-C, memory of the machine
OUTSIDE_CHECKPOINT = frozenset({"MissingExtra", "BadInput", "RefusedByPolicy", "ProtocolDrift", "KeyboardInterrupt",
                                "ImportError", "ModuleNotFoundError", "OutOfMemoryError", "MemoryError"})


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


def _checkpoint(run: RunRow, metric: str) -> CheckpointResult:
    m: Mapping[str, Any] = run.metrics or {}
    return CheckpointResult(digest=run.checkpoint_digest, path=run.checkpoint_path, step=run.step,
                            train_run=run.train_run, run_id=run.run_id, status=run.status,
                            value=m.get(metric), stderr=m.get(f"{metric}_stderr"),
                            metrics=Metrics({k: m.get(k) for k in BEHAVIOUR_METRICS}), error=run.error,
                            provenance=run.checkpoint_provenance)


def _mark_failed(cks: list[CheckpointResult], metric: str, collapse_drop: float | None,
                 trips: list[Finding], bad_weights: set[str]) -> None:
    """Fill each checkpoint's ``failed_reasons`` (checkpoints in step order)."""
    prev_ok: float | None = None
    for c in cks:
        why = c.failed_reasons
        if c.status == "failed":
            why.append(f"run error ({c.error})" if c.error else "run error")
        elif not finite(c.value):
            why.append(f"{metric} is {c.value!r} (NaN, inf or missing)")
        elif any(v is not None and not finite(v) for v in c.metrics.values()):
            why.append("NaN/inf in behaviour metrics")
        if c.digest in bad_weights:
            why.append("NaN/inf in weights")
        for d in trips:
            if c.step is not None and d.step is not None and c.step >= d.step:
                why.append(f"guard {d.signal} tripped at step {d.step}")
        if c.value is not None and finite(c.value):
            if collapse_drop is not None and prev_ok is not None and prev_ok - c.value > collapse_drop:
                why.append(f"collapse: {metric} fell {prev_ok - c.value:.4f} from the previous checkpoint "
                           f"({prev_ok:.4f} -> {c.value:.4f}), more than {collapse_drop}")
            prev_ok = c.value


SeedKey = tuple[str | None, int | None]
"""A training seed's key: (training run, training seed); one run's seed 1 is not another run's."""


def seed_key(run: RunRow) -> SeedKey:
    """The (train_run, train_seed) key of a store row."""
    return run.train_run, run.train_seed


def select_checkpoints(runs: list[RunRow], metric: str, collapse_drop: float | None,
                       guard_steps: dict[SeedKey, list[Finding]] | None = None,
                       bad_weights: set[str] | None = None) -> list[SeedResult]:
    """Best, last and failed checkpoints per training seed.

    Args:
        runs: complete or failed runs of the selection split (store rows), oldest first (the latest per checkpoint
            counts).
        metric: the selection metric.
        collapse_drop: absolute drop from the previous checkpoint (by step) that marks a collapse; None: off.
        guard_steps: (training run, training seed) -> guard trips (``diagnostics.guards.SeedGuards.trips``); a
            checkpoint at or after a trip's step is failed.
        bad_weights: checkpoint digests with non-finite weights.

    Returns:
        One ``SeedResult`` per (training run, training seed), by run then seed; its checkpoints by step; best is
        None when every checkpoint failed. Two runs' checkpoints are never one seed's curve.
    """
    latest: dict[str, RunRow] = {}
    for r in runs:
        latest[r.checkpoint_digest] = r
    by_seed: dict[SeedKey, list[CheckpointResult]] = {}
    for r in latest.values():
        by_seed.setdefault(seed_key(r), []).append(_checkpoint(r, metric))
    out = []
    for key in sorted(by_seed, key=lambda k: (k[0] is None, k[0] or "", k[1] is None, k[1] or 0)):
        cks = sorted(by_seed[key], key=lambda c: (c.step is None, c.step or 0))
        _mark_failed(cks, metric, collapse_drop, (guard_steps or {}).get(key, []), bad_weights or set())
        ok = [c for c in cks if not c.failed_reasons]
        best = max(ok, key=lambda c: (c.value or 0.0, -(c.step or 0))) if ok else None
        out.append(SeedResult(train_seed=key[1], train_run=key[0], checkpoints=cks, best=best,
                              last=cks[-1] if cks else None))
    return out


def check_one_training_run(usable: list[RunRow], train_run: str | None) -> None:
    """Refuse candidates that span several training runs when the policy names none (before any read).

    Seed 1 of one run and seed 1 of another are different models; gating them together would put one run's best
    checkpoint against the other's seeds in ``min_seeds`` and the statistics, and one release decision would
    cover two candidates. The policy's ``train_run`` (or ``evalgate gate --train-run``) names the run to gate.

    Args:
        usable: ``RunPartition.usable``, the candidate runs.
        train_run: the policy's ``train_run`` (None: not set).

    Raises:
        RefusedByPolicy: the candidates come from two or more training runs and ``train_run`` is None; the message
            names each run with its seeds.
    """
    if train_run is not None:
        return
    seeds: dict[str, set[Any]] = {}
    for r in usable:
        seeds.setdefault(str(r.train_run), set()).add(r.train_seed)
    if len(seeds) > 1:
        runs = ", ".join(f"{name} (seed{'s' if len(s) > 1 else ''} {', '.join(map(str, sorted(s)))})"
                         for name, s in sorted(seeds.items()))
        raise RefusedByPolicy(f"the candidate checkpoints come from {len(seeds)} training runs: {runs}; a gate "
                              "decides on one run's seeds: set train_run: in the policy (or pass 'evalgate gate "
                              "--train-run NAME') to the run to gate; nothing was read")


def outside_checkpoint(run: RunRow) -> bool:
    """True when a run that did not complete failed for a reason outside its checkpoint: interrupted (Ctrl-C, a
    killed process), or an error of a kind in ``OUTSIDE_CHECKPOINT`` (the stored error starts ``"<Class>: "``), or
    out of memory."""
    if run.status == "interrupted":
        return True
    error = run.error or ""
    return error.split(":", 1)[0].strip() in OUTSIDE_CHECKPOINT or "out of memory" in error.lower()


def _set_aside(run: RunRow, reason: str) -> SetAside:
    return SetAside(run.run_id, run.checkpoint_digest, run.checkpoint_path, run.train_run,
                    run.train_seed, run.step, run.status, reason)


@dataclass
class RunPartition:
    """The selection split's runs sorted for the gate.

    Attributes:
        usable: per candidate checkpoint its latest complete run on the current content, or, when it has none, its
            latest failed run whose error may concern the checkpoint (it marks the checkpoint failed); oldest first.
        stale, ignored, failures: see ``Verdict``.
    """

    usable: list[RunRow] = field(default_factory=list)
    stale: list[SetAside] = field(default_factory=list)
    ignored: list[SetAside] = field(default_factory=list)
    failures: list[SetAside] = field(default_factory=list)


def _not_candidate(run: RunRow, backend: str) -> str | None:
    if run.train_run is None or run.train_seed is None:
        missing = " and ".join(k.replace("_", " ") for k in ("train_run", "train_seed") if getattr(run, k) is None)
        return (f"no {missing} recorded: only checkpoints of a training run and seed are candidates (pass "
                "--train-run/--train-seed to 'evalgate run', or use the checkpoint as the policy's baseline)")
    if run.backend != backend:
        return f"backend {run.backend}, the policy compares {backend} runs (outputs differ by engine)"
    return None


def partition_runs(runs: list[RunRow], split_sha256: str, backend: str,
                   exclude_digest: str | None = None) -> RunPartition:
    """Sort the selection split's runs into the ones selection uses and the ones it sets aside.

    A checkpoint is a candidate only with a training run and seed and under the policy's backend; only runs on the
    split's current content count; a failed or interrupted run never hides a complete run of its checkpoint, and
    marks the checkpoint failed only when the checkpoint has no complete run and the error may concern it (not
    ``outside_checkpoint``).

    Args:
        runs: the selection split's runs of the protocol (store rows), oldest first.
        split_sha256: the selection split's current content sha256.
        backend: the policy's backend.
        exclude_digest: the baseline checkpoint's digest: no candidate; its complete runs that carry a training
            run and seed (a checkpoint of the run that is the baseline itself) are listed under ``ignored`` with
            that reason, its plain baseline runs nowhere.
    """
    out = RunPartition()
    as_base = [r for r in runs if r.checkpoint_digest == exclude_digest and r.status == "complete"
               and r.train_run is not None and r.train_seed is not None]
    for r in as_base[-1:]:  # its latest run, as for the other ignored checkpoints
        out.ignored.append(_set_aside(r, "this checkpoint is the policy's baseline (same weight digest "
                                             f"{str(exclude_digest)[:12]}): candidates are compared with it, so it is "
                                             "no candidate; set another baseline to gate it"))
    runs = [r for r in runs if r.checkpoint_digest != exclude_digest and r.status != "running"]
    complete: dict[str, RunRow] = {}
    latest_ignored: dict[str, tuple[RunRow, str]] = {}
    latest_stale: dict[str, RunRow] = {}
    for r in runs:
        if r.status != "complete":
            continue  # listed under failures
        why = _not_candidate(r, backend)
        if why is not None:
            latest_ignored[r.checkpoint_digest] = (r, why)
        elif r.split_sha256 != split_sha256:
            latest_stale[r.checkpoint_digest] = r
        else:
            complete[r.checkpoint_digest] = r
    blaming: dict[str, RunRow] = {}
    for r in runs:
        if r.status == "complete":
            continue
        d = r.checkpoint_digest
        error = f"{r.status}: {r.error or 'no error recorded'}"
        if d in complete:
            why = "a complete run of this checkpoint is used"
        elif _not_candidate(r, backend) or r.split_sha256 != split_sha256:
            why = "not a candidate run (see ignored and stale)"
        elif outside_checkpoint(r):
            why = "failed outside the checkpoint: not counted against it; evaluate it again to make it a candidate"
        else:
            why = "the checkpoint has no complete run: marked failed"
            blaming[d] = r
        out.failures.append(_set_aside(r, f"{error}; {why}"))
    out.ignored += [_set_aside(r, why) for r, why in latest_ignored.values()]
    for d, r in latest_stale.items():
        fate = ("a run on the current content is used" if d in complete else
                "the checkpoint has no run on the current content: missing; re-evaluate it with 'evalgate run'")
        out.stale.append(_set_aside(r, f"run on split content sha256 {r.split_sha256[:12]}, current is "
                                       f"{split_sha256[:12]}; {fate}"))
    keep = {id(r) for r in [*complete.values(), *blaming.values()]}
    out.usable = [r for r in runs if id(r) in keep]
    return out
