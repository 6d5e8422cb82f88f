"""Every check that needs no private data runs before the gate's first private read (issue 46, item 5): an
uncalibrated proxy, a tripped training-log guard, a reward-hacking triad fail the gate with no private read spent.
Before, the gate reserved and read the baseline and each seed's best (3 of the 4 reads of the budget) and failed on
calibration afterwards."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.gate.report.outputs import write_reports
from evalgate.store import AccessRow
from tests import gate_fixtures as fx
from tests.rlhf.test_calibration import gate_verdict

pytestmark = pytest.mark.usefixtures("memory_store")


def _private_rows(store) -> list[AccessRow]:
    return [r for r in store.access_rows("fx-private") if r.purpose == "release-gate"]


def test_an_uncalibrated_proxy_fails_with_no_private_read(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    v = gate_verdict(tmp_path, built, None)  # a reward model's mean_score, no min_proxy_agreement
    rules = {r.rule: r for r in v.rules}
    assert not v.passed and not rules["proxy_calibrated"].passed
    assert "not calibrated" in rules["proxy_calibrated"].detail
    rows = _private_rows(built["store"])
    assert [r.outcome for r in rows] == ["result"]  # the verdict's uncounted row only: nothing read or reserved
    assert v.stats is None and all(s.decision is None for s in v.seeds)
    assert v.decision_not_read is not None and "proxy_calibrated" in v.decision_not_read
    assert "min_improvement" not in rules  # a decision-split rule is not applied without its read


def test_a_training_log_fault_fails_before_the_private_split(tmp_path: Path) -> None:
    """Seed 1's triad at step 40 (tests/gate_fixtures.py) fails ``reward_hacking`` on dev runs and the log."""
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_improvement=0.0)))
    v = run_gate(load_policy(p), built["store"], evaluate_decision=False)
    assert [r.rule for r in v.rules if not r.passed] == ["reward_hacking"]
    assert [r.outcome for r in _private_rows(built["store"])] == ["result"]
    out = tmp_path / "out"
    write_reports(v, {"html": out / "r.html", "json": out / "r.json", "junit": out / "r.xml",
                      "markdown": out / "r.md"}, built["store"])
    why = ("reward_hacking failed on data that is not private, so the gate failed before reading fx-private: no "
           "private read spent")
    assert json.loads((out / "r.json").read_text())["decision_not_read"] == why
    assert why in (out / "r.md").read_text() and why in (out / "r.html").read_text()
    suite = ET.parse(out / "r.xml").getroot().find("testsuite")
    assert suite is not None
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["decision_not_read"] == why


def test_a_gate_whose_early_rules_pass_reads_as_before(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_improvement=0.0, reward_hacking=False)))
    v = run_gate(load_policy(p), built["store"], evaluate_decision=False)
    assert v.decision_not_read is None and v.stats is not None
    assert sum(r.outcome == "read" for r in _private_rows(built["store"])) == 3  # baseline + 2 seeds' best
