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

from tests.conftest import REPO


def _args(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(output_dir=str(tmp_path / "out"), seed=1)


def _state(step: int, history: list[dict[str, Any]]) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, log_history=history, is_world_process_zero=True)


@pytest.mark.integration
def test_import_does_not_import_vllm() -> None:
    code = "import sys, evalgate.training.callback; print(sorted(m for m in sys.modules if m.split('.')[0] == 'vllm'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_watch_stop_file_stops_training_and_saves_are_queued(tmp_path: Path) -> None:
    from evalgate.training.callback import STOP_REASON_FILE, EvalgateCallback
    from evalgate.watch.files import read_queue

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


@pytest.mark.integration  # a real transformers Trainer (on the tiny random checkpoint: any weights train)
def test_guard_trip_stops_a_real_trainer_run_at_that_step(tmp_path: Path, tiny_checkpoint: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

    from evalgate.demo.train import _collate, _encode, addition_items
    from evalgate.training.callback import STOP_REASON_FILE, EvalgateCallback

    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(str(tiny_checkpoint))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_checkpoint), dtype=torch.float32)
    data = [_encode(tok, it) for it in addition_items("train", 16)]
    inject = type("Inject", (_NanLossAt, TrainerCallback), {})(3)
    cb = EvalgateCallback()
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=8, per_device_train_batch_size=2,
                             learning_rate=1e-5, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False, seed=1)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(tok.pad_token_id),
                      processing_class=tok, callbacks=[inject, cb])
    _leftovers(tmp_path / "out")  # issue 28, item 14: an earlier run's STOP and log in the same output_dir
    trainer.train()
    assert trainer.state.global_step == 3  # stopped at the step the guard tripped, not at max_steps 8 (nor at 1)
    assert cb.stop_reason is not None and "nonfinite" in cb.stop_reason and "step 3" in cb.stop_reason
    saved = json.loads((tmp_path / "out" / STOP_REASON_FILE).read_text())
    assert saved["step"] == 3
    logged = [json.loads(x) for x in (tmp_path / "out" / "evalgate-log.jsonl").read_text().splitlines()]
    # this run's records only (steps 1-3 and the Trainer's end-of-training summary at step 3), not the earlier run's
    assert {r["step"] for r in logged} == {1, 2, 3} and all(r.get("loss") != 9.0 for r in logged)


def _leftovers(out: Path) -> None:
    """What an earlier run left in the same output_dir: a watch's STOP, the callback's stop reason and its log."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "STOP").write_text(json.dumps({"reason": "truncation of the earlier run"}))
    (out / "evalgate-stop.json").write_text(json.dumps({"reason": "old", "step": 7}))
    (out / "evalgate-log.jsonl").write_text("".join(json.dumps({"step": s, "loss": 9.0}) + "\n" for s in (1, 2, 3)))
    (out / "evalgate-queue.jsonl").write_text(json.dumps({"event": "train_end", "step": 3}) + "\n")


def test_leftovers_of_an_earlier_run_are_moved_aside(tmp_path: Path) -> None:
    """Issue 28, item 14: a STOP file and evalgate-log.jsonl from an earlier run in the same output_dir stopped a
    fixed rerun at step 1 with the old reason, and the two runs' logs were merged."""
    from evalgate.training.callback import EvalgateCallback
    from evalgate.watch.files import read_queue

    cb, args = EvalgateCallback(), _args(tmp_path)
    out = Path(args.output_dir)
    _leftovers(out)
    control = SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, _state(0, []), control)
    hist = [{"step": 1, "loss": 2.0}]
    cb.on_log(args, _state(1, hist), control)
    assert not control.should_training_stop and cb.stop_reason is None
    assert [json.loads(x)["step"] for x in (out / "evalgate-log.jsonl").read_text().splitlines()] == [1]
    assert read_queue(out) == (set(), False)  # the earlier run's train_end no longer ends a watch
    moved = sorted(p.name.split(".previous-")[0] for p in out.glob("*.previous-*"))
    assert moved == ["STOP", "evalgate-log.jsonl", "evalgate-queue.jsonl", "evalgate-stop.json"]
    # neighbour: a resumed run (global step 5 at train begin) keeps its log, drops the stale STOP and train_end
    cb2, out2 = EvalgateCallback(), tmp_path / "resumed"
    _leftovers(out2)
    cb2.on_train_begin(SimpleNamespace(output_dir=str(out2), seed=1), _state(5, []), control)
    assert not (out2 / "STOP").exists() and len((out2 / "evalgate-log.jsonl").read_text().splitlines()) == 3
    assert read_queue(out2) == (set(), False)


def test_stop_names_the_step_it_stopped_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28, item 14: truncation 50 % from step 1 trips when the window of 5 is full, at step 5; the callback
    said "stopping training at step 1". A live run is not stopped on the short windows before (steps 1-4)."""
    from evalgate.training.callback import STOP_REASON_FILE, EvalgateCallback

    cb, args = EvalgateCallback(), _args(tmp_path)
    control = SimpleNamespace(should_training_stop=False)
    hist: list[dict[str, Any]] = []
    for step in range(1, 6):
        hist.append({"step": step, "completions/clipped_ratio": 0.5, "loss": 0.1})
        cb.on_log(args, _state(step, list(hist)), control)
        assert control.should_training_stop == (step == 5), step
    err = capsys.readouterr().err
    assert "stopping training at step 5" in err and "since step 1" in err
    saved = json.loads((Path(args.output_dir) / STOP_REASON_FILE).read_text())
    assert (saved["step"], saved["first_step"]) == (5, 1)
