"""Training-log readers and guards on real TRL GRPO trainer_state.json files (../shared/data/trainlogs, see its
PROVENANCE.md; expected steps read off the files by hand), JSONL and TensorBoard event files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evalgate.trainlogs import guard_diagnostics, read_jsonl, read_path, read_tensorboard, reward_hacking
from tests.conftest import SHARED_DATA

LOGS = SHARED_DATA / "trainlogs"
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason=f"real trainer logs not present at {LOGS} "
                                                          "(../shared/data is on developer machines and CI)")


@needs_logs
def test_real_grpo_logs_map_known_keys() -> None:
    log = read_path(LOGS / "chaos-economy-grpo" / "trainer_state.json")
    assert log.format == "trainer_state" and len(log.series["reward"]) == 50
    assert {"reward", "kl", "clip_fraction", "completion_length", "truncation", "grad_norm", "loss",
            "learning_rate"} <= set(log.series)
    assert log.series["reward"][0] == (5, pytest.approx(0.6202375590801239))  # first entry of the file
    assert log.series["completion_length"][0] == (5, 424.3)
    assert not log.nonfinite
    mine = read_path(LOGS / "minesweeper-grpo-gptoss20b")  # a run directory: found by name
    assert "entropy" in mine.series and "kl" not in mine.series


@needs_logs
def test_real_grpo_guards_first_step() -> None:
    chaos = read_path(LOGS / "chaos-economy-grpo" / "trainer_state.json")
    # kl first exceeds 0.02 at step 65 (0.0273), read off the file
    d = guard_diagnostics(chaos, kl_target=0.01)
    assert [(x.kind, x.step) for x in d] == [("kl", 65)]
    mine = read_path(LOGS / "minesweeper-grpo-gptoss20b" / "trainer_state.json")
    # entropy first falls below 1.0 at step 210; clip_ratio/region_mean is 0 throughout
    assert [(x.kind, x.step) for x in guard_diagnostics(mine, entropy_floor=1.0)] == [("entropy", 210)]
    tele = read_path(LOGS / "telelogs-grpo-qwen3.5-4b" / "trainer_state.json")
    assert guard_diagnostics(tele, kl_target=0.05, entropy_floor=0.1) == []


def test_guards_on_constructed_series(tmp_path: Path) -> None:
    rows = [{"step": s, "clip_ratio": 0.5 if 4 <= s <= 8 else 0.1, "grad_norm": 50.0 if s == 9 else 1.0,
             "loss": float("nan") if s == 7 else 0.1} for s in range(1, 11)]
    p = tmp_path / "metrics.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = read_jsonl(p)
    d = {x.kind: x.step for x in guard_diagnostics(log, clip_window=5)}
    # clip > 0.4 on steps 4..8 (5 steps) -> first at 4; grad 50 > 10 x median 1 at 9; NaN loss at 7
    assert d == {"clip_fraction": 4, "grad_norm_spike": 9, "nan": 7}
    assert {x.kind for x in guard_diagnostics(log, clip_window=6)} == {"grad_norm_spike", "nan"}


def test_triad_needs_all_three(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": s / 10, "completions/mean_length": 100 + (50 if s > 20 else 0)}
            for s in range(1, 31)]
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = read_jsonl(p)
    dev = [{"step": 10, "value": 0.5}, {"step": 20, "value": 0.6}, {"step": 30, "value": 0.4}]
    t = reward_hacking(log, dev)
    assert t is not None and t.step == 30 and "completion length 100 -> 150" in t.detail
    flat = [{**r, "completions/mean_length": 100} for r in rows]
    p.write_text("".join(json.dumps(r) + "\n" for r in flat))
    assert reward_hacking(read_jsonl(p), dev) is None  # length did not rise
    assert reward_hacking(log, [{**x, "value": 0.5} for x in dev]) is None  # dev did not fall


def test_tensorboard_events(tmp_path: Path) -> None:
    tb = pytest.importorskip("torch.utils.tensorboard", reason="torch's SummaryWriter needs the tensorboard package")
    w = tb.SummaryWriter(str(tmp_path / "runs"))
    for s in range(1, 6):
        w.add_scalar("train/reward", 0.1 * s, s)
        w.add_scalar("train/kl", 0.01 * s, s)
    w.close()
    log = read_tensorboard(tmp_path / "runs")
    assert [s for s, _ in log.series["reward"]] == [1, 2, 3, 4, 5]
    assert math.isclose(log.series["kl"][-1][1], 0.05, rel_tol=1e-6)
    assert read_path(tmp_path / "runs").format == "tensorboard"
