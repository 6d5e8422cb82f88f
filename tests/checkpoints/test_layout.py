"""One rule for "what is a checkpoint" (``evalgate.checkpoints.layout``), tested on the cases where the three old
answers disagreed: sweep's (a ``config.json`` is enough), watch's (a fixed list of weight file names, plus
``trainer_state.json``) and identity's (``config.json`` plus any ``*.safetensors``/``*.bin``), and the
``checkpoint-N`` pattern, one copy of which also matched ``tmp-checkpoint-N``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.checkpoints.identity import identity_files
from evalgate.checkpoints.layout import checkpoint_step, incomplete, is_checkpoint, is_complete, is_hf_checkpoint
from evalgate.core.errors import BadInput


def _dir(root: Path, name: str, files: dict[str, str]) -> Path:
    d = root / name
    d.mkdir(parents=True)
    for n, text in files.items():
        (d / n).write_text(text)
    return d


STATE = json.dumps({"global_step": 5, "max_steps": 10, "log_history": []})


def test_checkpoint_step_is_the_whole_folder_name():
    assert checkpoint_step("checkpoint-5") == 5
    assert checkpoint_step("checkpoint-0") == 0
    for name in ("tmp-checkpoint-5", "checkpoint-5.bak", "checkpoint-", "checkpoint-x", "my-checkpoint-5"):
        assert checkpoint_step(name) is None, name


def test_config_without_weights_is_not_a_checkpoint_and_sweep_ignores_it_saying_why(tmp_path):
    # sweep used to take it (then resolving it failed the whole sweep); identity refused it
    d = _dir(tmp_path, "checkpoint-5", {"config.json": "{}"})
    assert not is_hf_checkpoint(d) and not is_checkpoint(d)
    assert incomplete(d) == "no weights (*.safetensors, or *.bin other than training_args.bin) yet"
    from evalgate.sweep.discover import discover_checkpoints

    with pytest.raises(BadInput, match="matches no checkpoint"):
        discover_checkpoints(str(tmp_path / "checkpoint-*"))


def test_training_args_bin_is_not_weights(tmp_path):
    # identity's '*.bin' glob took the trainer's pickled arguments for weights
    d = _dir(tmp_path, "checkpoint-5", {"config.json": "{}", "training_args.bin": "x", TRAINER: STATE})
    assert not is_hf_checkpoint(d)
    with pytest.raises(BadInput, match="no weights"):
        identity_files(d)


TRAINER = "trainer_state.json"


def test_shards_without_the_fixed_names_are_weights(tmp_path):
    # watch waited forever on 'no weights file yet' for a model saved as model-00001-of-00001.safetensors
    d = _dir(tmp_path, "checkpoint-5", {"config.json": "{}", "model-00001-of-00001.safetensors": "w", TRAINER: STATE})
    assert is_complete(d) and is_checkpoint(d)


def test_an_index_whose_shards_are_not_all_written_is_incomplete(tmp_path):
    # watch took the index file alone for weights, so a half-saved sharded model was read
    index = {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                            "b": "model-00002-of-00002.safetensors"}}
    d = _dir(tmp_path, "checkpoint-5", {"config.json": "{}", "model.safetensors.index.json": json.dumps(index),
                                        "model-00001-of-00002.safetensors": "w", TRAINER: STATE})
    assert incomplete(d) == "weight shards not written yet: model-00002-of-00002.safetensors"
    (d / "model-00002-of-00002.safetensors").write_text("w")
    assert incomplete(d) is None
    (d / "model.safetensors.index.json").write_text('{"weight_map": ')  # being rewritten
    assert incomplete(d) == "weight shards not written yet: model.safetensors.index.json"


def test_trainer_state_decides_completeness_not_checkpointhood(tmp_path):
    d = _dir(tmp_path, "final", {"config.json": "{}", "model.safetensors": "w"})
    assert is_checkpoint(d)  # a model directory sweep and run evaluate
    assert incomplete(d) == "no trainer_state.json yet"  # but not a checkpoint a trainer finished saving
    (d / TRAINER).write_text('{"global_')
    assert incomplete(d).startswith("trainer_state.json does not parse yet")


def test_gguf_file_is_a_checkpoint(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    assert is_checkpoint(f) and not is_checkpoint(tmp_path / "m.txt")


def test_diagnostics_and_provenance_ignore_a_staging_folder(tmp_path):
    # diagnostics' pattern matched tmp-checkpoint-N (HF's staging folder), so its half-written log won as "newest"
    from evalgate.checkpoints.provenance import infer_training
    from evalgate.diagnostics.log import find_train_log

    hist = [{"step": s, "loss": 1.0 / s} for s in (1, 2, 3, 4)]
    _dir(tmp_path, "checkpoint-4", {TRAINER: json.dumps({"global_step": 4, "log_history": hist})})
    staging = _dir(tmp_path, "tmp-checkpoint-9", {TRAINER: json.dumps({"global_step": 9, "log_history": hist + [
        {"step": 9, "loss": 0.01}]})})
    log = find_train_log(tmp_path)
    assert log is not None and max(log.steps) == 4
    values, src = infer_training(staging)
    assert values["step"] == 9 and src["step"] == "trainer_state.json global_step"  # not the folder name
