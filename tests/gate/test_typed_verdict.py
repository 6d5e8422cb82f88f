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
    AgreementCI,
    AuditRule,
    AuditSamples,
    BinaryKappa,
    BradleyTerry,
    BradleyTerryNote,
    BradleyTerryPlayer,
    CalibrationRow,
    JudgeScores,
    PairwiseScores,
    ProxyCheckpoint,
    ProxyEntry,
    ProxyScores,
    RewardAgreement,
    RewardAudit,
    Ship,
    SpearmanCI,
    SuspiciousSample,
)
from evalgate.rlhf.reward_rules import RewardAuditRules

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
    # the statistics inside the rows are typed too (the values as data/verdict_v1.json holds them)
    assert audit.agreement == RewardAgreement("rated-1", "automatic score", 2, ["ann"], SpearmanCI(2, None, None),
                                              BinaryKappa(None, 0.5, [[0, 1], [0, 1]]), None)
    assert audit.rule == AuditRule(None, "rule off (reward_audit.min_reward_human_spearman not set)")
    assert audit.rules == RewardAuditRules(reward_min=0.5, human_max=0.5, length_ratio=1.5, repetition_max=0.3)
    assert audit.suspicious == [SuspiciousSample("q1", 0, ["reward-human mismatch"], 1.0, 0.0, 7, None, None,
                                                 "the answer is 9")]
    (cal,) = v.calibration
    assert isinstance(cal, CalibrationRow) and (cal.protocol, cal.role, cal.n_samples, cal.levels) == (
        "judge@1", "proxy", 3, 5)
    assert cal.spearman == SpearmanCI(3, 1.0, [1.0, 1.0])
    assert cal.kappa == cal.weighted_kappa == cal.alpha == AgreementCI(1.0, [1.0, 1.0])
    assert v.samples == AuditSamples() and not v.samples
    (proxy,) = v.proxies
    assert isinstance(proxy, ProxyEntry) and proxy.bradley_terry is None
    assert proxy.checkpoints == [ProxyCheckpoint("baseline", "/ck/base", "dbase", None, None, None, "rm-base",
                                                 ProxyScores(samples=4, by_status={"scored": 4}, mean_score=0.25,
                                                             mean_score_stderr=0.1, reward_mean=-0.5,
                                                             reward_mean_stderr=0.2, reward_errors=0))]
    assert proxy.checkpoints[0].scores.judge is None  # a reward model: no judge numbers, and none in the document
    assert "judge" not in proxy.checkpoints[0].as_dict()
    assert v.ship().why.startswith("PASS; seed 1's best (step 10) has the highest pass@1 on add-dev (0.5")


def test_an_old_document_stores_again_as_it_was(old: dict[str, Any]) -> None:
    again = json.loads(json.dumps(dump_verdict(load_verdict(old))))
    for part in ("rules", "seeds", "baseline", "samples", "reward_audit", "calibration", "proxies", "gate_id"):
        assert json.dumps(again[part]) == json.dumps(old[part]), part  # the same keys in the same order
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


def test_the_rows_read_by_key_for_one_release_with_a_warning(old: dict[str, Any]) -> None:
    v = load_verdict(old)
    (cal,) = v.calibration
    (audit,) = v.reward_audit
    with pytest.deprecated_call(match=r"SpearmanCI\['rho'\] is deprecated"):
        assert cal.spearman["rho"] == 1.0
    with pytest.deprecated_call(match=r"read \.spearman "):
        assert audit.agreement["spearman"] == {"n": 2, "rho": None, "ci": None}
    with pytest.deprecated_call():
        assert audit.rule["passed"] is None
    (proxy,) = v.proxies
    with pytest.deprecated_call(match=r"ProxyScores\['reward_mean'\]"):
        assert proxy.checkpoints[0].scores["reward_mean"] == -0.5
    with pytest.deprecated_call(match="read samples.longest"):
        assert v.samples["longest"] == []
    with pytest.deprecated_call(match=r"samples.values\(\) is deprecated"):
        assert v.samples.values() == []  # as the empty dict gave them


# a pairwise judge proxy's entry as gate.proxies wrote it, by hand: a seed's row with the judge's numbers (a run
# stored before lc_standard_error and lc_extreme_change were kept: absent), and its Bradley-Terry ratings
JUDGE_ENTRY = {
    "protocol": "judge@1", "protocol_hash": "h-judge", "scorer": "judge", "split": "add-dev", "checkpoints": [
        {"role": "seed", "path": "/ck/s1/checkpoint-10", "digest": "d10", "train_run": "run", "train_seed": 1,
         "step": 10, "run_id": "j-10", "samples": 4, "by_status": {"judged": 4}, "mean_score": 0.75,
         "mean_score_stderr": 0.144,
         "judge": {"mode": "pairwise", "judged": 4, "unparseable": 0, "baseline": {"checkpoint": "dbase"},
                   "pairwise": {"win_rate": 0.75, "low": 0.5, "high": 1.0, "lc_win_rate": 0.7,
                                "position_flip_rate": 0.0, "first_position_rate": 0.5, "items": 4,
                                "parsed_items": 4, "unparseable_items": 0, "unparseable_as": "loss", "wins": 4,
                                "ties": 4, "losses": 0}}}],
    "bradley_terry": {"anchor": "baseline", "anchor_rating": 1000.0, "scale": 400.0, "base": 10.0, "games": 8,
                      "confidence": 0.95, "resamples": 1000, "players": [
                          {"player": "seed 1 best (step 10)", "rating": 1190.85, "low": 1100.0, "high": None,
                           "win_rate_vs_anchor": 0.75, "games": 8, "bound": None, "role": "seed", "train_seed": 1,
                           "step": 10, "run_id": "j-10"}]}}


def test_a_judge_proxys_numbers_and_bradley_terry_ratings_load_typed_and_dump_as_they_were() -> None:
    entry = ProxyEntry.from_document(json.loads(json.dumps(JUDGE_ENTRY)))
    (row,) = entry.checkpoints
    assert row.scores == ProxyScores(samples=4, by_status={"judged": 4}, mean_score=0.75, mean_score_stderr=0.144,
                                     judge=JudgeScores(mode="pairwise", judged=4, unparseable=0,
                                                       baseline={"checkpoint": "dbase"}, pairwise=PairwiseScores(
                                                           win_rate=0.75, low=0.5, high=1.0, lc_win_rate=0.7,
                                                           position_flip_rate=0.0, first_position_rate=0.5, items=4,
                                                           parsed_items=4, unparseable_items=0, unparseable_as="loss",
                                                           wins=4, ties=4, losses=0)))
    assert row.scores.reward_mean is None and row.scores.judge is not None and row.scores.judge.mean_rating is None
    assert entry.bradley_terry == BradleyTerry("baseline", 1000.0, 400.0, 10.0, 8, 0.95, 1000, [BradleyTerryPlayer(
        "seed 1 best (step 10)", 1190.85, 1100.0, None, 0.75, 8, None, "seed", 1, 10, "j-10")])
    # the same document, byte for byte: no key added (the absent lc fields, a reward model's), an int stays an int
    assert json.dumps(entry.as_dict()) == json.dumps(JUDGE_ENTRY)
    noted = {**JUDGE_ENTRY, "bradley_terry": {"note": "no Bradley-Terry rating: the judge runs of seed 1 hold none"}}
    again = ProxyEntry.from_document(noted)
    assert again.bradley_terry == BradleyTerryNote("no Bradley-Terry rating: the judge runs of seed 1 hold none")
    assert again.as_dict()["bradley_terry"] == noted["bradley_terry"]
