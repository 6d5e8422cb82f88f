"""Benchmark: ``diagnose`` on a 100,000-step JSONL training log against plain ``json.loads`` of the same lines.

Target (issue 15): reading and diagnosing the log (every signal) takes under 2 s of wall time. The baseline is the
least any reader must do: ``json.loads`` of every line of the same file (read from the OS cache, as ``diagnose``
reads it). Wall and CPU seconds of both are measured in the same process, interleaved repetition by repetition so
background load hits both, and reported as medians with their ratio. The log is synthetic, written by this script:
the 28 keys a TRL GRPO run logs per step (as in ../shared/data/trainlogs), with a slow truncation rise so some
signals fire.

Usage: python bench/diagnose_bench.py [--steps 100000] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's evalgate, not an installed one
from evalgate.diagnostics import diagnose_paths, format_table  # noqa: E402

KEYS = ("clip_ratio/high_max", "clip_ratio/high_mean", "clip_ratio/low_mean", "clip_ratio/low_min",
        "clip_ratio/region_mean", "completions/max_length", "completions/max_terminated_length",
        "completions/mean_terminated_length", "completions/min_length", "completions/min_terminated_length",
        "num_tokens", "rewards/answer_reward/mean", "rewards/answer_reward/std", "rewards/format_reward/mean",
        "rewards/format_reward/std", "learning_rate", "loss", "epoch")


def write_log(path: Path, steps: int) -> None:
    rng = random.Random(0)
    with path.open("w") as fh:
        for s in range(1, steps + 1):
            t = s / steps
            rec = {k: rng.random() for k in KEYS}
            rec.update({"step": s, "reward": rng.gauss(1 + t, 0.5), "reward_std": rng.uniform(0.3, 0.8),
                        "kl": 0.001 + 0.05 * t * rng.random(), "entropy": 1.5 - t * rng.random(),
                        "completions/mean_length": 400 + 100 * t, "completion_length": 400 + 100 * t,
                        "completions/clipped_ratio": min(1.0, t * 0.5 + rng.random() * 0.1),
                        "frac_reward_zero_std": rng.random() * 0.4, "grad_norm": rng.uniform(0.2, 0.4)})
            fh.write(json.dumps(rec) + "\n")


def baseline(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of json.loads over every line."""
    t0, c0 = time.perf_counter(), time.process_time()
    with path.open("rb") as fh:
        rows = [json.loads(line) for line in fh]
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    assert len(rows) > 0
    return dt, dc


def evalgate_diagnose(path: Path) -> tuple[float, float, str]:
    """(wall, CPU) seconds of reading and diagnosing the log and formatting the table, and the table."""
    t0, c0 = time.perf_counter(), time.process_time()
    diags = diagnose_paths([path])
    table = format_table(diags)
    return time.perf_counter() - t0, time.process_time() - c0, table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.jsonl"
        write_log(path, args.steps)
        size = path.stat().st_size
        load_before = os.getloadavg()
        base, diag, base_cpu, diag_cpu = [], [], [], []
        table = ""
        for _ in range(args.reps):
            bt, bc = baseline(path)
            dt, dc, table = evalgate_diagnose(path)
            base.append(bt)
            base_cpu.append(bc)
            diag.append(dt)
            diag_cpu.append(dc)
        load_after = os.getloadavg()
    mb, md = statistics.median(base), statistics.median(diag)
    print(table, file=sys.stderr)
    print(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                      "steps": args.steps, "file_mb": round(size / 1e6, 1), "load_before": load_before,
                      "load_after": load_after, "json_loads_s": [round(x, 3) for x in base],
                      "diagnose_s": [round(x, 3) for x in diag], "json_loads_cpu_s": [round(x, 3) for x in base_cpu],
                      "diagnose_cpu_s": [round(x, 3) for x in diag_cpu], "median_json_loads_s": round(mb, 3),
                      "median_diagnose_s": round(md, 3), "ratio_diagnose_over_json_loads": round(md / mb, 2),
                      "median_diagnose_cpu_s": round(statistics.median(diag_cpu), 3), "target_under_2s": md < 2.0},
                     indent=2))


if __name__ == "__main__":
    main()
