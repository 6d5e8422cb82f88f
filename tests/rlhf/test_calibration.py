"""The gate rule ``min_proxy_agreement``: a proxy's metric (a reward model's, an LLM judge's) decides a release only
when the proxy agrees with people on the human-audit tier (real store, real rating batches; rho computed by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from evalgate.gate import Verdict, load_policy, run_gate
from evalgate.human import rating
from evalgate.rlhf.calibration import calibration_rule
from evalgate.splits import write_split
from evalgate.store import Store
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")

ITEMS = [{"id": f"q{i}", "question": f"{i}?"} for i in range(5)]
HUMAN = {"q0": 1, "q1": 3, "q2": 1, "q3": 2, "q4": 5}  # scale 1-5 -> 0, 0.5, 0, 0.25, 1
AUTO = {"q0": 1.0, "q1": 1.0, "q2": 0.0, "q3": 0.0, "q4": 1.0}
PROTOCOL = """\
name: fx
version: "1"
prompt: {{template: "{{{{ question }}}}"}}
scorer:
  name: {scorer}
  options: {options}
"""
RM = "{reward_model: {checkpoint: /rm, digest: 'blake3:00'}, prompt_field: question}"
JUDGE = ("{mode: pointwise, judge: {backend: openai, model: a-judge}, template: 'Rate {answer} to {question} for "
         "{rubric}: [[n]]', rubric: helpfulness, question_field: question, parse: '\\[\\[(\\d+)\\]\\]', "
         "scale: [1, 10], verdicts: null, sampling: {temperature: 0, max_tokens: 8, seed: 0}}")
# a judge that ranks the five samples almost as the rater does (scores (rating - 1) / 9 of ratings 1, 5.5, 1.9, 3.7, 10)
JUDGE_AUTO = {"q0": 0.0, "q1": 0.5, "q2": 0.1, "q3": 0.3, "q4": 1.0}


def rated_audit_run(st: Store, run_id: str, protocol: tuple[str, str] = ("cal", "1"),
                    auto: dict[str, float] = AUTO, status: str = "scored") -> None:
    """A complete human-audit run of ``protocol`` with the scores ``auto``, rated ``HUMAN`` by one rater."""
    if st.protocol_resolved(*protocol) is None:
        st.record_protocol(*protocol, "h", {"prompt": {"template": "{{ question }}", "response_prefix": None}})
    h = st.protocol_resolved(*protocol)[0]
    st.create_run({"run_id": run_id, "protocol_name": protocol[0], "protocol_version": protocol[1],
                   "protocol_hash": h, "checkpoint_digest": "ck", "checkpoint_path": "/ck", "split": "ha",
                   "tier": "human-audit", "split_sha256": "x", "sampling_seed": 1, "backend": "hf"})
    prompts = {f"p{i}": f"prompt {i}" for i in AUTO}
    st.put_run_prompts(run_id, [{"item_id": i, "prompt_sha256": f"p{i}", "prompt_tokens": 2, "bos_count": 1,
                                 "bos_added": False, "system_merged": False} for i in AUTO], prompts)
    st.put_generations("ck", h, [{"item_id": i, "sample_index": 0, "seed": 7, "prompt_sha256": f"p{i}",
                                    "text": f"completion {i}", "completion_tokens": 3, "finish_reason": "stop"}
                                   for i in AUTO], prompts)
    st.finish_run({"run_id": run_id, "metrics": {}, "counts": {}, "wall_s": 1.0},
                  [{"item_id": i, "sample_index": 0, "seed": 7, "score": s, "status": status, "cached": False,
                    "behavior": {}} for i, s in auto.items()])
    b = rating.create_batch(run_id, samples=5, store=st)["batch_id"]
    keys = {it.item_id: it.sample_key for it in st.batch_items(b)}
    for item, score in HUMAN.items():
        rating.submit(st, "ann", b, rating.issue_form_token(st, "ann"), keys[item], str(score))


def gate_verdict(tmp_path: Path, st_built: dict, threshold: float | None, scorer: str = "reward_model",
                 options: str = RM) -> Verdict:
    (tmp_path / "fx.yaml").write_text(PROTOCOL.format(scorer=scorer, options=options))
    pol = fx.policy_dict(st_built["baseline"], min_improvement=0.0, confidence=0.9, reward_hacking=False,
                         min_proxy_agreement=threshold)
    pol.update(protocol_file="fx.yaml", metric="mean_score")  # a proxy's samples are never 'correct': no pass@1
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(pol))
    return run_gate(load_policy(path), st_built["store"], evaluate_decision=False)


def gate(tmp_path: Path, st_built: dict, threshold: float | None, scorer: str = "reward_model",
         options: str = RM) -> dict:
    return {r.rule: r for r in gate_verdict(tmp_path, st_built, threshold, scorer, options).rules}


@pytest.fixture
def built(tmp_path: Path) -> dict:
    b = fx.build(tmp_path / "runs", seeds=(1, 2))
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    return b


def test_the_gate_refuses_an_uncalibrated_reward_model(tmp_path: Path, built: dict) -> None:
    rules = gate(tmp_path, built, 0.4)
    assert not rules["proxy_calibrated"].passed
    assert "no human-rated sample of a fx@1 run on a human-audit split" in rules["proxy_calibrated"].detail


def _policy(tmp_path: Path, threshold: float | None, scorer: str = "reward_model", options: str = RM) -> Any:
    (tmp_path / "cal.yaml").write_text(PROTOCOL.format(scorer=scorer, options=options).replace("name: fx", "name: cal"))
    return SimpleNamespace(rules=SimpleNamespace(min_proxy_agreement=threshold), protocol="cal@1",
                           protocol_file=str(tmp_path / "cal.yaml"), bootstrap_resamples=2000)


def test_the_rule_passes_or_fails_on_the_audit_tier_rho(tmp_path: Path, home: Path) -> None:
    st = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    assert calibration_rule(st, _policy(tmp_path, 0.4))[1] is False  # nothing rated yet
    rated_audit_run(st, "ha-rm")
    rated_audit_run(st, "other", ("p", "1"))  # another protocol's ratings do not count
    # auto 1,1,0,0,1 vs human 0,.5,0,.25,1: ranks 4,4,1.5,1.5,4 and 1.5,4,1.5,3,5; centred products sum 3.75,
    # sums of squares 7.5 and 9.5: rho = 3.75 / sqrt(71.25) = 0.444
    name, passed, detail = calibration_rule(st, _policy(tmp_path, 0.4))
    assert (name, passed) == ("proxy_calibrated", True)
    assert "reward_model-human Spearman rho 0.444" in detail and "over 5 human-audit samples (1 run(s))" in detail
    assert calibration_rule(st, _policy(tmp_path, 0.5))[1] is False
    assert calibration_rule(st, _policy(tmp_path, None))[1] is False  # no threshold: an uncalibrated proxy


def test_audit_agreement_pools_two_runs_and_bootstraps_only_the_pooled_samples(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rated human-audit runs of one protocol are pooled (10 samples); rho and its percentile CI are those of
    scipy's spearmanr on the pooled pairs and on each seeded resample of them (the constant resamples dropped), and
    the only bootstrap computed is the pooled one (each run's own was computed and thrown away before)."""
    import numpy as np
    from scipy.stats import spearmanr

    from evalgate.human import agreement
    from evalgate.rlhf.calibration import audit_agreement

    st = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    rated_audit_run(st, "ha-rm")
    rated_audit_run(st, "ha-judge", auto=JUDGE_AUTO)
    calls: list[int] = []
    real = agreement.spearman_ci

    def counted(*args: Any, **kwargs: Any) -> dict:
        calls.append(len(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(agreement, "spearman_ci", counted)
    found = audit_agreement(st, "cal@1", resamples=300)
    assert calls == [10]
    assert (found["runs"], found["n_samples"]) == (["ha-rm", "ha-judge"], 10)
    human = [(HUMAN[f"q{i}"] - 1) / 4 for i in range(5)] * 2
    auto = [AUTO[f"q{i}"] for i in range(5)] + [JUDGE_AUTO[f"q{i}"] for i in range(5)]
    a, h = np.array(auto), np.array(human)  # in the order the runs' batches were made, each run's items in order
    assert found["spearman"]["rho"] == pytest.approx(spearmanr(a, h).statistic, abs=1e-12)
    idx = np.random.default_rng(0).integers(0, 10, size=(300, 10))
    stats = [spearmanr(a[r], h[r]).statistic for r in idx if np.ptp(a[r]) > 0 and np.ptp(h[r]) > 0]
    assert found["spearman"]["ci"] == pytest.approx([np.quantile(stats, 0.025), np.quantile(stats, 0.975)],
                                                    abs=1e-12)


def test_a_verified_scorer_is_not_a_proxy(tmp_path: Path, built: dict) -> None:
    rule = gate(tmp_path, built, 0.9, scorer="exact", options="{}")["proxy_calibrated"]
    assert rule.passed and "exact is not a proxy" in rule.detail


def test_the_judge_is_a_proxy_in_the_registry() -> None:
    from evalgate.scoring.base import SCORERS

    assert SCORERS["judge"].proxy and SCORERS["reward_model"].proxy
    assert not any(SCORERS[name].proxy for name in ("exact", "math", "humaneval", "refusal", "reward_preference"))


def test_a_judge_metric_never_decides_uncalibrated(tmp_path: Path, built: dict) -> None:
    rule = gate(tmp_path, built, 0.4, scorer="judge", options=JUDGE)["proxy_calibrated"]
    assert not rule.passed and "no human-rated sample of a fx@1 run" in rule.detail
    rule = gate(tmp_path, built, None, scorer="judge", options=JUDGE)["proxy_calibrated"]  # no threshold at all
    assert not rule.passed and "sets no rules.min_proxy_agreement" in rule.detail
    rule = gate(tmp_path, built, None, scorer="reward_model")["proxy_calibrated"]  # the same for a reward model
    assert not rule.passed and "reward_model is a proxy" in rule.detail
    assert "proxy_calibrated" not in gate(tmp_path, built, None, scorer="exact", options="{}")  # off for a verified one


def test_a_judge_that_agrees_with_the_raters_may_decide(tmp_path: Path, built: dict) -> None:
    rated_audit_run(built["store"], "ha-judge", ("fx", "1"), JUDGE_AUTO, status="judged")
    # judge 0,.5,.1,.3,1 vs human 0,.5,0,.25,1: ranks 1,4,2,3,5 and 1.5,4,1.5,3,5; centred products sum 9.5, sums
    # of squares 10 and 9.5: rho = 9.5 / sqrt(95) = 0.975
    rule = gate(tmp_path, built, 0.9, scorer="judge", options=JUDGE)["proxy_calibrated"]
    assert rule.passed and "judge-human Spearman rho 0.975" in rule.detail, rule.detail
    assert "over 5 human-audit samples (1 run(s)); required at least 0.9" in rule.detail
    assert not gate(tmp_path, built, 0.98, scorer="judge", options=JUDGE)["proxy_calibrated"].passed


def test_the_release_report_shows_the_judges_agreement_with_people(tmp_path: Path, built: dict) -> None:
    from evalgate.gate.report.outputs import write_reports

    rated_audit_run(built["store"], "ha-judge", ("fx", "1"), JUDGE_AUTO, status="judged")
    v = gate_verdict(tmp_path, built, 0.9, scorer="judge", options=JUDGE)
    (c,) = v.calibration
    assert (c.protocol, c.scorer, c.role, c.runs, c.n_samples, c.levels) == \
        ("fx@1", "judge", "gated", ["ha-judge"], 5, 5)
    assert c.spearman.rho == pytest.approx(9.5 / 95 ** 0.5)
    # at 0.5 both sides are 0,1,0,0,1 (human 0.25 < 0.5); on the five points both are 0,2,0,1,4: exact agreement
    assert c.kappa.value == c.weighted_kappa.value == c.alpha.value == pytest.approx(1.0)
    out = {f: tmp_path / f"report.{f}" for f in ("html", "json", "md")}
    write_reports(v, {"html": out["html"], "json": out["json"], "markdown": out["md"]}, built["store"])
    doc = json.loads(out["json"].read_text())
    assert doc["calibration"][0]["spearman"]["rho"] == pytest.approx(0.975, abs=5e-4)
    html = out["html"].read_text()
    section = html[html.index("<h2>Calibration against people</h2>"):]
    assert "<td>fx@1</td><td>judge</td><td>gated</td>" in section and "0.975" in section
    assert "| fx@1 | judge | 5 | 0.975 [" in out["md"].read_text()


def test_no_calibration_section_without_a_proxy(tmp_path: Path, built: dict) -> None:
    assert gate_verdict(tmp_path, built, None, scorer="exact", options="{}").calibration == []
