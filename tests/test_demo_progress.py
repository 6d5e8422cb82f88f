"""``make demo`` says what each stage does and shows its progress: it trains with one progress bar per seed, not
the HF Trainer's printed log dictionaries (issue 17; a tiny randomly initialised Llama, no download, trains for 3
steps through the same ``quiet_progress`` the demo uses; without it the same Trainer prints ``{'loss': ...}``
lines), and each stage is announced before it starts with its evaluations' bars on (issue 32); the verdict comes
before the slow stages, which only ``make demo-full`` runs (issue 44)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from evalgate import gate as gate_mod
from evalgate.checkpoints import identity
from evalgate.demo import rlhf as demo_rlhf
from evalgate.demo import train as demo_train
from evalgate.demo.train import _collate, quiet_progress
from evalgate.runner import evaluate as run_mod
from evalgate.runner.evaluate import RunOptions
from tests.conftest import REPO


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


@pytest.mark.integration
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


def test_each_demo_stage_says_what_it_does_before_it_starts_and_the_verdict_comes_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # `make demo` printed nothing for over five minutes (issue 32), then spent its first 19 minutes on HumanEval smoke
    # before training and gating (issue 44): now `make demo` trains, evaluates on dev and gates (the verdict), and
    # `make demo-full` adds the RLHF leg before the gate and HumanEval smoke after the verdict. The stages' work
    # (model, training, evaluations, gate) is stood in for here, recording the order of events; the real runs are
    # tested in their own modules.
    import shutil

    from evalgate.checkpoints import resolve
    from evalgate.datasets import humaneval
    from evalgate.demo import main as demo
    from evalgate.gate.report import suite as suite_report
    from evalgate.workspace import Workspace

    shutil.copytree(REPO / "protocols", tmp_path / "protocols")
    shutil.copytree(REPO / "gates", tmp_path / "gates")
    monkeypatch.chdir(tmp_path)  # the demo's stores and reports are relative to the working directory
    events: list[tuple[str, object]] = []
    monkeypatch.setattr(demo, "stage", lambda line: events.append(("stage", line)))
    monkeypatch.setattr(demo, "smollm2_gguf", lambda: tmp_path / "base.gguf")
    train = tmp_path / "train"
    for seed in (1, 2):
        for step in (3, 6):
            (train / f"seed-{seed}" / f"checkpoint-{step}").mkdir(parents=True)
    monkeypatch.setattr(resolve, "resolve_checkpoint", lambda p, **k: SimpleNamespace(model_dir=tmp_path))
    monkeypatch.setattr(demo_train, "ensure_training", lambda *a: events.append(("train", None)) or train)
    monkeypatch.setattr(identity, "file_sha256", lambda p: "0" * 64)

    def dev_evaluate(protocol: object, ck: Path, split: str, opts: RunOptions, store: object) -> dict:
        events.append(("evaluate", (Path(ck).name, split, opts.progress)))
        return {"metrics": {"pass@1": 0.5, "pass@1_stderr": 0.1}}

    def prepare(home: Path, addition: Path, gguf: Path, store: object, dev_items: int) -> Path:
        events.append(("rlhf", (addition, gguf.name, dev_items)))
        return tmp_path / "proxies"

    load_policy = gate_mod.load_policy

    def gate(policy: object, store: object, actor: object, progress: bool = False) -> SimpleNamespace:
        events.append(("gate", ([p.protocol for p in policy.proxy_protocols], progress)))  # type: ignore[attr-defined]
        return SimpleNamespace(as_dict=lambda: {"proxies": ["PROXIES"]})

    def suite(path: Path, store: object, outputs: dict, actor: object, progress: bool = False,
              variables: dict | None = None) -> SimpleNamespace:
        events.append(("suite", (path, progress, variables)))
        return SimpleNamespace(verdict="VERDICT", as_dict=dict)

    def policy(path: Path, variables: dict[str, str]) -> object:
        events.append(("policy", variables))
        return load_policy(path, variables)

    def he_evaluate(self: Workspace, *a: object, **k: object) -> SimpleNamespace:
        events.append(("humaneval", (a[2], k.get("progress"))))
        return SimpleNamespace(as_dict=lambda: {"counts": {"samples": 32, "cached": 0},
                                                "metrics": {"pass@1": 0.0, "pass@1_stderr": 0.0}})

    monkeypatch.setattr(run_mod, "evaluate", dev_evaluate)
    monkeypatch.setattr(demo_rlhf, "prepare", prepare)
    monkeypatch.setattr(gate_mod, "load_policy", policy)
    monkeypatch.setattr(gate_mod, "run_gate", gate)
    monkeypatch.setattr(suite_report, "suite_and_report", suite)
    monkeypatch.setattr(demo, "find_data", lambda given: tmp_path / "data")
    monkeypatch.setattr(demo, "guard_split", lambda data, **kw: events.append(("guard", data)))
    monkeypatch.setattr(demo, "_print_verdict", lambda verdict, doc, proxies: events.append(("verdict", (verdict,
                                                                                                         proxies))))
    monkeypatch.setattr(humaneval, "import_humaneval", lambda *a, **k: events.append(("import", None)))
    monkeypatch.setattr(Workspace, "freeze", lambda self, p: events.append(("freeze", p)))
    monkeypatch.setattr(Workspace, "evaluate", he_evaluate)

    assert demo.main([]) == 0
    kinds = [k for k, _ in events]
    stages = [str(v) for k, v in events if k == "stage"]
    assert [s[:10] for s in stages] == ["demo [1/3]", "demo [2/3]", "demo [3/3]"]
    assert stages[0].startswith("demo [1/3] training: SmolLM2-135M-Instruct")
    assert kinds.index("stage") < kinds.index("train")  # announced before the work
    assert "the base model and 4 checkpoints on addition-dev (40 items each)" in stages[1]
    i2, i3 = (i for i, (k, v) in enumerate(events) if k == "stage" and str(v)[:10] in ("demo [2/3]", "demo [3/3]"))
    evals = [v for k, v in events[i2:i3] if k == "evaluate"]
    assert evals == [("base.gguf", "addition-dev", True)] + [
        (f"checkpoint-{s}", "addition-dev", True) for _ in (1, 2) for s in (3, 6)]
    assert ("guard", tmp_path / "data") in events[i2:i3]  # the guard's split from the data found before training
    assert "gates/demo-suite.yaml (a suite: addition the target, XSTest's safe prompts the guard)" in stages[2]
    assert "on xstest-safe-demo (20 items each" in stages[2] and "proxies" not in stages[2]
    # the suite gets the base model and shows its decision reads' sample counts; without the RLHF leg no proxy
    # gate runs; the verdict is the last thing, no HumanEval
    assert events[i3 + 1:] == [("suite", (Path("gates/demo-suite.yaml"), True,
                                          {"EVALGATE_DEMO_BASE": str(tmp_path / "base.gguf")})),
                               ("verdict", ("VERDICT", []))]
    out, err = capsys.readouterr()
    assert "verdict after" in out
    # the stage's header names the base model: its dev value is shown beside the checkpoints' (new-user finding)
    assert "  base model: pass@1 0.500 ± 0.100 on addition-dev" in err.splitlines()

    events.clear()
    assert demo.main(["--full"]) == 0
    stages = [str(v) for k, v in events if k == "stage"]
    assert [s[:10] for s in stages] == ["demo [1/5]", "demo [2/5]", "demo [3/5]", "demo [4/5]", "demo [5/5]"]
    assert "RLHF leg: the tiny reward model" in stages[2] and "8-item dev split addition-proxy" in stages[2]
    assert stages[4].startswith("demo [5/5] HumanEval smoke (after the verdict): SmolLM2")
    i3, i4, i5 = (i for i, (k, v) in enumerate(events) if k == "stage" and str(v)[:10] in ("demo [3/5]", "demo [4/5]",
                                                                                          "demo [5/5]"))
    assert events[i3 + 1:i4] == [("rlhf", (Path("protocols/addition.yaml"), "base.gguf", 40))]
    # the suite decides; then gates/demo.yaml (the addition member alone) scores the proxies, deciding nothing
    assert events[i4 + 1][0] == "suite" and "then the proxies" in stages[3]
    assert events[i4 + 2][0] == "policy" and events[i4 + 2][1] == {
        "EVALGATE_DEMO_BASE": str(tmp_path / "base.gguf"), "EVALGATE_DEMO_PROXIES": str(tmp_path / "proxies")}
    assert events[i4 + 3:i5] == [("gate", (["addition-judge@1", "addition-rm@1"], True)),
                                 ("verdict", ("VERDICT", ["PROXIES"]))]
    assert events[i5 + 1:] == [("import", None), ("freeze", Path("protocols/humaneval-smoke.yaml")),
                               ("humaneval", ("humaneval-smoke", True))]  # with the generation and scoring bars
