"""``EvalgateCallback``: a guard tripping in a real (tiny) HF Trainer run stops training at that step; a watch's STOP
file stops it; saves are announced to a watch; importing it imports no vLLM."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def _args(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(output_dir=str(tmp_path / "out"), seed=1)


def _state(step: int, history: list[dict[str, Any]]) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, log_history=history, is_world_process_zero=True)


def test_import_does_not_import_vllm() -> None:
    code = "import sys, evalgate.callback; print(sorted(m for m in sys.modules if m.split('.')[0] == 'vllm'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_watch_stop_file_stops_training_and_saves_are_queued(tmp_path: Path) -> None:
    from evalgate.callback import STOP_REASON_FILE, EvalgateCallback
    from evalgate.watch import read_queue

    cb, args = EvalgateCallback(), _args(tmp_path)
    hist = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.9}]
    control = SimpleNamespace(should_training_stop=False)
    cb.on_log(args, _state(2, hist), control)
    assert not control.should_training_stop
    cb.on_save(args, _state(2, hist), control)
    out = Path(args.output_dir)
    (out / "STOP").write_text(json.dumps({"reason": "dev pass@1 collapsed at step 2"}))
    cb.on_log(args, _state(3, [*hist, {"step": 3, "loss": 1.8}]), control)
    assert control.should_training_stop
    assert "collapsed at step 2" in (cb.stop_reason or "")
    assert json.loads((out / STOP_REASON_FILE).read_text())["step"] == 3
    cb.on_train_end(args, _state(3, hist), control)
    assert read_queue(out) == ({2}, True)
    assert len((out / "evalgate-log.jsonl").read_text().splitlines()) == 2


class _NanLossAt:
    """A synthetic fault: the loss logged at ``step`` becomes NaN (as a diverged step would log it)."""

    def __init__(self, step: int):
        self.step = step

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if state.global_step == self.step:
            state.log_history[-1]["loss"] = math.nan


@pytest.mark.slow
def test_guard_trip_stops_a_real_trainer_run_at_that_step(tmp_path: Path, smollm2_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

    from evalgate.callback import STOP_REASON_FILE, EvalgateCallback
    from evalgate.demo_train import _collate, _encode, addition_items

    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir), dtype=torch.float32)
    data = [_encode(tok, it) for it in addition_items("train", 16)]
    inject = type("Inject", (_NanLossAt, TrainerCallback), {})(3)
    cb = EvalgateCallback()
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=8, per_device_train_batch_size=2,
                             learning_rate=1e-5, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False, seed=1)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(tok.pad_token_id),
                      processing_class=tok, callbacks=[inject, cb])
    trainer.train()
    assert trainer.state.global_step == 3  # stopped at the step the guard tripped, not at max_steps 8
    assert cb.stop_reason is not None and "nonfinite" in cb.stop_reason and "step 3" in cb.stop_reason
    saved = json.loads((tmp_path / "out" / STOP_REASON_FILE).read_text())
    assert saved["step"] == 3
