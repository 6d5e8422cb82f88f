"""The shape of what ``evalgate run``, ``gate``, ``sweep`` and ``diagnose`` print, with and without ``--json``
(written on main before these commands went through ``evalgate.Workspace``, so the move could not change them):
the document's keys in order, values known by construction, every text line, and the exit codes of
docs/DESIGN.md (gate: 0 PASS, 1 FAIL; diagnose: 1 when a fail signal fires; sweep: 0 when every unit is done or
skipped).

No model: the replay backend answers from a file (``evalgate.backends.replay``) and the gate reads the fixture runs
of ``tests/gate_fixtures.py``, whose decision runs are stored, not evaluated."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

import evalgate.gate.report.outputs as report_mod
from evalgate.gate import run_gate
from evalgate.store import Store
from tests import gate_fixtures as fx
from tests.helpers.cli import cli

pytestmark = pytest.mark.usefixtures("memory_store")

RUN_KEYS = ["run_id", "status", "protocol", "checkpoint", "split", "backend", "versions", "effective_params",
            "metrics", "counts", "warnings", "wall_s", "actor", "purpose", "host", "pid", "error", "version"]
SWEEP_KEYS = ["protocol", "splits", "where", "units", "counts", "ignored", "tokens", "wall_s", "exit_code"]
UNIT_KEYS = ["checkpoint", "digest", "train_run", "train_seed", "step", "split", "status", "run_id", "error",
             "generated", "tokens", "generate_s", "wall_s", "attempts", "resent", "node_id"]
GATE_KEYS = ["verdict", "gate", "protocol", "protocol_hash", "selection_split", "decision_split", "metric", "rules",
             "reasons", "accept_not_checkable", "not_checkable", "seeds", "baseline", "stats", "stale", "ignored",
             "failures", "reward_audit", "calibration", "proxies", "reason", "gate_id", "reused_from", "ship",
             "rereads", "broken_chain", "decision_split_size", "decision_not_read"]
DIAGNOSIS_KEYS = ["label", "seed", "source", "format", "steps", "keys_used", "duplicate_steps", "warnings", "worst",
                  "log_choice", "first_break", "findings"]
PROTOCOL = {"name": "shape", "version": "1", "prompt": {"chat_template": "none", "template": "{{ question }}"},
            "sampling": {"max_tokens": 8, "temperature": 0.0}, "scorer": {"name": "exact"},
            "extraction": {"rule": "last_number"}}
ITEMS = [{"id": f"q{i}", "question": f"{i}+{i}?", "answer": str(2 * i)} for i in range(4)]


@pytest.fixture
def replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A frozen protocol, a dev split of 4 items, a replay file answering q0..q2 right and q3 wrong (7, not 6), and
    two checkpoint directories the resolver accepts (``runs/grpo/seed-1/checkpoint-{10,20}``)."""
    import numpy as np
    from safetensors.numpy import save_file

    from evalgate.core.errors import BadInput
    from evalgate.protocol.freeze import freeze
    from evalgate.runner import prompts
    from evalgate.splits import write_split

    def no_tokenizer(model_dir: Path) -> None:  # chat_template none: there is nothing to load
        raise BadInput("no tokenizer")

    monkeypatch.setattr(prompts, "load_tokenizer", no_tokenizer)
    proto = tmp_path / "shape.yaml"
    proto.write_text(yaml.safe_dump(PROTOCOL))
    freeze(proto, Store)
    write_split("shape-dev", "dev", ITEMS, {"source": "test"})
    answers = tmp_path / "replay.jsonl"
    answers.write_text("".join(json.dumps({"item_id": f"q{i}", "turn": 0, "text": f"It is {2 * i + (i == 3)}"})
                               + "\n" for i in range(4)))
    out = {"protocol": proto, "answers": answers}
    for step in (10, 20):
        d = tmp_path / "runs" / "grpo" / "seed-1" / f"checkpoint-{step}"
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"model_type": "llama", "step": step}))  # distinct identities
        save_file({"w": np.zeros(4, dtype=np.uint8)}, str(d / "model.safetensors"))
        out[f"ck{step}"] = d
    return out


