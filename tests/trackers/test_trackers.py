"""Trackers (issue 32): eval metrics of the fixture runs (tests/gate_fixtures.py: dev pass@1 by seed and step,
known by construction) written to TensorBoard, W&B (offline) and MLflow (local SQLite store) with the libraries'
own clients, and read back with their own readers; a private gate exports its verdict only; every export is in
the access log; a missing library is an install hint."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import evalgate.gate.report.outputs as report_mod
from evalgate.cli import main
from evalgate.core.errors import MissingExtra
from evalgate.gate import run_gate
from evalgate.trackers import TrackerConfig, export_runs, open_trackers
from tests import gate_fixtures as fx
from tests.trackers.tracker_read import tb_scalars, tb_texts, wandb_records, wandb_run_files

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

SEED1 = [(10, 0.3), (20, 0.5), (30, 0.6), (40, 0.5)]  # fx.DEV[1] at fx.STEPS
SEED2 = [(10, 0.4), (20, 0.7), (30, 0.2), (40, 0.6)]
TAG = "eval/fx-dev/pass@1"


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Any]:
    return fx.build(tmp_path / "runs", seeds=(1, 2))


def _approx(pairs: list[tuple[int, float]]) -> list[tuple[int, Any]]:
    return [(s, pytest.approx(v, abs=1e-6)) for s, v in pairs]


@pytest.mark.integration
def test_runs_land_by_step_per_training_run_and_seed(tmp_path: Path, built: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory (MLflow's default ./mlruns)
    cfg = TrackerConfig(dir=tmp_path / "trk", project="fx")
    ids = [f"dev-{seed}-{step}" for seed in (1, 2) for step in fx.STEPS]
    result = export_runs([*ids, "dec-1"], open_trackers(["tensorboard", "wandb", "mlflow"], cfg),
                         store=built["store"], actor="tester")
    assert result["exported"] == ids
    assert [s["run_id"] for s in result["skipped"]] == ["dec-1"] and "tier private" in result["skipped"][0]["reason"]
    # TensorBoard: one log directory per training run + seed, pass@1 at each checkpoint's step
    tb = tmp_path / "trk" / "tensorboard" / "fx-run"
    assert sorted(p.name for p in tb.iterdir()) == ["seed-1", "seed-2"]
    assert tb_scalars(tb / "seed-1")[TAG] == _approx(SEED1)
    assert tb_scalars(tb / "seed-2")[TAG] == _approx(SEED2)
    # W&B: one offline run per training run + seed, grouped by the training run, on HF's train/global_step axis
    runs = wandb_run_files(tmp_path / "trk")
    assert sorted(runs) == ["fx-run/seed-1", "fx-run/seed-2"]
    rec = wandb_records(runs["fx-run/seed-1"])
    assert rec["run"]["group"] == "fx-run"
    assert [(h["train/global_step"], h[TAG]) for h in rec["history"]] == _approx(SEED1)
    # MLflow: one run per training run + seed, found by its tags; '@' is not allowed in a key: pass_at_1
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'trk' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("fx")
    found = client.search_runs([exp.experiment_id], "tags.`evalgate.train_seed` = '2'")
    assert len(found) == 1 and found[0].info.run_name == "fx-run/seed-2"
    hist = client.get_metric_history(found[0].info.run_id, "eval/fx-dev/pass_at_1")
    assert sorted((m.step, m.value) for m in hist) == _approx(SEED2)
    # every export is a logged read of its split (like evalgate samples); the private run's attempt is refused
    rows = built["store"].access_rows("fx-dev")
    exports = [r for r in rows if r.purpose == "export-tracker"]
    assert sorted(r.run_id for r in exports) == sorted(ids)
    assert {(r.outcome, r.cached, r.actor) for r in exports} == {("read", True, "tester")}
    refused = [r for r in built["store"].access_rows("fx-private") if r.purpose == "export-tracker"]
    assert [r.outcome for r in refused] == ["refused"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "runs", "trk"] or not (tmp_path / "mlruns").exists()


def _strings(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


@pytest.mark.integration
def test_a_private_gate_exports_its_verdict_only(tmp_path: Path, built: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    pol = tmp_path / "gate.yaml"
    pol.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2, reward_hacking=False)))
    monkeypatch.setattr(report_mod, "run_gate", lambda p, s, a, **k: run_gate(p, s, a, evaluate_decision=False, **k))
    trk = tmp_path / "trk"
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["gate", "--policy", str(pol), "--report", str(tmp_path / "r.html"),
                                  "--tracker-dir", str(trk), "--tracker-project", "fx",
                                  *[a for t in ("tensorboard", "wandb", "mlflow") for a in ("--report-to", t)]])
    assert r.exit_code == 0, r.output
    # PASS, shipping seed 2's step 20 (tests/gate/test_history.py): the verdict is logged at that step
    tb = trk / "tensorboard" / "gate" / "fx-gate"
    scalars = tb_scalars(tb)
    assert scalars["gate/passed"] == [(20, 1.0)]
    assert all(v == [(20, 1.0)] for k, v in scalars.items() if k.startswith("gate/rule/")) and len(scalars) > 2
    assert tb_texts(tb)["gate/verdict"][0][1].startswith("**PASS**: gate `fx-gate`")
    assert not (tb / "artifacts").exists()  # the report files hold per-seed decision values: never sent
    rec = wandb_records(wandb_run_files(trk)["gate/fx-gate"])
    assert rec["summary"]["gate/verdict"] == "PASS" and rec["summary"]["gate/step"] == 20
    assert "r.html" not in rec["files"] and rec["history"] == []
    client = MlflowClient(tracking_uri=f"sqlite:///{trk / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("fx").experiment_id], "tags.`evalgate.gate` = 'fx-gate'")
    assert run.data.tags["gate.verdict"] == "PASS"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "gate/passed")] == [(20, 1.0)]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"verdict.md"}
    # no per-item value and no per-run metric of the private split anywhere: only gate/ keys, no item id, no output
    keys = set(scalars) | set(rec["summary"]) | set(run.data.metrics)
    assert all(k.startswith(("gate/", "_")) for k in keys), keys
    assert not (tmp_path / "mlruns").exists()
    blob = _strings(trk)
    assert fx.PRIVATE_MARKER.encode() not in blob and b"eval/fx-private" not in blob
    # the export is in the access log of both splits the gate used, as 'exported' (no budget counts it)
    for split in ("fx-dev", "fx-private"):
        rows = [x for x in built["store"].access_rows(split) if x.purpose == "export-tracker"]
        assert [x.outcome for x in rows] == ["exported"], split
        assert "verdict PASS" in rows[0].detail and "tensorboard, wandb, mlflow" in rows[0].detail


@pytest.mark.parametrize("name", ["tensorboard", "wandb", "mlflow"])
def test_a_missing_tracker_library_is_an_install_hint(name: str, tmp_path: Path, built: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, name, None)  # import fails as for an absent package
    with pytest.raises(MissingExtra, match=rf"\[{name}\]"):
        open_trackers([name], TrackerConfig(dir=tmp_path))
    pol = tmp_path / "gate.yaml"
    pol.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2)))
    r = CliRunner().invoke(main, ["gate", "--policy", str(pol), "--report-to", name, "--tracker-dir", str(tmp_path)])
    assert r.exit_code == 2 and f"<evalgate checkout>[{name}]" in r.output and "Traceback" not in r.output
    assert not any(x["purpose"] == "release-gate" and x["outcome"] != "refused"
                   for x in built["store"].access_rows("fx-private")[-1:])  # refused before any work


def test_a_judges_rates_reach_the_tracker_with_their_unparseable_counts(tmp_path: Path) -> None:
    """Issue 42, item 3: a judge's rates sat nested in metrics["judge"] and never reached a tracker; now each rate
    lands beside its counts (every rate counts the unparseable items, as losses)."""
    from evalgate.rlhf.pairwise import PairJudgement, win_rate
    from evalgate.trackers.base import finite_metrics

    # q1 won in both orders (1), q2-q4 unparseable (losses): (1 + 0 + 0 + 0) / 4
    pairs = [PairJudgement("q1", "A", "B", 10, 10), *(PairJudgement(f"q{i}", None, None, 10, 10) for i in (2, 3, 4))]
    summary = {"mode": "pairwise", "judged": 4, "unparseable": 3, "pairwise": win_rate(pairs, resamples=200)}
    flat = finite_metrics({"pass@1": 0.5, "judge": summary})
    assert flat["judge/win_rate"] == 0.25 and flat["judge/unparseable_items"] == 3.0 and flat["judge/items"] == 4.0
    assert flat["judge/unparseable"] == 3.0 and flat["judge/judged"] == 4.0 and flat["pass@1"] == 0.5
    pointwise = finite_metrics({"judge": {"mode": "pointwise", "judged": 4, "unparseable": 3, "mean_rating": 3.0}})
    assert pointwise == {"judge/judged": 4.0, "judge/unparseable": 3.0, "judge/mean_rating": 3.0}
    built = fx.build(tmp_path / "runs", seeds=(1,), judge={"dev-1-30": summary})
    cfg = TrackerConfig(dir=tmp_path / "trk", project="fx")
    export_runs(["dev-1-30"], open_trackers(["tensorboard"], cfg), store=built["store"], actor="tester")
    tags = tb_scalars(tmp_path / "trk" / "tensorboard" / "fx-run" / "seed-1")
    assert tags["eval/fx-dev/judge/win_rate"] == _approx([(30, 0.25)])
    assert tags["eval/fx-dev/judge/unparseable_items"] == _approx([(30, 3.0)])


def test_an_lc_win_rate_alpacaevals_flag_calls_failed_does_not_reach_a_tracker_as_a_number() -> None:
    """Adversary round: a model that pads only the answers it loses (12 wins of 40 a little shorter than the
    baseline's, 28 losses ~800 characters longer) is raw win rate 0.30 and LC win rate 1.00: the length term
    explains every loss, and the LC rate is the prediction at a length difference of 0, where only wins lie. The
    fit is AlpacaEval's and its extreme-change flag fires; the report says "far from the raw rate", but trackers
    got judge/lc_win_rate = 1.0 with no flag. Now the flag goes, and the rate does not."""
    import numpy as np

    from evalgate.rlhf.pairwise import PairJudgement, win_rate
    from evalgate.trackers.base import finite_metrics

    rng = np.random.default_rng(0)
    model_len = np.r_[rng.normal(450, 10, 12), rng.normal(1300, 100, 28)].astype(int)
    pairs = [PairJudgement(f"q{i}", *(("A", "B") if i < 12 else ("B", "A")), int(n), 500)
             for i, n in enumerate(model_len)]
    pw = win_rate(pairs, resamples=200)
    assert pw["win_rate"] == pytest.approx(0.3) and pw["lc_win_rate"] > 0.99 and pw["lc_extreme_change"] is True
    flat = finite_metrics({"judge": {"mode": "pairwise", "judged": 40, "unparseable": 0, "pairwise": pw}})
    assert "judge/lc_win_rate" not in flat and flat["judge/lc_extreme_change"] == 1.0
    assert flat["judge/win_rate"] == pytest.approx(0.3)
    # the same wins and losses at honest lengths: no flag, the rate sent with a 0 beside it
    honest = win_rate([PairJudgement(p.item_id, p.model_first, p.baseline_first, 500 + i % 7, 500)
                       for i, p in enumerate(pairs)], resamples=200)
    assert honest["lc_extreme_change"] is False
    flat = finite_metrics({"judge": {"mode": "pairwise", "judged": 40, "unparseable": 0, "pairwise": honest}})
    assert flat["judge/lc_win_rate"] == honest["lc_win_rate"] and flat["judge/lc_extreme_change"] == 0.0
