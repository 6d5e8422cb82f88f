"""Training run, seed and step inferred from common checkpoint layouts, with where each came from (issue 13 point 9:
a checkpoint under '.../seed-1/checkpoint-9' got its train_run from the folder but no train_seed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.checkpoints.provenance import infer_training
from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.store import Store


def _dir(root: Path, rel: str) -> Path:
    d = root / rel
    d.mkdir(parents=True)
    return d


@pytest.mark.parametrize("rel, run, seed, step", [
    ("grpo-math/seed-1/checkpoint-9", "grpo-math", 1, 9),
    ("grpo-math/seed_12/checkpoint-300", "grpo-math", 12, 300),
    ("sweep/run_seed3/checkpoint-5", "sweep", 3, 5),
    ("sweep/checkpoint-5", "sweep", None, 5),
])
def test_layouts(tmp_path: Path, rel: str, run: str | None, seed: int | None, step: int | None) -> None:
    values, src = infer_training(_dir(tmp_path, rel))
    assert values == {"train_run": run, "train_seed": seed, "step": step}
    if seed is None:
        assert src["train_seed"].startswith("not inferred:") and "--train-seed" in src["train_seed"]
    else:
        assert src["train_seed"] == f"folder name {Path(rel).parent.name!r}"


@pytest.mark.integration
def test_seed_from_trainer_saved_arguments(tmp_path: Path) -> None:
    """The HF Trainer (and TRL's trainers: their configs subclass TrainingArguments) saves training_args.bin."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    d = _dir(tmp_path, "out/checkpoint-40")
    torch.save(transformers.TrainingArguments(output_dir=str(tmp_path / "out"), seed=1234, report_to=[]),
               d / "training_args.bin")
    values, src = infer_training(d)
    assert values["train_seed"] == 1234 and src["train_seed"] == "training_args.bin (seed)"
    # A seed folder is the label runs are told apart by; a different saved seed is noted, not silently dropped.
    s = _dir(tmp_path, "exp/seed-2/checkpoint-40")
    (s / "training_args.bin").write_bytes((d / "training_args.bin").read_bytes())
    values, src = infer_training(s)
    assert values["train_seed"] == 2 and "training_args.bin says seed 1234" in src["train_seed"]


def test_step_from_trainer_state_and_nothing_inferred_is_said(tmp_path: Path) -> None:
    d = _dir(tmp_path, "final-model")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 77, "log_history": []}))
    values, src = infer_training(d)
    assert values == {"train_run": None, "train_seed": None, "step": 77}
    assert src["step"] == "trainer_state.json global_step"
    assert src["train_run"].startswith("not inferred:") and src["train_seed"].startswith("not inferred:")


def test_a_corrupt_arguments_file_is_not_a_seed(tmp_path: Path) -> None:
    d = _dir(tmp_path, "x/checkpoint-1")
    (d / "training_args.bin").write_bytes(b"not a zip")
    assert infer_training(d)[0]["train_seed"] is None


def test_resolve_records_where_each_value_came_from(tmp_path: Path, tiny_checkpoint: Path) -> None:
    d = _dir(tmp_path, "grpo/seed-1/checkpoint-9")
    for f in tiny_checkpoint.iterdir():
        if f.is_file():
            (d / f.name).symlink_to(f)
    ck = resolve_checkpoint(d, train_run="named-by-hand")
    assert (ck.train_run, ck.train_seed, ck.step) == ("named-by-hand", 1, 9)
    assert ck.provenance == {"train_run": "flag", "train_seed": "folder name 'seed-1'",
                             "step": "folder name 'checkpoint-9'"}


def test_provenance_is_stored_with_the_run(tmp_path: Path) -> None:
    from evalgate.runner.record import CheckpointRef, ProtocolRef, RunRecord, SplitRef
    from evalgate.store import Database, Store
    from evalgate.store.migrations import MIGRATIONS

    prov = {"train_run": "flag", "train_seed": "folder name 'seed-1'", "step": "folder name 'checkpoint-9'"}
    rec = RunRecord(run_id="r2", status="running", protocol=ProtocolRef(name="p", version="1", sha256="h"),
                    checkpoint=CheckpointRef(path="/ck", digest="ck", train_run="grpo", train_seed=1, step=9,
                                             provenance=prov),
                    split=SplitRef(name="s", tier="dev", sha256="x"), backend={"name": "hf"}, versions={},
                    effective_params={"seed": 0})
    path = tmp_path / "s.duckdb"
    old_schema = [x for x in MIGRATIONS if x[0] < 16]  # a store as it was before migration 16, with a run in it
    old = Store(Database(path, old_schema))
    later = ("checkpoint_provenance", "record_version")  # the columns of migrations 16 and 31
    old.create_run({k: v for k, v in {**rec.row(), "run_id": "r1"}.items() if k not in later})
    store = Store(path)
    store.create_run(rec.row())
    r1, r2 = store.runs()
    assert r1.checkpoint_provenance is None and RunRecord.from_row(r1).checkpoint.provenance is None
    assert r2.checkpoint_provenance == prov and RunRecord.from_row(r2) == rec


def test_a_step_folder_and_trainer_state_that_disagree_are_said_and_the_folder_wins(tmp_path: Path) -> None:
    """Issue 28 item 17: 'checkpoint-800' holding a trainer_state.json of global_step 750 (a renamed or copied
    folder) was resolved to 800 without a word. The folder name still wins (as for the seed), and it is said."""
    from evalgate.checkpoints.provenance import disagreements

    d = _dir(tmp_path, "grpo/seed-1/checkpoint-800")
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 750, "log_history": []}))
    values, src = infer_training(d)
    assert values["step"] == 800
    assert src["step"] == ("folder name 'checkpoint-800' (trainer_state.json global_step says 750; the folder name "
                           "wins)")
    (warning,) = disagreements(src)
    assert "step from folder name 'checkpoint-800'" in warning and "750" in warning and "--step" in warning
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 800, "log_history": []}))  # agreeing: nothing
    assert disagreements(infer_training(d)[1]) == []


def test_the_run_warns_and_records_the_disagreement(tmp_path: Path, tiny_checkpoint: Path) -> None:
    import yaml

    from evalgate.protocol.freeze import freeze
    from evalgate.runner.evaluate import RunOptions
    from evalgate.runner.plan import prepare
    from evalgate.splits import write_split

    d = _dir(tmp_path, "grpo/seed-1/checkpoint-800")
    for f in tiny_checkpoint.iterdir():
        if f.is_file():
            (d / f.name).symlink_to(f)
    (d / "trainer_state.json").write_text(json.dumps({"global_step": 750, "log_history": []}))
    write_split("t-smoke", "smoke", [{"id": "a", "question": "2+2?", "answer": "4"}], {"source": "test"})
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "version": "1", "scorer": {"name": "exact"},
                                 "prompt": {"template": "Q: {{ question }}", "chat_template": "none"}}))
    freeze(p, Store)
    plan = prepare(p, d, "t-smoke", RunOptions(progress=False), store=Store())
    assert plan.checkpoint.step == 800
    assert any("trainer_state.json global_step says 750" in w for w in plan.warnings)