def test_run_prints_its_record_or_three_lines(replay: dict[str, Path]) -> None:
    args = ["run", "--protocol", str(replay["protocol"]), "--checkpoint", str(replay["ck10"]), "--split",
            "shape-dev", "--backend", "replay", "--backend-option", f"file={replay['answers']}"]
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert list(doc) == RUN_KEYS
    assert (doc["status"], doc["actor"], doc["purpose"], doc["error"], doc["version"]) == (
        "complete", "test-actor", "evaluation", None, 2)
    assert (doc["protocol"]["name"], doc["protocol"]["version"]) == ("shape", "1")
    assert doc["split"] == {**doc["split"], "name": "shape-dev", "tier": "dev", "items": 4}
    assert (doc["checkpoint"]["path"], doc["checkpoint"]["step"], doc["checkpoint"]["train_seed"]) == (
        str(replay["ck10"]), 10, 1)
    # three of four right: pass@1 0.75; the sample sd of (1, 1, 1, 0) is 0.5, its stderr 0.5 / sqrt(4) = 0.25
    assert doc["metrics"]["pass@1"] == pytest.approx(0.75) and doc["metrics"]["pass@1_stderr"] == pytest.approx(0.25)
    assert (doc["counts"]["items"], doc["counts"]["samples"], doc["counts"]["cached"]) == (4, 4, 0)

    text = cli(*args)  # the same run again: every sample from the generation cache
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert len(lines) == 3, text.stdout
    assert re.fullmatch(r"run \S+: shape@1 on shape-dev \(dev\), 4 samples \(4 cached\) in \d+\.\d s", lines[0])
    assert lines[1] == "  pass@1 = 0.750 ± 0.250 (± stderr, n 4 items)"
    # "It is 2": three words (whitespace tokens, the replay backend's count) in every completion; none truncated
    assert lines[2] == "  mean completion tokens 3.0, truncation rate 0.0%"


def test_sweep_prints_its_summary_or_units_and_results(replay: dict[str, Path]) -> None:
    args = ["sweep", "--protocol", str(replay["protocol"]), "--checkpoints",
            str(replay["ck10"].parent / "checkpoint-*"), "--split", "shape-dev", "--backend", "replay",
            "--backend-option", f"file={replay['answers']}"]
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert list(doc) == SWEEP_KEYS and [list(u) for u in doc["units"]] == [UNIT_KEYS, UNIT_KEYS]
    assert (doc["splits"], doc["where"], doc["counts"], doc["ignored"], doc["exit_code"]) == (
        ["shape-dev"], "local", {"done": 2}, [], 0)
    assert [(u["step"], u["status"], u["generated"], u["error"]) for u in doc["units"]] == [
        (10, "done", 4, None), (20, "done", 4, None)]
    assert doc["tokens"] == 2 * 4 * 3  # two checkpoints x four completions of three words

    text = cli(*args)
    assert text.exit_code == 0, text.output
    ids = [u["run_id"] for u in doc["units"]]
    lines = text.stdout.splitlines()
    assert re.fullmatch(r"sweep of 2 units \(local\): 2 skipped; 0 tokens in \d+\.\d s", lines[0])
    assert lines[1:4] == [f"  [skipped] {replay['ck10']} x shape-dev: run {ids[0]}",
                          f"  [skipped] {replay['ck20']} x shape-dev: run {ids[1]}", ""]
    assert lines[4] == "results:" and lines[5].split() == ["run", "checkpoint", "step", "seed", "split", "pass@1",
                                                           "±", "stderr", "n"]
    assert [ln.split() for ln in lines[7:]] == [
        [ids[0], "seed-1/checkpoint-10", "10", "1", "shape-dev", "0.750", "±", "0.250", "4"],
        [ids[1], "seed-1/checkpoint-20", "20", "1", "shape-dev", "0.750", "±", "0.250", "4"]]


