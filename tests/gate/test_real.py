"""The gate end to end through the CLI with real evaluations: variants of the tiny random checkpoint (SmolLM2's
tokenizer; real decoding, what it writes does not matter here) on tiny addition splits, the decision split read
through the split manager (purpose release-gate, counted, cache reused)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.demo.train import addition_items
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO


def _variant(src: Path, dst: Path, k: int) -> Path:
    """A checkpoint directory with the same weights (symlinked) and a config that differs by one unused key, so
    its digest differs."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f)
    cfg = json.loads((src / "config.json").read_text())
    cfg["evalgate_test_variant"] = k
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def tiny_addition(home: Path, prefix: str, policy: Any = None) -> Path:
    """Splits ``PREFIX-dev`` and ``PREFIX-private`` (2 two-digit additions each; the private one under ``policy``
    when given) and protocol ``PREFIX-add@1`` (protocols/addition.yaml cut to 3 tokens), frozen; its path."""
    from evalgate.protocol.freeze import freeze

    write_split(f"{prefix}-dev", "dev", addition_items("dev", 2), {"source": "test"})
    write_split(f"{prefix}-private", "private", addition_items("private", 2), {"source": "test"}, policy=policy)
    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto.update(name=f"{prefix}-add")
    proto["sampling"]["max_tokens"] = 3
    path = home / f"{prefix}-add.yaml"
    path.write_text(yaml.safe_dump(proto))
    freeze(path, Store)
    return path


@pytest.mark.integration  # the CLI in subprocesses: its stderr as a CI log shows it
@pytest.mark.timeout(900)
def test_gate_cli_with_real_decision_runs(home: Path, tiny_checkpoint: Path) -> None:
    write_split("add-dev", "dev", addition_items("dev", 3), {"source": "test"})
    write_split("add-private", "private", addition_items("private", 3), {"source": "test"})
    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto.update(name="add-test")
    proto["sampling"]["max_tokens"] = 4
    (home / "protocols").mkdir()
    ppath = home / "protocols" / "add-test.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    env = {**os.environ}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "evalgate.cli", *args], capture_output=True, text=True, env=env,
                              cwd=REPO, timeout=600)

    assert cli("protocol", "freeze", str(ppath)).returncode == 0
    run_dir = home / "train" / "seed1"
    for step in (2, 4):
        ck = _variant(tiny_checkpoint, run_dir / f"checkpoint-{step}", step)
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": [
            {"step": s, "loss": 1.0 / s, "grad_norm": 1.0, "learning_rate": 1e-4} for s in range(1, step + 1)]}))
        evaluate(ppath, ck, "add-dev", RunOptions(train_seed=1, progress=False), store=Store())
    (home / "gates").mkdir()
    policy = home / "gates" / "g.yaml"
    policy.write_text(yaml.safe_dump({
        "name": "real", "protocol": "add-test@1", "selection_split": "add-dev", "decision_split": "add-private",
        "baseline": {"checkpoint": str(tiny_checkpoint)}, "rules": {"min_seeds": 1, "max_truncation_rate": 1.0,
                                                                 "reward_hacking": False}}))  # the log has no reward
    # without --json: the private evaluation shows what is read and how far it got, on stderr, as whole
    # lines in a log (no terminal here), counts only: the baseline and the seed's best, 3 samples each
    t = cli("gate", "--policy", str(policy))
    assert t.returncode in (0, 1), t.stderr
    assert "\r" not in t.stderr
    for ck in (tiny_checkpoint, "checkpoint-"):
        assert any(ln.startswith("gate: evaluating ") and str(ck) in ln and ln.endswith(" on add-private "
                   "(release-gate)") for ln in t.stderr.splitlines()), t.stderr
    bars = [ln for ln in t.stderr.splitlines() if ln.startswith(("generate:", "score:"))]
    assert any(ln.startswith("generate: 100%|") and "3/3" in ln for ln in bars), t.stderr
    assert all(re.fullmatch(r"(generate|score): +\d+%\|[# 0-9]*\| \d/3 \[[^\]]*\]", ln) for ln in bars), bars
    assert t.stdout.splitlines()[-1].startswith("ship: ")  # the verdict on stdout, the progress not

    # --json: the same gate (its decision reused: nothing read again) prints its document only, and no progress
    g = cli("gate", "--policy", str(policy), "--json", "--report", str(home / "r.html"), "--junit",
            str(home / "j.xml"))
    assert g.returncode in (0, 1), g.stderr
    assert "gate: evaluating" not in g.stderr and "%|" not in g.stderr
    doc = json.loads(g.stdout)
    (seed,) = doc["seeds"]
    assert seed["train_seed"] == 1 and seed["last"]["step"] == 4 and seed["best"]["step"] in (2, 4)
    assert seed["decision"]["items"] == 3 and doc["baseline"]["decision"]["items"] == 3
    assert seed["train_log"]["format"] == "trainer_state"
    # each candidate's run records where its seed (the flag) and step (its checkpoint-N folder) came from, and the
    # release report shows it
    prov = {c["step"]: c["provenance"] for c in seed["checkpoints"]}
    assert {k: (p["train_seed"], p["step"]) for k, p in prov.items()} == {
        2: ("flag", "folder name 'checkpoint-2'"), 4: ("flag", "folder name 'checkpoint-4'")}
    html = (home / "r.html").read_text()
    assert "train_seed: flag" in html and "step: folder name &#39;checkpoint-4&#39;" in html
    assert "Training-log diagnostics per seed" in html  # the log has loss and grad_norm only
    a = json.loads(cli("audit", "--json", "--split", "add-private").stdout)["splits"]["add-private"]
    assert a["reads"] == 2 and a["by_purpose"] == {"release-gate": 2} and a["budget"]["left"] == 2
