"""A decision split too small for the gate's statistics is flagged in every report format (issue 44, item 11):
an 18-row CSV gave a 3-item private split, and the gate passed ``min_improvement`` with "+0.0000, CI [+0.0000,
+0.0000]" without a word. Every format now states the smallest difference the split can detect at the policy's
confidence, and flags a split that cannot see a difference under half the metric's range."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from evalgate.core.stats import items_to_detect, minimum_detectable_difference
from evalgate.gate import load_policy, run_gate
from evalgate.gate.results import DecisionSize
from evalgate.splits import load_manifest, write_split
from evalgate.store import Store
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")

Z975, Z80 = 1.959964, 0.841621  # standard normal quantiles (tables)


def test_minimum_detectable_difference_by_hand() -> None:
    assert minimum_detectable_difference(100) == pytest.approx((Z975 + Z80) / 10, abs=1e-5)
    assert minimum_detectable_difference(3) == pytest.approx((Z975 + Z80) / math.sqrt(3), abs=1e-5)  # 1.6175
    assert minimum_detectable_difference(400, 0.9, sd=0.5) == pytest.approx((1.644854 + Z80) * 0.5 / 20, abs=1e-5)
    assert items_to_detect(0.5) == 32  # (2.8016 / 0.5)^2 = 31.4
    assert minimum_detectable_difference(32) < 0.5 <= minimum_detectable_difference(31)
    with pytest.raises(ValueError):
        minimum_detectable_difference(0)


def _gate(tmp_path: Path, private_items: int):
    """One seed whose best equals the baseline checkpoint on every private item (the issue's +0.0000, CI [0, 0])."""
    items = fx.ITEMS + [{"id": f"p{i}", "question": f"{i}*2", "answer": str(2 * i)} for i in range(40)]
    write_split("fx-dev", "dev", fx.ITEMS, {"source": "test fixture"})
    write_split("fx-private", "private", items[10:10 + private_items], {"source": "test fixture"})
    store = Store()
    store.record_protocol(*fx.PROTO, fx.HASH, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
    dev, dec = load_manifest("fx-dev").content_sha256, load_manifest("fx-private").content_sha256
    ck = tmp_path / "run" / "seed-1" / "checkpoint-10"
    ck.mkdir(parents=True)
    base = tmp_path / "base"
    base.mkdir()
    fx.add_run(store, "dev-1", "d1", ck, "fx-dev", "dev", 1, 10, [1] * 5 + [0] * 5, split_sha256=dev)
    scores = [1, 0] * (private_items // 2) + [1] * (private_items % 2)
    for run_id, digest, path, seed, step in (("dec-base", "dbase", base, None, None), ("dec-1", "d1", ck, 1, 10)):
        fx.add_run(store, run_id, digest, path, "fx-private", "private", seed, step, scores, purpose="release-gate",
                   split_sha256=dec)
    p = tmp_path / "g.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(str(base), min_improvement=0.0, reward_hacking=False,
                                                   training_guards=False)))
    return run_gate(load_policy(p), store, evaluate_decision=False), store


def test_a_three_item_decision_split_is_flagged_in_every_format(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from evalgate.commands.gate import _print_gate
    from evalgate.gate.report.outputs import write_reports

    v, store = _gate(tmp_path, 3)
    assert v.passed and v.stats is not None and v.stats.items == 3  # the verdict stands; the flag is beside it
    out = tmp_path / "out"
    doc = write_reports(v, {"html": out / "r.html", "json": out / "r.json", "junit": out / "r.xml",
                            "markdown": out / "r.md"}, store).as_dict()
    size = json.loads((out / "r.json").read_text())["decision_split_size"]
    assert (size["items"], size["too_small"], size["items_needed"]) == (3, True, 32)
    assert size["mde"] == pytest.approx((Z975 + Z80) / math.sqrt(3), abs=1e-5)
    flag = "decision split fx-private: 3 items; the smallest difference it can detect at 95% confidence with 80% " \
           "power is 1.617"  # 2.8016 / sqrt(3) = 1.6175
    assert flag in size["detail"] and "TOO SMALL" in size["detail"]
    suite = ET.parse(out / "r.xml").getroot().find("testsuite")
    assert suite is not None
    case = next(c for c in suite.findall("testcase") if c.get("name") == "decision_split_size")
    assert flag in (case.findtext("system-err") or "")
    assert flag in (out / "r.md").read_text() and "TOO SMALL" in (out / "r.md").read_text()
    html = (out / "r.html").read_text()
    assert flag in html and 'class="bad"><strong>WARNING: decision split' in html
    _print_gate(v, doc)
    assert f"  WARNING: {flag}" in capsys.readouterr().out


def test_a_large_enough_split_states_its_figure_without_a_flag(tmp_path: Path) -> None:
    from evalgate.gate.report.outputs import junit_xml, markdown_summary

    v, _ = _gate(tmp_path, 40)
    size = v.as_dict()["decision_split_size"]
    assert (size["items"], size["too_small"]) == (40, False)
    typed = v.decision_size()  # the same figures, typed: 95% confidence and 80% power, as the detail says
    assert isinstance(typed, DecisionSize) and (typed.split, typed.items, typed.confidence, typed.power,
                                                typed.too_small) == ("fx-private", 40, 0.95, 0.8, False)
    assert typed.mde == size["mde"] and list(size) == ["split", "items", "confidence", "power", "mde", "too_small",
                                                       "items_needed", "detail"]
    assert size["mde"] == pytest.approx((Z975 + Z80) / math.sqrt(40), abs=1e-5)  # 0.443
    assert size["detail"].startswith("decision split fx-private: 40 items; ") and "0.443" in size["detail"]
    assert "decision_split_size" not in [c.get("name") for c in ET.fromstring(
        junit_xml(v).split("?>", 1)[1]).iter("testcase")]
    assert "0.443" in markdown_summary(v) and "TOO SMALL" not in markdown_summary(v)
