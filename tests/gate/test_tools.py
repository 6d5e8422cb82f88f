"""The gate's tool-use rules (``max_tool_call_inflation``, ``max_tool_violation_rate``): values computed by hand
from constructed decision-run metrics and from real agentic runs of the replay backend, the fail cases, and a rule
that cannot be checked (refused before any read, or failed saying so)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.checkpoints.resolve import Checkpoint
from evalgate.core.errors import BadInput
from evalgate.gate import GatePolicy, load_policy, run_gate
from evalgate.gate.decide import rules
from evalgate.gate.results import BaselineResult, CheckpointResult, DecisionRun, SeedResult
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


def _policy(tmp_path: Path, d: dict[str, Any]) -> GatePolicy:
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(d))
    return load_policy(p)


def _tools(calls: float, violation_rate: float) -> dict[str, Any]:
    return {"tool_calls_per_sample": calls, "violation_rate": violation_rate}


# baseline 1.5 calls per sample, 10 % of samples violating; seed 1: 3.0 calls (2.0x), none violating; seed 2: 1.8
# calls (1.8 / 1.5 = 1.2x), 30 % violating
DECISION_TOOLS = {"dec-base": _tools(1.5, 0.1), "dec-1": _tools(3.0, 0.0), "dec-2": _tools(1.8, 0.3)}


def _outcomes(tmp_path: Path, tools: dict[str, dict[str, Any]] | None, **rule_values: Any) -> dict[str, Any]:
    """The rule outcomes of a gate over the fixture runs (seeds 1 and 2) with these decision tool metrics."""
    built = fx.build(tmp_path / "runs", seeds=(1, 2), decision_tools=tools)
    pol = fx.policy_dict(built["baseline"], reward_hacking=False, training_guards=False, **rule_values)
    v = run_gate(_policy(tmp_path, pol), built["store"], evaluate_decision=False)
    return {r.rule: r for r in v.rules}


def _decide(base: dict[str, Any], **per_seed: Any) -> dict[str, Any]:
    """``decide.rules`` over constructed decision runs: baseline and seeds' tool metrics, then the rule values."""
    seeds = []
    for k, t in per_seed.pop("tools").items():
        best = CheckpointResult(f"d{k}", f"ck{k}", 10, "run", f"sel{k}", "complete", 1.0, 0.0, {})
        seeds.append(SeedResult(k, "run", [best], best, best, decision=DecisionRun(f"dec{k}", {"tools": t}, f"d{k}")))
    baseline = BaselineResult("base", decision=DecisionRun("decb", {"tools": base}, "db"))
    pol = GatePolicy.model_validate({"name": "g", "protocol": "p@1", "selection_split": "s", "decision_split": "d",
                                     "baseline": {"checkpoint": "base"},
                                     "rules": {"training_guards": False, "reward_hacking": False, **per_seed}})
    return {r.rule: r for r in rules(pol, seeds, baseline, None)}


def test_inflation_and_violation_rate_by_hand_fail_then_pass(tmp_path: Path) -> None:
    out = _outcomes(tmp_path, DECISION_TOOLS, max_tool_call_inflation=1.5, max_tool_violation_rate=0.2)
    infl, viol = out["max_tool_call_inflation"], out["max_tool_violation_rate"]
    assert not infl.passed and not viol.passed
    assert infl.detail == ("tool calls per sample on fx-private / baseline's (1.500): seed 1: 2.00x (3.000), "
                           "seed 2: 1.20x (1.800); allowed <= 1.5x")
    assert viol.detail == ("share of samples with a tool violation on fx-private: seed 1: 0.000, seed 2: 0.300; "
                           "allowed <= 0.2")
    seeds = {1: DECISION_TOOLS["dec-1"], 2: DECISION_TOOLS["dec-2"]}
    out = _decide(DECISION_TOOLS["dec-base"], tools=seeds, max_tool_call_inflation=2.0, max_tool_violation_rate=0.3)
    assert out["max_tool_call_inflation"].passed and out["max_tool_violation_rate"].passed  # limits are inclusive


def test_a_baseline_without_calls() -> None:
    """0 calls vs a baseline's 0 is no inflation (1x); any call vs 0 is infinite inflation."""
    out = _decide(_tools(0.0, 0.0), tools={1: _tools(0.0, 0.0)}, max_tool_call_inflation=1.0)
    assert out["max_tool_call_inflation"].passed and "seed 1: 1.00x" in out["max_tool_call_inflation"].detail
    out = _decide(_tools(0.0, 0.0), tools={1: _tools(0.5, 0.0)}, max_tool_call_inflation=100.0)
    assert not out["max_tool_call_inflation"].passed and "seed 1: infx" in out["max_tool_call_inflation"].detail


