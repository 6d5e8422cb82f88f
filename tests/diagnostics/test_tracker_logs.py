"""`evalgate diagnose` reads what trackers hold (issue 32): a W&B offline run written the way HF's WandbCallback
writes one (``train/<key>`` against ``train/global_step``), and an MLflow run written the way HF's MLflowCallback
does (``<key>`` at ``step``), each with wandb's / MLflow's own client. A grad_norm spike at step 25 (1.0 + 0.01 *
step elsewhere, 50 at 25: 10x the median of the previous 10 is about 12) must be found at step 25 in both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main

pytestmark = pytest.mark.integration
STEPS = list(range(1, 41))


def _grad(step: int) -> float:
    return 50.0 if step == 25 else 1.0 + 0.01 * step


def _spike(out: str) -> list[tuple[str, int | None]]:
    doc = json.loads(out)
    return [(f["status"], f["step"]) for f in doc["seeds"][0]["findings"] if f["signal"] == "grad_norm_spike"]


_WANDB_TRAINER = """
import sys, wandb
run = wandb.init(project="p", dir=sys.argv[1], name="grpo", mode="offline",
                 settings=wandb.Settings(silent=True, console="off", x_disable_stats=True, x_disable_meta=True))
run.define_metric("train/global_step")
run.define_metric("*", step_metric="train/global_step", step_sync=True)
for s in range(1, 41):
    run.log({"train/loss": 0.5, "train/grad_norm": 50.0 if s == 25 else 1.0 + 0.01 * s,
             "train/learning_rate": 1e-6, "train/global_step": s})
run.finish()
"""


def test_diagnose_a_wandb_offline_run(tmp_path: Path) -> None:
    # the trainer is its own process, as in training (and wandb's service state stays out of this one)
    subprocess.run([sys.executable, "-c", _WANDB_TRAINER, str(tmp_path)], check=True, timeout=120,
                   env={**os.environ, "WANDB_MODE": "offline"})
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    r = CliRunner().invoke(main, ["diagnose", str(run_dir), "--json"])
    assert r.exit_code == 1, r.output  # a fail signal fired
    assert _spike(r.output) == [("fail", 25)]
    # the training directory holding wandb/ is read too, and says it read the W&B run
    r2 = CliRunner().invoke(main, ["diagnose", str(tmp_path), "--json"])
    assert r2.exit_code == 1 and _spike(r2.output) == [("fail", 25)]


def test_diagnose_an_mlflow_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("train", artifact_location=(tmp_path / "art").as_uri())
    rid = client.create_run(exp).info.run_id
    client.log_batch(rid, metrics=[Metric(k, v, 0, s) for s in STEPS
                                   for k, v in (("loss", 0.5), ("grad_norm", _grad(s)), ("learning_rate", 1e-6))])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    r = CliRunner().invoke(main, ["diagnose", f"runs:/{rid}", "--json"])
    assert r.exit_code == 1, r.output
    assert _spike(r.output) == [("fail", 25)]
    missing = CliRunner().invoke(main, ["diagnose", "runs:/0123456789abcdef"])
    assert missing.exit_code == 2 and "no MLflow run '0123456789abcdef'" in missing.output
