"""docs/img/tensorboard.png: an eval curve exported by ``--report-to tensorboard`` beside a training loss, in a
real TensorBoard server, photographed by headless Chromium.

The training curve is a real GRPO run's ``loss`` and ``reward`` (``../shared/data/trainlogs/<run>``'s
``trainer_state.json``, written as the HF Trainer's TensorBoard callback writes them: ``train/<key>`` at the global
step). The eval curve is demo-like: dev pass@1 values at every 10th step, stored as complete runs in a scratch store
and sent through ``evalgate.trackers.export_runs`` (the same path as ``evalgate sweep --report-to tensorboard``),
into the same log directory. Nothing here is a measurement; the picture shows where the curves land.

Usage: python tools/tensorboard_shot.py [--log ../shared/data/trainlogs/chaos-economy-grpo]
       [--out docs/img/tensorboard.png]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def training_events(log: Path, logdir: Path) -> list[int]:
    """Write the log's loss and reward as ``train/...`` scalars; return the logged steps."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    hist = json.loads((log / "trainer_state.json").read_text())["log_history"]
    w = EventFileWriter(str(logdir), filename_suffix=".trainer")
    steps = []
    for h in hist:
        if "step" in h and "loss" in h:
            vals = [summary_pb2.Summary.Value(tag=f"train/{k}", simple_value=float(h[k])) for k in ("loss", "reward")
                    if k in h]
            summary = summary_pb2.Summary(value=vals)
            w.add_event(event_pb2.Event(wall_time=time.time(), step=int(h["step"]), summary=summary))
            steps.append(int(h["step"]))
    w.close()
    return steps


def eval_runs(steps: list[int], tmp: Path) -> None:
    """Complete dev runs at every 10th step in a scratch store, exported with the TensorBoard tracker."""
    os.environ.update(EVALGATE_HOME=str(tmp / "home"), EVALGATE_SPLITS=str(tmp / "splits"), EVALGATE_ACTOR="shot",
                      XDG_CONFIG_HOME=str(tmp / "config"))
    from evalgate.splits import load_manifest, write_split
    from evalgate.store import Store
    from evalgate.trackers import TrackerConfig, export_runs, open_trackers

    write_split("demo-dev", "dev", [{"id": f"q{i}", "question": "1+1", "answer": "2"} for i in range(40)], {})
    store = Store()
    ids = []
    for j, step in enumerate(s for s in steps if s % 10 == 0):
        rid = f"dev-{step}"
        store.create_run({"run_id": rid, "protocol_name": "addition", "protocol_version": "1",
                          "protocol_hash": "ab" * 32, "checkpoint_digest": f"d{step}",
                          "checkpoint_path": f"/runs/grpo/checkpoint-{step}", "train_run": "grpo", "train_seed": 1,
                          "step": step, "split": "demo-dev", "tier": "dev",
                          "split_sha256": load_manifest("demo-dev").content_sha256, "sampling_seed": 0,
                          "backend": "hf", "backend_info": {}, "effective_params": {}, "actor": "shot",
                          "purpose": "evaluation"})
        value = min(0.9, 0.2 + 0.15 * j)
        store.finish_run({"run_id": rid, "metrics": {"pass@1": value}, "counts": {"samples": 40}, "wall_s": 1.0}, [])
        ids.append(rid)
    export_runs(ids, open_trackers(["tensorboard"], TrackerConfig(dir=tmp / "trk")), store=store)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", type=Path, default=Path("../shared/data/trainlogs/chaos-economy-grpo"))
    ap.add_argument("--out", type=Path, default=Path("docs/img/tensorboard.png"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        logdir = tmp / "trk" / "tensorboard" / "grpo" / "seed-1"
        logdir.mkdir(parents=True)
        eval_runs(training_events(args.log, logdir), tmp)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        tb = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp / "trk" / "tensorboard"),
                               "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        try:
            time.sleep(8)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            url = f"http://127.0.0.1:{port}/?darkMode=false#scalars&tagFilter=loss%7Cpass&_smoothingWeight=0"
            subprocess.run(["/usr/bin/chromium", *FLAGS, "--hide-scrollbars", "--window-size=1300,760",
                            "--virtual-time-budget=20000", f"--screenshot={args.out.resolve()}", url],
                           check=True, timeout=120, capture_output=True)
        finally:
            tb.terminate()
            tb.wait(10)
    print(args.out, args.out.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