def test_runs_without_tool_metrics_fail_as_not_checkable(tmp_path: Path) -> None:
    """The protocol file is absent here (stored runs only), so the gate cannot refuse up front: the rules fail and
    say why; they never pass silently."""
    out = _outcomes(tmp_path, None, max_tool_call_inflation=1.5, max_tool_violation_rate=0.0)
    for rule in ("max_tool_call_inflation", "max_tool_violation_rate"):
        assert not out[rule].passed and not out[rule].checkable and out[rule].label == "NOT CHECKABLE (FAIL)"
        assert out[rule].detail.startswith("not checkable: the fx-private runs of seed 1, seed 2")
        assert "protocol fx@1 offers no tools" in out[rule].detail
    assert "the baseline" in out["max_tool_call_inflation"].detail


def test_tool_rules_on_a_protocol_without_tools_are_refused_before_any_read(tmp_path: Path) -> None:
    from evalgate.protocol.spec import load_protocol, lock_document

    built = fx.build(tmp_path / "runs")
    proto = tmp_path / "fx.yaml"
    proto.write_text(yaml.safe_dump({"name": "fx", "version": "1", "prompt": {"template": "{{ question }}"},
                                     "scorer": {"name": "exact", "options": {"answer_field": "answer"}}}))
    proto.with_name("fx.yaml.lock").write_text(json.dumps(lock_document(load_protocol(proto))))
    rows_before = len(built["store"].access_rows())
    pol = fx.policy_dict(built["baseline"], max_tool_violation_rate=0.1)
    pol["protocol_file"] = str(proto)
    with pytest.raises(BadInput, match=r"rules.max_tool_violation_rate cannot be checked: protocol fx@1 .* offers no "
                                       "tools") as e:
        run_gate(_policy(tmp_path, pol), built["store"])
    assert e.value.exit_code == 2
    assert len(built["store"].access_rows()) == rows_before


def test_inflation_needs_a_baseline_checkpoint(tmp_path: Path) -> None:
    d = fx.policy_dict("b", max_tool_call_inflation=1.5)
    d["baseline"] = {"value": 0.5}
    with pytest.raises(BadInput, match="rules.max_tool_call_inflation needs a baseline checkpoint"):
        _policy(tmp_path, d)


# -- the metrics of real agentic runs feed the rules -------------------------------------------------------------
def _call(name: str, **args: Any) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'


def _agentic_run(tmp_path: Path, proto: Path, name: str, turns: dict[str, list[str]]) -> dict[str, Any]:
    replay = tmp_path / f"{name}.jsonl"
    replay.write_text("".join(json.dumps({"item_id": iid, "turn": t, "text": text}) + "\n"
                              for iid, texts in turns.items() for t, text in enumerate(texts)))
    d = tmp_path / name
    d.mkdir()
    ckpt = Checkpoint(path=d, kind="hf", digest=name[0] * 64, model_dir=d)
    return evaluate(proto, ckpt, "tools-split", RunOptions(backend="replay", backend_options={"file": str(replay)},
                                                           progress=False), Store())


def test_rules_read_the_metrics_an_agentic_run_stores(tmp_path: Path) -> None:
    """Candidate: item a makes two calculator calls, item b one python call (not allowed: a violation) -> 3 calls
    over 2 samples = 1.5 a sample, violation rate 1/2. Baseline: one call on a, none on b -> 0.5 a sample.
    Inflation 1.5 / 0.5 = 3x."""
    doc = {"name": "tools-gate", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
           "sampling": {"max_tokens": 16}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
           "extraction": {"rule": "gsm8k"},
           "tools": {"format": "hermes", "offered": [{"name": "calculator"}, {"name": "python"}],
                     "allowed": ["calculator"], "max_calls": 3}}
    proto = tmp_path / "tools-gate.yaml"
    proto.write_text(yaml.safe_dump(doc))
    freeze(proto, Store)
    write_split("tools-split", "smoke", [{"id": "a", "prompt": "2+2?", "answer": "4"},
                                         {"id": "b", "prompt": "1+2?", "answer": "3"}], {"source": "test"})
    cand = _agentic_run(tmp_path, proto, "cand", {
        "a": [_call("calculator", expression="1+1") + _call("calculator", expression="2+2"), "The answer is 4"],
        "b": [_call("python", code="print(3)"), "The answer is 3"]})
    base = _agentic_run(tmp_path, proto, "base", {"a": [_call("calculator", expression="2+2"), "The answer is 4"],
                                                  "b": ["The answer is 3"]})
    tools = {1: cand["metrics"]["tools"]}
    out = _decide(base["metrics"]["tools"], tools=tools, max_tool_call_inflation=2.9, max_tool_violation_rate=0.4)
    assert "seed 1: 3.00x (1.500)" in out["max_tool_call_inflation"].detail and "(0.500)" in \
        out["max_tool_call_inflation"].detail
    assert not out["max_tool_call_inflation"].passed
    assert "seed 1: 0.500" in out["max_tool_violation_rate"].detail and not out["max_tool_violation_rate"].passed
    out = _decide(base["metrics"]["tools"], tools=tools, max_tool_call_inflation=3.0, max_tool_violation_rate=0.5)
    assert out["max_tool_call_inflation"].passed and out["max_tool_violation_rate"].passed
