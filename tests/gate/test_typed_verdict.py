"""A verdict's parts are typed (issue 43, "typed results"): the runs' metrics are ``Metrics``, the checkpoint to
ship a ``Ship``; a verdict document stored by an older evalgate (``data/verdict_v1.json``, written by hand in the
shape ``dataclasses.asdict`` gave before: no ``version``, every part a plain dict) still loads, re-stores as the same
document and renders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.core.results import Metrics
from evalgate.gate.history import dump_verdict, load_verdict
from evalgate.gate.report.outputs import markdown_summary, render_html
from evalgate.gate.results import (
    CalibrationRow,
    ProxyCheckpoint,
    ProxyEntry,
    RewardAudit,
    Ship,
    SuspiciousSample,
)

OLD = Path(__file__).parent / "data" / "verdict_v1.json"


@pytest.fixture
def old() -> dict[str, Any]:
    return json.loads(OLD.read_text(encoding="utf-8"))


def test_an_old_document_loads_typed(old: dict[str, Any]) -> None:
    v = load_verdict(old)
    assert v.version == 1
    (seed,) = v.seeds
    assert seed.decision is not None and isinstance(seed.decision.metrics, Metrics)
    assert seed.decision.metrics.pass_at[1].value == 0.6 and seed.decision.metrics.pass_at[1].stderr == 0.05
    assert seed.best is not None and isinstance(seed.best.metrics, Metrics)
    assert seed.best.metrics["mean_completion_tokens"] == 12.5
    assert v.baseline is not None and v.baseline.dev is not None and isinstance(v.baseline.dev.metrics, Metrics)
    assert v.ship() == Ship("/ck/s1/checkpoint-10", "d10", 1, 10, v.ship().why)
    (audit,) = v.reward_audit
    assert isinstance(audit, RewardAudit) and (audit.checkpoint, audit.step, audit.checked) == (
        "/ck/s1/checkpoint-10", 10, 2)
    assert audit.suspicious == [SuspiciousSample("q1", 0, ["reward-human mismatch"], 1.0, 0.0, 7, None, None,
                                                 "the answer is 9")]
    (cal,) = v.calibration
    assert isinstance(cal, CalibrationRow) and (cal.protocol, cal.role, cal.n_samples, cal.levels) == (
        "judge@1", "proxy", 3, 5)
    (proxy,) = v.proxies
    assert isinstance(proxy, ProxyEntry) and proxy.bradley_terry is None
    assert proxy.checkpoints == [ProxyCheckpoint("baseline", "/ck/base", "dbase", None, None, None, "rm-base", {
        "samples": 4, "by_status": {"scored": 4}, "mean_score": 0.25, "mean_score_stderr": 0.1, "reward_mean": -0.5,
        "reward_mean_stderr": 0.2, "reward_errors": 0})]
    assert v.ship().why.startswith("PASS; seed 1's best (step 10) has the highest pass@1 on add-dev (0.5")


def test_an_old_document_stores_again_as_it_was(old: dict[str, Any]) -> None:
    again = json.loads(json.dumps(dump_verdict(load_verdict(old))))
    for part in ("rules", "seeds", "baseline", "samples", "reward_audit", "calibration", "proxies", "gate_id"):
        assert again[part] == old[part], part
    assert again["version"] == 1


def test_an_old_document_renders(old: dict[str, Any]) -> None:
    v = load_verdict(old)
    doc = v.as_dict()
    assert doc["seeds"][0]["decision"]["metrics"] == old["seeds"][0]["decision"]["metrics"]
    assert doc["seeds"][0]["best"]["metrics"] == old["seeds"][0]["best"]["metrics"]
    assert doc["baseline"]["dev"] == old["baseline"]["dev"]
    assert doc["ship"] == {"checkpoint": "/ck/s1/checkpoint-10", "digest": "d10", "train_seed": 1, "step": 10,
                           "why": v.ship().why}
    # the report's text of a reward audit drops the completion (the JSON document never holds item text)
    assert "text" not in doc["reward_audit"][0]["suspicious"][0]
    assert doc["reward_audit"][0]["suspicious"][0]["reasons"] == ["reward-human mismatch"]
    assert doc["calibration"] == old["calibration"] and doc["proxies"] == old["proxies"]
    md = markdown_summary(v)
    assert "**Ship:** `/ck/s1/checkpoint-10`" in md and "judge@1" in md and "rm@1" in md
    assert "/ck/s1/checkpoint-10" in render_html(v)
