"""The gate keeps training runs apart (issue 44, item 1): two runs that share a seed number are two candidates, a
policy that names no run is refused before any read when its candidates span runs, and each seed's training-log
guards read its own run's log.

The store: ``runs/grpo/seed-1/checkpoint-{10,20}`` (a clean GRPO log) and ``runs/trl/seed-1/checkpoint-4`` (a TRL
log at 100 % truncation from step 1, the finding evalgate's callback stopped that run for), on the fixture splits
of ``tests/gate_fixtures.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalgate.core.errors import RefusedByPolicy
from evalgate.gate import load_policy, run_gate, select_checkpoints
from evalgate.splits import load_manifest, write_split
from evalgate.store import Store
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")


def _state(steps: range, clipped: float) -> dict:
    return {"global_step": steps[-1], "logging_steps": 1,
            "log_history": [{"step": s, "reward": 0.1 * s, "kl": 0.001 * s, "completions/clipped_ratio": clipped,
                             "completions/mean_length": 100.0, "grad_norm": 1.0, "loss": 0.01} for s in steps]}


def _build(root: Path) -> tuple[Store, Path]:
    """Two training runs with a seed 1 each; dev pass@1 grpo 10: 0.3, 20: 0.5; trl 4: 0.7 (the highest of the
    three, so a gate that mixed the runs would call trl's step 4 the best of "seed 1")."""
    write_split("fx-dev", "dev", fx.ITEMS, {"source": "test fixture"})
    write_split("fx-private", "private", fx.ITEMS, {"source": "test fixture"})
    store = Store()
    store.record_protocol(*fx.PROTO, fx.HASH, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
    dev = load_manifest("fx-dev").content_sha256
    for run, step, value, clipped in (("grpo", 10, 0.3, 0.0), ("grpo", 20, 0.5, 0.0), ("trl", 4, 0.7, 1.0)):
        ck = root / "runs" / run / "seed-1" / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        (ck / "trainer_state.json").write_text(json.dumps(_state(range(1, step + 1), clipped)))
        fx.add_run(store, f"dev-{run}-{step}", f"d-{run}-{step}", ck, "fx-dev", "dev", 1, step,
                   fx._scores(value), split_sha256=dev, train_run=run)
    return store, root


def _policy_file(tmp_path: Path, **extra: object) -> Path:
    p = tmp_path / "gate.yaml"
    d = {**fx.policy_dict("/nowhere"), "baseline": {"value": 0.1}, **extra}
    p.write_text(yaml.safe_dump(d))
    return p


def test_select_keys_seeds_by_run_and_seed(tmp_path: Path) -> None:
    store, _ = _build(tmp_path)
    seeds = select_checkpoints(store.runs(split="fx-dev"), "pass@1", None)
    got = {(s.train_run, s.train_seed): (s.best.step if s.best else None, s.last.step if s.last else None,
                                         [c.step for c in s.checkpoints]) for s in seeds}
    assert got == {("grpo", 1): (20, 20, [10, 20]), ("trl", 1): (4, 4, [4])}


def test_several_runs_without_train_run_refused_before_any_read(tmp_path: Path) -> None:
    store, _ = _build(tmp_path)
    with pytest.raises(RefusedByPolicy, match=r"2 training runs: grpo \(seed 1\), trl \(seed 1\)") as e:
        run_gate(load_policy(_policy_file(tmp_path)), store, evaluate_decision=False)
    assert "train_run" in str(e.value) and "--train-run" in str(e.value)
    assert store.access_rows("fx-dev") == [] and store.access_rows("fx-private") == []
    assert store.gates() == []


def test_each_run_is_gated_with_its_own_log(tmp_path: Path) -> None:
    store, _ = _build(tmp_path)
    fx.add_run(store, "dec-trl", "d-trl-4", tmp_path / "runs/trl/seed-1/checkpoint-4", "fx-private", "private",
               1, 4, [1] * 10, purpose="release-gate", train_run="trl")
    fx.add_run(store, "dec-grpo", "d-grpo-20", tmp_path / "runs/grpo/seed-1/checkpoint-20", "fx-private", "private",
               1, 20, [1] * 10, purpose="release-gate", train_run="grpo")
    trl = run_gate(load_policy(_policy_file(tmp_path, train_run="trl")), store, evaluate_decision=False)
    (seed,) = trl.seeds
    assert (seed.train_run, seed.best.step if seed.best else None) == ("trl", None)  # step 4 failed by its own log
    assert seed.train_log is not None and "runs/trl/seed-1" in seed.train_log.source
    assert [(d.signal, d.step) for d in seed.diagnostics] == [("truncation", 1)]
    assert not {r.rule: r.passed for r in trl.rules}["training_guards"] and not trl.passed
    grpo = run_gate(load_policy(_policy_file(tmp_path, train_run="grpo")), store, evaluate_decision=False)
    (seed,) = grpo.seeds
    assert (seed.train_run, seed.best.step if seed.best else None, seed.last.step if seed.last else None) == \
        ("grpo", 20, 20)
    assert seed.train_log is not None and "runs/grpo/seed-1" in seed.train_log.source
    assert {r.rule: r.passed for r in grpo.rules}["training_guards"]


def test_cli_refuses_with_exit_2_naming_the_runs(tmp_path: Path) -> None:
    from evalgate.cli import main
    from evalgate.protocol.spec import load_protocol, lock_document

    store, _ = _build(tmp_path)
    proto = tmp_path / "proto.yaml"
    proto.write_text("name: fx\nversion: '1'\nprompt: {template: '{{ question }}'}\nscorer: {name: exact}\n")
    proto.with_name("proto.yaml.lock").write_text(json.dumps(lock_document(load_protocol(proto))))
    policy = _policy_file(tmp_path, protocol_file="proto.yaml")
    out = CliRunner().invoke(main, ["gate", "--policy", str(policy), "--json"])
    assert out.exit_code == 2, out.output
    doc = json.loads(out.stdout)
    assert doc["reason"] == "refused" and "grpo (seed 1), trl (seed 1)" in doc["error"]
    assert store.access_rows("fx-private") == []


def test_train_run_argument_sets_the_policy_field(tmp_path: Path) -> None:
    from evalgate.workspace import Workspace

    store, _ = _build(tmp_path)
    fx.add_run(store, "dec-grpo", "d-grpo-20", tmp_path / "runs/grpo/seed-1/checkpoint-20", "fx-private", "private",
               1, 20, [1] * 10, purpose="release-gate", train_run="grpo")
    v = Workspace.from_env().gate(_policy_file(tmp_path), evaluate_decision=False, train_run="grpo")
    assert [(s.train_run, s.train_seed) for s in v.seeds] == [("grpo", 1)]


def test_the_demos_verdict_ends_with_what_ships_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 44, item 14: the demo's verdict had no ``ship:`` line, and a seed with the lower private score shipped
    (chosen on dev, which is right) without a word. Issue 45: the demo gates with a suite and says which member
    decided. Fixture seeds 1 and 2: dev best 0.6 (step 30) and 0.7 (step 20), private 0.6 and 0.7, the baseline 0.4;
    a target and a guard (select: false) on the same splits; seed 2 ships, picked on dev."""
    from evalgate.demo.main import _print_verdict
    from evalgate.gate.suite import load_suite
    from evalgate.gate.suite_run import run_suite

    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    # the guard's own private split (9 items: another content, another budget) and its stored decision runs
    write_split("fx-guard", "private", fx.ITEMS[:9], {"source": "test fixture"})
    sha = load_manifest("fx-guard").content_sha256
    runs = tmp_path / "runs"
    fx.add_run(built["store"], "guard-base", "dbase", runs / "baseline", "fx-guard", "private", None, None, [1] * 9,
               purpose="release-gate", split_sha256=sha)
    for seed, step, scores in ((1, 30, [1] * 8 + [0]), (2, 20, [1] * 9)):
        fx.add_run(built["store"], f"guard-{seed}", f"d{seed}-{step}",
                   runs / f"fx-run-seed{seed}" / f"checkpoint-{step}", "fx-guard", "private", seed, step, scores,
                   purpose="release-gate", split_sha256=sha)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({
        "name": "fx-suite", "baseline": {"checkpoint": built["baseline"]}, "bootstrap_resamples": 2000,
        "rules": {"min_seeds": 2, "reward_hacking": False}, "members": [
            {"name": "skill", "role": "target", "protocol": "fx@1", "selection_split": "fx-dev",
             "decision_split": "fx-private", "min_improvement": 0.0},
            {"name": "safety", "role": "guard", "protocol": "fx@1", "decision_split": "fx-guard", "margin": 0.5,
             "select": False}]}))
    v = run_suite(load_suite(p), built["store"], evaluate_decision=False)
    doc = {**v.as_dict(), **{k: str(tmp_path / f"r.{k}") for k in ("report", "json_out", "junit", "markdown")}}
    _print_verdict(v, doc)
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "gate 'fx-suite' over 2 training seeds: PASS (decided by: every member passed)"
    lines = "\n".join(out)
    assert "  skill (target: pass@1 of fx@1 on fx-private; min_improvement +0):" in lines
    assert "    seed 1: best step 30 (dev 0.600), last step 40, failed none; private pass@1 0.600" in lines
    assert "    seed 2: best step 20 (dev 0.700), last step 40, failed [30]; private pass@1 0.700" in lines
    assert "    base model: private pass@1 0.400" in lines
    assert "  safety (guard: pass@1 of fx@1 on fx-guard; margin 0.5, not in selection):" in lines
    assert "    seed 1 (step 30): private pass@1 0.889" in lines and "    base model: private pass@1 1.000" in lines
    (ship,) = [line for line in out if line.startswith("ship: ")]
    assert ship.startswith(f"ship: {tmp_path / 'runs' / 'fx-run-seed2' / 'checkpoint-20'} (suite PASS")
    assert "seed 2's checkpoint (step 20)" in ship
