"""A rule that can check nothing says so and fails, unless the policy sets ``rules.accept_not_checkable`` (issue 46,
item 7): one setting and one default for every rule, shown in every report format. Before, with no training log
the log-based ``reward_hacking`` passed ("not checkable" in its detail) while the reward-model triad failed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.gate.results import Verdict
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")


def _gate(tmp_path: Path, built: dict, **rules: object) -> Verdict:
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], **rules)))
    return run_gate(load_policy(p), built["store"], evaluate_decision=False)


def _without_logs(tmp_path: Path) -> dict:
    """The fixture's two seeds (best checkpoints 30 and 20, no guard trips in their logs), their training logs
    deleted."""
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    for f in (tmp_path / "runs").rglob("trainer_state.json"):
        f.unlink()
    return built


def test_both_reward_hacking_rules_fail_without_anything_to_check(tmp_path: Path) -> None:
    built = _without_logs(tmp_path)
    v = _gate(tmp_path, built, reward_model_protocol="rm@1")  # no rm@1 run exists either
    rules = {r.rule: r for r in v.rules}
    for name in ("training_guards", "reward_hacking", "rlhf_reward_hacking"):
        r = rules[name]
        assert (r.passed, r.checkable, r.outcome, r.label) == (False, False, "not_checkable", "NOT CHECKABLE (FAIL)")
        assert r.detail.startswith("not checkable: ") and "rules.accept_not_checkable" in r.detail, r.detail
    assert "seed 1 (no training reward logged); seed 2 (no training reward logged)" in rules["reward_hacking"].detail
    assert "seed 1 (no training log), seed 2 (no training log)" in rules["training_guards"].detail
    assert not v.passed
    doc = v.as_dict()
    assert (doc["accept_not_checkable"], doc["not_checkable"]) == (
        False, ["training_guards", "reward_hacking", "rlhf_reward_hacking"])

    v = _gate(tmp_path, built, reward_model_protocol="rm@1", accept_not_checkable=True)
    rules = {r.rule: r for r in v.rules}
    for name in ("training_guards", "reward_hacking", "rlhf_reward_hacking"):
        assert (rules[name].passed, rules[name].label) == (True, "not checkable (accepted)")
        assert "accepted (rules.accept_not_checkable: true)" in rules[name].detail
    assert v.passed


def test_a_seed_the_triad_can_check_is_checked(tmp_path: Path) -> None:
    """With the logs: seed 1's triad at step 40 fails the rule (checked, not "not checkable")."""
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    r = {x.rule: x for x in _gate(tmp_path, built).rules}["reward_hacking"]
    assert (r.passed, r.checkable) == (False, True) and r.detail.startswith("seed 1: triad at step 40")


def test_a_seed_without_a_triad_passes_with_the_steps_checked(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(2,))
    r = {x.rule: x for x in _gate(tmp_path, built).rules}["reward_hacking"]
    assert (r.passed, r.checkable, r.detail) == (True, True, "no triad over 3 dev checkpoint step(s)")


def test_a_missing_behaviour_metric_is_not_read_as_zero(tmp_path: Path) -> None:
    """A decision run without ``truncation_rate`` (a log-likelihood scorer generates nothing) used to count as 0
    and pass ``max_truncation_rate``."""
    built = fx.build(tmp_path / "runs", seeds=(2,))
    store = built["store"]
    run = store.runs(run_id="dec-2")[0]
    metrics = {k: v for k, v in run.metrics.items() if k != "truncation_rate"}
    with store.connect() as con:
        con.execute("UPDATE runs SET metrics = ? WHERE run_id = 'dec-2'", [json.dumps(metrics)])
    r = {x.rule: x for x in _gate(tmp_path, built, max_truncation_rate=0.05, max_repetition=0.5).rules}
    assert (r["max_truncation_rate"].passed, r["max_truncation_rate"].checkable) == (False, False)
    assert "the fx-private runs of seed 2 hold no truncation_rate" in r["max_truncation_rate"].detail
    assert (r["max_repetition"].passed, r["max_repetition"].checkable) == (True, True)


def test_the_reward_audit_rule_without_a_rated_run_is_not_checkable(tmp_path: Path) -> None:
    """``reward_audit.min_reward_human_spearman`` set and no best checkpoint rated: before, no rule at all."""
    built = fx.build(tmp_path / "runs", seeds=(2,))
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump({**fx.policy_dict(built["baseline"]),
                                 "reward_audit": {"min_reward_human_spearman": 0.3}}))
    r = {x.rule: x for x in run_gate(load_policy(p), built["store"], evaluate_decision=False).rules}
    assert (r["reward_human_spearman"].passed, r["reward_human_spearman"].checkable) == (False, False)
    assert "no rated run" in r["reward_human_spearman"].detail


@pytest.mark.parametrize("accept", [False, True])
def test_every_report_format_shows_not_checkable_and_the_setting(tmp_path: Path, accept: bool) -> None:
    from evalgate.gate.report.outputs import write_reports

    built = _without_logs(tmp_path)
    v = _gate(tmp_path, built, accept_not_checkable=accept, training_guards=False)
    out = tmp_path / "out"
    write_reports(v, {"html": out / "r.html", "json": out / "r.json", "junit": out / "r.xml",
                      "markdown": out / "r.md"}, built["store"])
    label = "not checkable (accepted)" if accept else "NOT CHECKABLE (FAIL)"
    doc = json.loads((out / "r.json").read_text())
    rule = next(r for r in doc["rules"] if r["rule"] == "reward_hacking")
    assert (rule["outcome"], rule["checkable"], rule["passed"], rule["label"]) == ("not_checkable", False, accept,
                                                                                   label)
    assert (doc["accept_not_checkable"], doc["not_checkable"], doc["verdict"]) == (
        accept, ["reward_hacking"], "PASS" if accept else "FAIL")
    md = (out / "r.md").read_text()
    assert f"| reward_hacking | {label if accept else f'**{label}**'} | not checkable: seed 1" in md
    assert f"(rules.accept_not_checkable: {str(accept).lower()})" in md
    html = (out / "r.html").read_text()
    assert f"<td>reward_hacking</td><td class=\"{'ok' if accept else 'bad'}\">{label}</td>" in html
    assert f"(rules.accept_not_checkable: {str(accept).lower()})" in html
    suite = ET.parse(out / "r.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["accept_not_checkable"] == str(accept).lower()
    case = next(c for c in suite.findall("testcase") if c.get("name") == "reward_hacking")
    if accept:
        assert case.find("failure") is None and case.find("skipped") is not None
        assert suite.get("skipped") == "1"
    else:
        failure = case.find("failure")
        assert failure is not None and failure.get("type") == "GateRuleNotCheckable"
        assert suite.get("skipped") == "0"