def _gate(monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    """``evalgate gate`` over the fixtures: their decision runs are stored, not evaluated (no model here)."""
    monkeypatch.setattr(report_mod, "run_gate", lambda p, s, a, **k: run_gate(p, s, a, evaluate_decision=False, **k))
    return cli("gate", *args)


def test_gate_prints_its_verdict_document_or_rules_seeds_and_what_to_ship(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    policy = tmp_path / "gate.yaml"
    policy.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2, reward_hacking=False)))
    out = tmp_path / "out"
    r = _gate(monkeypatch, "--policy", str(policy), "--junit", str(out / "g.xml"), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert list(doc) == [*GATE_KEYS, "junit", "step_summary"]
    assert (doc["verdict"], doc["gate"], doc["protocol"], doc["reason"]) == ("PASS", "fx-gate", "fx@1", "pass")
    assert (doc["junit"], doc["step_summary"], doc["reused_from"], doc["broken_chain"]) == (
        str(out / "g.xml"), [], None, None)
    assert [s["train_seed"] for s in doc["seeds"]] == [1, 2]
    # best by dev pass@1: seed 1 step 30 (0.6), seed 2 step 20 (0.7); ship the higher, seed 2's
    assert [(s["best"]["step"], s["best"]["value"]) for s in doc["seeds"]] == [(30, 0.6), (20, 0.7)]
    assert doc["ship"]["checkpoint"] == str(tmp_path / "runs" / "fx-run-seed2" / "checkpoint-20")
    assert doc["stats"]["aggregate"]["mean_of_seed_means"] == pytest.approx(0.65)  # decision X1 0.6, X2 0.7

    text = _gate(monkeypatch, "--policy", str(policy))  # unchanged inputs: the stored decision is reused
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    runs = tmp_path / "runs"
    assert re.fullmatch(r"PASS: gate fx-gate \(fx@1, selection on fx-dev, decision on fx-private; stored as "
                        r"gate-\S+\)", lines[0])
    assert re.fullmatch(rf"  reused decision of gate {doc['gate_id']} from \S+: inputs unchanged, nothing read",
                        lines[1])
    rules = [ln for ln in lines if ln.startswith("  [")]
    assert rules == [f"  [{'pass' if x['passed'] else 'FAIL'}] {x['rule']}: {x['detail']}" for x in doc["rules"]]
    assert lines[2:2 + len(rules)] == rules
    assert lines[2 + len(rules)] == f"  {doc['decision_split_size']['detail']}"  # 10 items: flagged too small
    assert lines[2 + len(rules)].startswith("  WARNING: decision split fx-private: 10 items; ")
    at = 3 + len(rules)
    assert lines[at:at + 7] == [
        "  seed 1 (fx-run):",
        f"    best: step 30 pass@1 0.600  {runs / 'fx-run-seed1' / 'checkpoint-30'}",
        f"    last: step 40 pass@1 0.500  {runs / 'fx-run-seed1' / 'checkpoint-40'}",
        "  seed 2 (fx-run):",
        f"    best: step 20 pass@1 0.700  {runs / 'fx-run-seed2' / 'checkpoint-20'}",
        f"    last: step 40 pass@1 0.600  {runs / 'fx-run-seed2' / 'checkpoint-40'}",
        f"    failed: step 30  {runs / 'fx-run-seed2' / 'checkpoint-30'}: "
        + "; ".join(doc["seeds"][1]["failed"][0]["failed_reasons"])]
    assert doc["seeds"][1]["failed"][0]["failed_reasons"][0].startswith("collapse")  # 0.7 -> 0.2
    assert lines[at + 7:] == [f"ship: {runs / 'fx-run-seed2' / 'checkpoint-20'} ({doc['ship']['why']})"]
    assert doc["ship"]["why"].startswith("PASS; seed 2's best (step 20) has the highest pass@1 on fx-dev (0.700)")
    assert "the private split fx-private decides pass/fail for every seed's best together, never which seed" in \
        doc["ship"]["why"]

    failing = tmp_path / "fail.yaml"  # three seeds required, two trained: FAIL, exit 1
    failing.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=3, reward_hacking=False)))
    r = _gate(monkeypatch, "--policy", str(failing), "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["verdict"] == "FAIL"
    assert _gate(monkeypatch, "--policy", str(failing)).stdout.splitlines()[-1].startswith("ship: none (gate FAIL: ")


def test_diagnose_prints_seeds_or_a_table_and_exits_1_when_a_fail_signal_fires(tmp_path: Path) -> None:
    fx.build(tmp_path / "runs", seeds=(1, 3))
    logs = [str(tmp_path / "runs" / f"fx-run-seed{s}" / "checkpoint-40" / "trainer_state.json") for s in (1, 3)]
    r = cli("diagnose", *logs, "--seed", "1", "--seed", "3", "--json")
    assert r.exit_code == 1, r.output  # seed 3's grad_norm is NaN at step 25
    doc: dict[str, Any] = json.loads(r.stdout)
    assert list(doc) == ["seeds", "fail"] and doc["fail"] is True
    assert [list(d) for d in doc["seeds"]] == [DIAGNOSIS_KEYS, DIAGNOSIS_KEYS]
    assert [(d["label"], d["seed"], d["format"], d["steps"]) for d in doc["seeds"]] == [
        ("seed 1", 1, "trainer_state", [5, 40]), ("seed 3", 3, "trainer_state", [5, 40])]
    assert doc["seeds"][1]["worst"] == "fail" and doc["seeds"][1]["first_break"]["step"] == 25

    report = tmp_path / "d.html"
    text = cli("diagnose", *logs, "--seed", "1", "--seed", "3", "--report", str(report))
    assert text.exit_code == 1 and report.is_file()
    lines = text.stdout.splitlines()
    # one row per signal, one column per seed; seed 3's NaN grad_norm (step 25) fails, seed 1's logged completion
    # length rises over steps 31-40 (the fixture's triad)
    assert lines[0].split() == ["part", "signal", "seed", "1", "seed", "3"] and set(lines[1]) == {"-", " "}
    rows = {tuple(ln.split()[:2]): ln.split()[2:] for ln in lines[2:lines.index("")]}
    assert rows[("system", "nonfinite")] == ["ok", "FAIL", "@25", "grad_norm"]
    assert rows[("data/reward", "length_growth")] == ["warn", "@35", "ok"]
    notes = lines[lines.index("") + 1:]
    assert notes[0] == f"seed 1: {logs[0]} (trainer_state, steps 5..40)"
    assert notes[1].startswith("  first break: length_growth at step 35 (data/reward): ")
    assert notes[2] == f"seed 3: {logs[1]} (trainer_state, steps 5..40)"
    assert notes[3].startswith("  first break: nonfinite at step 25 (system): 'grad_norm' became NaN/inf")
    assert notes[4:] == [f"report: {report}"]
    r = cli("diagnose", logs[0], "--json", "--report", str(tmp_path / "one.html"))
    doc = json.loads(r.stdout)
    assert (r.exit_code, list(doc), doc["fail"], doc["report"]) == (0, ["seeds", "fail", "report"], False,
                                                                    str(tmp_path / "one.html"))


def test_the_commands_print_the_typed_results_of_the_workspace(tmp_path: Path, replay: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The library call and the command agree: ``Workspace.evaluate`` / ``sweep`` / ``gate_and_report`` /
    ``diagnose`` return typed results whose ``as_dict()`` is the command's ``--json`` document."""
    import evalgate

    ws = evalgate.Workspace.from_env()
    rb = ["--backend", "replay", "--backend-option", f"file={replay['answers']}"]
    run = ws.evaluate(replay["protocol"], replay["ck10"], "shape-dev", backend="replay",
                      backend_options={"file": str(replay["answers"])})
    assert isinstance(run, evalgate.RunRecord) and run.actor == "test-actor"
    printed = json.loads(cli("run", "--protocol", str(replay["protocol"]), "--checkpoint", str(replay["ck10"]),
                                "--split", "shape-dev", *rb, "--json").stdout)
    # a second run has its own id, time and counts (every sample cached), and its backend says whose prompts it reused
    same = ("status", "protocol", "checkpoint", "split", "effective_params", "metrics", "actor", "purpose", "version")
    assert list(printed) == list(run.as_dict()) == RUN_KEYS
    assert {k: printed[k] for k in same} == json.loads(json.dumps({k: run.as_dict()[k] for k in same}))

    swept = ws.sweep(replay["protocol"], str(replay["ck10"].parent / "checkpoint-*"), ["shape-dev"],
                     evalgate.RunOptions(backend="replay", backend_options={"file": str(replay["answers"])}))
    assert isinstance(swept, evalgate.SweepSummary) and swept.counts == {"done": 1, "skipped": 1}
    doc = json.loads(cli("sweep", "--protocol", str(replay["protocol"]), "--checkpoints",
                            str(replay["ck10"].parent / "checkpoint-*"), "--split", "shape-dev", *rb, "--json").stdout)
    assert [u["run_id"] for u in doc["units"]] == [u.run_id for u in swept.units] and list(doc) == SWEEP_KEYS
    assert list(doc["units"][0]) == list(swept.units[0].as_dict()) == UNIT_KEYS  # the typed unit dumps the same keys
    assert list(doc["protocol"]) == ["name", "version", "sha256"] and swept.protocol.path is None  # no path key
    assert (doc["protocol"]["name"], doc["protocol"]["sha256"]) == (swept.protocol.name, swept.protocol.sha256)

    built = fx.build(tmp_path / "fx", seeds=(1, 2))
    policy = tmp_path / "gate.yaml"
    policy.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2, reward_hacking=False)))
    monkeypatch.setattr(report_mod, "run_gate", lambda p, s, a, **k: run_gate(p, s, a, evaluate_decision=False, **k))
    report = ws.gate_and_report(policy, {"markdown": tmp_path / "g.md"})
    assert isinstance(report, evalgate.GateReport) and report.passed and report.files == {
        "markdown": str(tmp_path / "g.md")}
    assert list(report.as_dict()) == [*GATE_KEYS, "markdown", "step_summary"]
    again = json.loads(_gate(monkeypatch, "--policy", str(policy), "--json").stdout)  # reuses report's decision
    assert again["reused_from"]["gate_id"] == report.verdict.gate_id and again["stats"] == report.as_dict()["stats"]

    logs = [tmp_path / "fx" / "fx-run-seed2" / "checkpoint-40" / "trainer_state.json"]
    found = ws.diagnose(logs, [2])
    assert isinstance(found, evalgate.DiagnosisSummary) and found.fail is False and found.report is None
    assert json.loads(cli("diagnose", str(logs[0]), "--seed", "2", "--json").stdout) == json.loads(
        json.dumps(found.as_dict()))
