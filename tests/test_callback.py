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


def _tiny_trainer(tok_dir: Path, out: Path, callbacks: list[Any]):  # noqa: ANN202 - a transformers.Trainer
    """A real HF ``Trainer`` on a one-layer Llama with SmolLM2's tokenizer (random weights: trains and evaluates in
    seconds), 4 steps, a checkpoint every 2, reporting to TensorBoard (into ``$TENSORBOARD_LOGGING_DIR``)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    from evalgate.demo.train import _collate, _encode, addition_items

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    cfg = json.loads((tok_dir / "config.json").read_text())
    model = LlamaForCausalLM(LlamaConfig(vocab_size=cfg["vocab_size"], hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         bos_token_id=cfg.get("bos_token_id"), eos_token_id=cfg.get("eos_token_id"),
                                         tie_word_embeddings=True))
    data = [_encode(tok, it) for it in addition_items("train", 8)]
    args = TrainingArguments(output_dir=str(out), max_steps=4, save_steps=2, save_strategy="steps",
                             save_only_model=True, per_device_train_batch_size=2, logging_steps=1,
                             report_to=["tensorboard"], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False, seed=1)
    return Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(tok.pad_token_id),
                   processing_class=tok, callbacks=callbacks)


def _dev_split_and_protocol(home: Path) -> Path:
    """A 3-item addition dev split and protocols/addition.yaml (max_tokens 4) frozen in the test's store."""
    import yaml

    from evalgate.demo.train import addition_items
    from evalgate.protocol.freeze import freeze
    from evalgate.splits import write_split
    from evalgate.store import Store

    write_split("add-dev", "dev", addition_items("dev", 3), {"source": "test"})
    doc = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    doc["sampling"]["max_tokens"] = 4
    proto = home / "addition.yaml"
    proto.write_text(yaml.safe_dump(doc))
    freeze(proto, Store())
    return proto


def test_evaluations_reach_log_history_and_tensorboard(home: Path, smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 44, item 6: with ``evaluate=True`` on a real Trainer, each checkpoint's evaluation was stored in
    evalgate but nothing was printed and nothing entered ``state.log_history``, so the trainer's ``report_to``
    trackers had no ``eval/...`` curve. Read back here from TensorBoard's own event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from evalgate.store import Store
    from evalgate.training.callback import EvalgateCallback

    proto = _dev_split_and_protocol(home)
    out = home / "run"
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(out / "tb"))  # transformers' TensorBoardCallback reads it
    trainer = _tiny_trainer(smollm2_dir, out, [])
    cb = EvalgateCallback(protocol=proto, split="add-dev", evaluate=True, trainer=trainer)
    trainer.add_callback(cb)
    trainer.train()

    runs = {r.step: r for r in Store().runs()}  # what evalgate stored, read back from the store
    assert sorted(runs) == [2, 4]
    logged = [e for e in trainer.state.log_history if "eval_addition/pass@1" in e]
    assert [e["step"] for e in logged] == [2, 4]  # keyed by the trainer's step, once per checkpoint
    for e in logged:
        m = runs[e["step"]].metrics
        assert e["eval_addition/pass@1"] == m["pass@1"] and e["eval_addition/pass@1_stderr"] == m["pass@1_stderr"]
        assert e["eval_addition/truncation_rate"] == m["truncation_rate"]
        assert 0.0 <= e["eval_addition/pass@1"] <= 1.0
    # the step-2 evaluation is in the trainer_state.json the Trainer saved with checkpoint-4
    saved = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())["log_history"]
    assert [e["step"] for e in saved if "eval_addition/pass@1" in e] == [2]

    (events,) = (out / "tb").glob("events.out.tfevents.*")
    acc = EventAccumulator(str(events))
    acc.Reload()
    assert "train/loss" in acc.Tags()["scalars"]  # the same run the trainer's own curves are in
    for tag, key in (("eval/addition/pass@1", "pass@1"), ("eval/addition/mean_completion_tokens",
                                                         "mean_completion_tokens")):
        points = [(ev.step, ev.value) for ev in acc.Scalars(tag)]
        assert [s for s, _ in points] == [2, 4], tag
        for step, value in points:
            assert value == pytest.approx(runs[step].metrics[key], abs=1e-6), (tag, step)
        assert all(0 < v <= 4 for s, v in points) if key == "mean_completion_tokens" else True

    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("evalgate: checkpoint-")]
    assert len(lines) == 2, err[-2000:]
    for line, step in zip(lines, (2, 4), strict=True):
        assert line.startswith(f"evalgate: checkpoint-{step} (step {step}): addition@1 on add-dev: pass@1 ")
        assert f"(run {runs[step].run_id})" in line


def test_without_the_trainer_evaluations_still_enter_log_history(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``trainer=`` the callback cannot reach the trackers, but the record still goes into
    ``state.log_history`` at the step (so into trainer_state.json), as ``Trainer.log`` writes it."""
    from evalgate.runner import evaluate as run_mod
    from evalgate.training.callback import EvalgateCallback

    doc = {"run_id": "r1", "protocol": {"name": "p", "version": "1"}, "split": {"name": "d"},
           "metrics": {"pass@1": 0.25, "pass@1_stderr": 0.1, "judge": {"calls": 3}, "nan": math.nan, "flag": True}}
    monkeypatch.setattr(run_mod, "evaluate", lambda *a, **k: doc)  # glue: the real evaluation is tested above
    cb, args = EvalgateCallback(protocol="p.yaml", split="d", evaluate=True), _args(tmp_path)
    state = _state(6, [{"step": 6, "loss": 1.0}])
    cb.on_save(args, state, SimpleNamespace(should_training_stop=False))
    assert state.log_history[-1] == {"eval_p/pass@1": 0.25, "eval_p/pass@1_stderr": 0.1, "step": 6}
