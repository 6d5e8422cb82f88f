"""``make demo`` trains with one progress bar per seed, not the HF Trainer's printed log dictionaries (issue 17).
A tiny randomly initialised Llama (no download) trains for 3 steps through the same ``quiet_progress`` the demo
uses; without it the same Trainer prints ``{'loss': ...}`` lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.demo_train import _collate, quiet_progress


def _trainer(out: Path):  # noqa: ANN202 - a transformers.Trainer
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=16))
    data = [{"input_ids": [1, 2 + i, 3, 4], "labels": [-100, 2 + i, 3, 4]} for i in range(6)]
    args = TrainingArguments(output_dir=str(out), max_steps=3, per_device_train_batch_size=2, logging_steps=1,
                             save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0, remove_unused_columns=False)
    return Trainer(model=model, args=args, train_dataset=data, data_collator=_collate(0))


def test_training_shows_a_bar_and_no_log_dictionaries(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    plain = _trainer(tmp_path / "plain")
    plain.train()
    out, err = capfd.readouterr()
    assert "{'loss'" in out + err  # what the demo printed before

    quiet = _trainer(tmp_path / "quiet")
    quiet_progress(quiet, "training seed 1")
    quiet.train()
    out, err = capfd.readouterr()
    assert "{'loss'" not in out + err and "'grad_norm'" not in out + err
    assert "training seed 1" in err and "3/3" in err and "loss=" in err
    assert out == ""  # the bar is on stderr
    assert [e["step"] for e in quiet.state.log_history if "loss" in e] == [1, 2, 3]  # logs still kept
