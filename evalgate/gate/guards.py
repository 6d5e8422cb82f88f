"""The gate's training-log guards, in one place: which log belongs to a seed, which guards it trips (a trip fails
every checkpoint at or after its step), and the reward-hacking triad over the seed's dev curve. The signals
themselves live in ``evalgate.trainlogs``."""

from __future__ import annotations

from pathlib import Path

from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import SeedResult, TrainLogInfo
from evalgate.gate.select import finite
from evalgate.trainlogs import Diagnostic, TrainLog, find_train_log, guard_diagnostics, read_path, reward_hacking


def train_logs(policy: GatePolicy, seeds: list[SeedResult]) -> dict[int | None, TrainLog | None]:
    """Training seed -> its log: the policy's ``training_logs`` entry, else the first log found next to the seed's
    checkpoints (latest step first); None when there is none."""
    out: dict[int | None, TrainLog | None] = {}
    for s in seeds:
        seed = s.train_seed
        if seed is not None and seed in policy.training_logs:
            out[seed] = read_path(policy.training_logs[seed])
            continue
        log = None
        for c in sorted(s.checkpoints, key=lambda c: c.step or 0, reverse=True):
            p = Path(c.path)
            if p.is_dir():
                log = find_train_log(p.parent)
                if log:
                    break
        out[seed] = log
    return out


def guard_trips(policy: GatePolicy, log: TrainLog | None) -> list[Diagnostic]:
    """The policy's guards over one log (``evalgate.trainlogs.guard_diagnostics``), by step; [] without a log."""
    if log is None:
        return []
    g = policy.guards
    trips = guard_diagnostics(log, g.kl_target, g.clip_fraction_max, g.clip_window, g.entropy_floor,
                              g.grad_norm_spike, g.grad_norm_window)
    return [d for d in trips if g.nan or d.kind != "nan"]


def attach_diagnostics(seed: SeedResult, log: TrainLog | None, trips: list[Diagnostic]) -> None:
    """Set the seed's diagnostics (its guard trips, then the reward-hacking triad over its dev curve) and the log
    it came from."""
    dev = [{"step": c.step, "value": c.value, **c.metrics} for c in seed.checkpoints
           if finite(c.value) and c.step is not None]
    triad = reward_hacking(log, dev)
    seed.diagnostics = [*trips, *([triad] if triad else [])]
    seed.train_log = TrainLogInfo(log.source, log.format, sorted(log.series)) if log else None
    seed.train_series = log.series if log else {}
