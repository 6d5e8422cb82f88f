"""The gate's training-log guards through ``evalgate.diagnostics``: old guard keys refused with their new names, signals
a seed's log cannot check named in the rule (and enforced with ``guards.require``), the reward-hacking triad, and the
gate over checkpoints of the three real TRL GRPO runs in ../shared/data/trainlogs (PROVENANCE.md there), whose
expected failures are computed here from the raw ``log_history`` values, never from evalgate's output."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import median

import pytest
import yaml
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.diagnostics.log import read_jsonl
from evalgate.gate import load_policy, rules, run_gate
from evalgate.gate.guards import reward_hacking
from evalgate.splits import write_split
from evalgate.store import Store
from tests import gate_fixtures as fx
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

LOGS = SHARED_DATA / "trainlogs"
RUNS = {1: ("chaos-economy-grpo", [50, 100, 150, 200, 250]),
        2: ("minesweeper-grpo-gptoss20b", [100, 200, 300, 400, 500]),
        3: ("telelogs-grpo-qwen3.5-4b", [40, 80, 120, 160, 200])}
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason=f"real trainer logs not present at {LOGS} "
                                                          "(../shared/data is on developer machines and CI)")


def _policy(tmp_path: Path, d: dict) -> Path:
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def test_old_guard_keys_refused_with_new_name(tmp_path: Path) -> None:
    p = tmp_path / "gate.yaml"
    p.write_text("name: g\nprotocol: fx@1\nselection_split: fx-dev\ndecision_split: fx-private\n"
                 "baseline: {value: 0.4}\nguards:\n  clip_window: 3\n  nan: false\n")
    with pytest.raises(BadInput) as e:
        load_policy(p)
    msg = str(e.value)
    assert f"{p}:7: guards.clip_window: 'clip_window' was renamed to 'window'; rename the key" in msg
    assert f"{p}:8: guards.nan: 'nan' was renamed to 'nonfinite'; rename the key" in msg
    p.write_text(p.read_text().replace("clip_window", "window").replace("nan:", "nonfinite:"))
    g = load_policy(p).guards
    assert (g.window, g.nonfinite) == (3, False)
    p.write_text(p.read_text() + "  require: [kl_target]\n")
    with pytest.raises(BadInput, match=r"gate.yaml:9: guards.require: .*unknown signal\(s\) kl_target"):
        load_policy(p)


def test_not_checkable_and_coverage_named_and_required(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 3))
    v = run_gate(load_policy(_policy(tmp_path, fx.policy_dict(built["baseline"], reward_hacking=False))),
                 built["store"], evaluate_decision=False)
    rule = next(r for r in v.rules if r.rule == "training_guards")
    # the fixture logs have no entropy, value loss or frac_reward_zero_std key (tests/gate_fixtures.py)
    assert "seeds 1, 3: " in rule.detail and "entropy_floor, entropy_drop, entropy_rising [entropy]" in rule.detail
    assert "value_loss [value_loss]" in rule.detail
    assert "zero_std_groups, zero_std_rising [zero_std_frac]" in rule.detail
    # seed 3 has a (failed) run of checkpoint-50, its newest trainer_state.json is checkpoint-40's
    assert "seed 3: training log" in rule.detail and "stops at step 40 but checkpoints go to step 50" in rule.detail
    seeds = {s["train_seed"]: s for s in v.as_dict()["seeds"]}
    assert "entropy_drop" in seeds[1]["not_checkable"] and seeds[1]["coverage"] == []
    assert seeds[3]["diagnosis"]["worst"] == "fail"

    # requiring a signal the logs cannot check names it per seed; one they can check adds nothing
    for req, unmet in ((["entropy_floor"], True), (["grad_norm_spike", "kl_rising"], False)):
        pol = {**fx.policy_dict(built["baseline"], reward_hacking=False), "guards": {"require": req}}
        assert v.baseline is not None
        rule = next(r for r in rules(load_policy(_policy(tmp_path, pol)), v.seeds, v.baseline, v.stats)
                    if r.rule == "training_guards")
        assert ("Required signal(s) not checkable: seed 1: entropy_floor (entropy not logged" in rule.detail
                and "; seed 3: entropy_floor (" in rule.detail) is unmet, rule.detail


def test_triad_needs_all_three(tmp_path: Path) -> None:
    rows = [{"step": s, "reward": s / 10, "completions/mean_length": 100 + (50 if s > 20 else 0)}
            for s in range(1, 31)]
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = read_jsonl(p)
    dev = [{"step": 10, "value": 0.5}, {"step": 20, "value": 0.6}, {"step": 30, "value": 0.4}]
    t, checked = reward_hacking(log, dev)
    assert checked == 2  # steps 20 and 30 each have reward logged in both windows
    assert t is not None and (t.signal, t.status, t.step) == ("reward_hacking", "fail", 30)
    assert "completion length 100 -> 150" in t.message
    flat = [{**r, "completions/mean_length": 100} for r in rows]
    p.write_text("".join(json.dumps(r) + "\n" for r in flat))
    assert reward_hacking(read_jsonl(p), dev) == (None, 2)  # length did not rise
    assert reward_hacking(log, [{**x, "value": 0.5} for x in dev]) == (None, 2)  # dev did not fall
    assert reward_hacking(log, dev[:1]) == (None, 0)  # one dev checkpoint: nothing to compare
    assert reward_hacking(None, dev) == (None, 0)  # no log: nothing checked


# -- the real logs -----------------------------------------------------------------------------------------------------
def _raw(name: str, key: str) -> list[tuple[int, float]]:
    hist = json.loads((LOGS / name / "trainer_state.json").read_text())["log_history"]
    return [(h["step"], float(h[key])) for h in hist if key in h]


def _expected_fails(name: str) -> set[tuple[str, int]]:
    """The default fail guards, computed from the raw values: truncation (mean of 5 consecutive
    completions/clipped_ratio above 0.2), clip fraction (5 consecutive clip_ratio/region_mean above 0.4), grad-norm
    spike (above 10x the median, when above 0, of the previous up-to-10 values, from the 4th value), NaN/inf
    anywhere."""
    out = set()
    trunc = _raw(name, "completions/clipped_ratio")
    hit = next((trunc[i][0] for i in range(len(trunc) - 4) if sum(v for _, v in trunc[i:i + 5]) / 5 > 0.2), None)
    if hit is not None:
        out.add(("truncation", hit))
    clip = _raw(name, "clip_ratio/region_mean")
    hit = next((clip[i][0] for i in range(len(clip) - 4) if all(v > 0.4 for _, v in clip[i:i + 5])), None)
    if hit is not None:
        out.add(("clip_fraction", hit))
    gn = _raw(name, "grad_norm")
    meds = {i: median(v for _, v in gn[max(0, i - 10):i]) for i in range(3, len(gn))}
    # a zero median (minesweeper logs grad_norm 0.0 on steps where every group had one reward: no gradient) is no
    # baseline: 0.71 at step 460 after six zeros in ten is that run's usual size, not a spike
    hit = next((gn[i][0] for i, m in meds.items() if m > 0 and gn[i][1] > 10 * m), None)
    if hit is not None:
        out.add(("grad_norm_spike", hit))
    hist = json.loads((LOGS / name / "trainer_state.json").read_text())["log_history"]
    assert all(math.isfinite(v) for h in hist for v in h.values() if isinstance(v, float))
    return out


@needs_logs
@pytest.mark.real_data
def test_gate_over_real_grpo_runs(tmp_path: Path) -> None:
    expected = {seed: _expected_fails(name) for seed, (name, _) in RUNS.items()}
    # read off the files: both truncate from their first logged window (0.6, 0.75, 0.8, 0.65, 0.65 on chaos's steps
    # 5-25; minesweeper's completions are almost always clipped at 128 tokens); telelogs has no failure
    assert expected == {1: {("truncation", 5)}, 2: {("truncation", 10)}, 3: set()}
    write_split("fx-dev", "dev", fx.ITEMS, {"source": "test fixture"})
    write_split("fx-private", "private", fx.ITEMS, {"source": "test fixture"})
    store = Store()
    store.record_protocol(*fx.PROTO, fx.HASH, {})
    for seed, (name, steps) in RUNS.items():
        for j, step in enumerate(steps):
            fx.add_run(store, f"dev-{seed}-{step}", f"d{seed}-{step}", tmp_path / name / f"checkpoint-{step}", "fx-dev",
                       "dev", seed, step, fx._scores(0.3 + 0.1 * j))
    fx.add_run(store, "dec-3", "d3-200", tmp_path / RUNS[3][0] / "checkpoint-200", "fx-private", "private", 3, 200,
               fx.X[3], purpose="release-gate")
    logs = {seed: str(LOGS / name / "trainer_state.json") for seed, (name, _) in RUNS.items()}
    pol = {**fx.policy_dict("x", reward_hacking=False), "baseline": {"value": 0.4}, "training_logs": logs}
    v = run_gate(load_policy(_policy(tmp_path, pol)), store, evaluate_decision=False)
    seeds = {s["train_seed"]: s for s in v.as_dict()["seeds"]}
    for seed, exp in expected.items():
        assert {(d["signal"], d["step"]) for d in seeds[seed]["diagnostics"]} == exp
        for c in seeds[seed]["checkpoints"]:
            assert [r for r in c["failed_reasons"] if r.startswith("guard")] == [
                f"guard {sig} tripped at step {step}" for sig, step in sorted(exp) if c["step"] >= step]
    assert seeds[1]["best"] is None and seeds[2]["best"] is None and seeds[3]["best"]["step"] == 200
    # the same fail signals as `evalgate diagnose` on the same logs
    r = CliRunner().invoke(main, ["diagnose", *logs.values(), "--seed", "1", "--seed", "2", "--seed", "3", "--json"])
    assert r.exit_code == 1, r.output
    for d in json.loads(r.output)["seeds"]:
        assert {(f["signal"], f["step"]) for f in d["findings"] if f["status"] == "fail"} == expected[d["seed"]]
    # KL: absent from minesweeper, 0 at every step of telelogs (beta = 0), moving in chaos -- never "within bounds"
    assert "kl" not in {k for h in json.loads((LOGS / RUNS[2][0] / "trainer_state.json").read_text())["log_history"]
                        for k in h}
    assert all(v == 0 for _, v in _raw(RUNS[3][0], "kl")) and any(v > 0 for _, v in _raw(RUNS[1][0], "kl"))
    assert [s for s in (1, 2, 3) if "kl_above_target" in seeds[s]["not_checkable"]] == [2, 3]
    rule = next(r for r in v.rules if r.rule == "training_guards")
    assert not rule.passed and "seed 1: truncation at step 5" in rule.detail
    assert "seed 2: truncation at step 10" in rule.detail
    assert "kl_above_target, kl_rising, kl_negative [kl]" in rule.detail
    # requiring the KL guard makes the beta = 0 runs fail loudly instead of passing silently
    pol["guards"] = {"require": ["kl_above_target"], "kl_target": 0.05}
    v = run_gate(load_policy(_policy(tmp_path, pol)), store, evaluate_decision=False)
    rule = next(r for r in v.rules if r.rule == "training_guards")
    assert "Required signal(s) not checkable: seed 2: kl_above_target (KL penalty off or not logged" in rule.detail
    assert "seed 3: kl_above_target (KL penalty off or not logged: 'kl' is 0 at every logged step" in rule.detail
