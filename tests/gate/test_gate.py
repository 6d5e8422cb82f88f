"""The gate over fixture training runs whose best/last/failed checkpoints, triad steps and verdicts are known by
construction (see tests/gate_fixtures.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.gate import GatePolicy, load_policy, run_gate
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


def _policy(tmp_path: Path, d: dict) -> GatePolicy:
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(d))
    return load_policy(p)


def _lock(path: Path) -> None:
    """Write the protocol's lock file without recording it in the store (the fixture store holds fx@1 already)."""
    from evalgate.protocol.spec import load_protocol, lock_document

    path.with_name(path.name + ".lock").write_text(json.dumps(lock_document(load_protocol(path))))


def test_best_last_failed_and_triad(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs")
    v = run_gate(_policy(tmp_path, fx.policy_dict(built["baseline"], min_seeds=2)), built["store"],
                 evaluate_decision=False)
    seeds = {s["train_seed"]: s for s in v.as_dict()["seeds"]}
    assert set(seeds) == {1, 2, 3}
    assert (seeds[1]["best"]["step"], seeds[1]["last"]["step"], [c["step"] for c in seeds[1]["failed"]]) == (30, 40, [])
    s2 = seeds[2]
    assert (s2["best"]["step"], s2["last"]["step"], [c["step"] for c in s2["failed"]]) == (20, 40, [30])
    assert "collapse" in seeds[2]["failed"][0]["failed_reasons"][0]
    assert (seeds[3]["best"]["step"], seeds[3]["last"]["step"]) == (20, 50)
    assert [c["step"] for c in seeds[3]["failed"]] == [30, 40, 50]
    assert "guard nonfinite tripped at step 25" in seeds[3]["failed"][0]["failed_reasons"]
    assert seeds[3]["failed"][2]["failed_reasons"][0] == f"run error ({fx.FAILED_RUN_ERROR})"
    kinds = {k: [(d["signal"], d["step"]) for d in s["diagnostics"]] for k, s in seeds.items()}
    assert kinds == {1: [("reward_hacking", 40)], 2: [], 3: [("nonfinite", 25)]}
    outcome = {r.rule: r.passed for r in v.rules}
    assert outcome == {"min_seeds": True, "training_guards": False, "reward_hacking": False}
    assert not v.passed
    # the training log was found next to the checkpoints, in the trainer's format
    assert seeds[1]["train_log"]["format"] == "trainer_state"
    assert {"reward", "kl", "completion_length", "grad_norm"} <= set(seeds[1]["train_log"]["keys"])


def test_pass_and_statistics_by_hand(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    pol = fx.policy_dict(built["baseline"], min_improvement=0.0, confidence=0.9, min_seeds=2,
                         seeds_beat_baseline_share=1.0, max_length_inflation=1.5, max_truncation_rate=0.1,
                         reward_hacking=False)
    v = run_gate(_policy(tmp_path, pol), built["store"], evaluate_decision=False)
    st = v.as_dict()["stats"]
    # X1 mean 0.6, sample var 2.4/9; X2 mean 0.7, var 2.1/9 (n = 10)
    se1, se2 = math.sqrt(2.4 / 9 / 10), math.sqrt(2.1 / 9 / 10)
    assert st["aggregate"]["mean_of_seed_means"] == pytest.approx(0.65)
    assert st["aggregate"]["stderr_seeds_fixed"] == pytest.approx(0.5 * math.sqrt(se1 ** 2 + se2 ** 2))
    assert st["aggregate"]["stderr_seeds_fixed"] == pytest.approx(0.5 * math.sqrt(0.05))
    # seeds as the unit: sd(0.6, 0.7) / sqrt(2) = 0.05
    assert st["aggregate"]["stderr_over_seeds"] == pytest.approx(0.05)
    # paired differences d = [0, .5, 0, .5, 1, 0, 0, .5, 0, 0]: mean .25, sd sqrt((3*.0625+.5625+6*.0625)/9)
    assert st["difference"]["diff"] == pytest.approx(0.25)
    assert st["paired_stderr"] == pytest.approx(math.sqrt((9 * 0.0625 + 0.5625) / 9) / math.sqrt(10))
    assert st["difference"]["low"] > 0 and st["difference"]["high"] < 0.6
    assert {r.rule: r.passed for r in v.rules} == {
        "min_seeds": True, "min_improvement": True, "seeds_beat_baseline": True, "max_truncation_rate": True,
        "max_length_inflation": True, "training_guards": True}
    assert v.passed
    assert v.as_dict()["baseline"]["decision"]["value"] == pytest.approx(0.4)
    assert v.stats is not None and v.stats.baseline is not None and v.stats.baseline.value == pytest.approx(0.4)


def test_length_inflation_and_min_improvement_fail(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2), decision_tokens=50.0)
    pol = fx.policy_dict(built["baseline"], min_improvement=0.3, max_length_inflation=2.0, reward_hacking=False)
    v = run_gate(_policy(tmp_path, pol), built["store"], evaluate_decision=False)
    out = {r.rule: r for r in v.rules}
    assert not out["max_length_inflation"].passed and "2.50x" in out["max_length_inflation"].detail
    assert not out["min_improvement"].passed and not v.passed


def test_selection_on_public_or_private_refused(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1,))
    for split in ("fx-public", "fx-private"):
        d = {**fx.policy_dict(built["baseline"]), "selection_split": split}
        with pytest.raises(RefusedByPolicy, match="selected on a dev split only"):
            run_gate(_policy(tmp_path, d), built["store"], evaluate_decision=False)
    with pytest.raises(BadInput, match="private-tier"):
        run_gate(_policy(tmp_path, {**fx.policy_dict(built["baseline"]), "decision_split": "fx-dev"}),
                 built["store"], evaluate_decision=False)


def test_private_budget_is_checked_before_reading(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    (tmp_path / "proto.yaml").write_text("name: fx\nversion: '1'\nprompt: {template: '{{ q }}'}\n"
                                         "scorer: {name: exact}\n")
    _lock(tmp_path / "proto.yaml")
    pol = _policy(tmp_path, {**fx.policy_dict(built["baseline"], reward_hacking=False), "protocol_file": "proto.yaml",
                             "baseline": {"value": 0.4}, "train_run": "fx-run"})
    store = built["store"]
    # the fixture inserted no access rows; use up 3 of the 4 reads, then a gate needing 2 is refused up front
    from evalgate.splits import SplitManager

    m = SplitManager(store).manifest("fx-private")
    for _ in range(3):
        SplitManager(store).log_read(m, "t", "release-gate", cached=True)
    with pytest.raises(RefusedByPolicy, match="needs 2 reads .* only 1 of 4"):
        run_gate(pol, store)
    assert store.access_rows("fx-private")[-1].outcome == "refused"


def test_policy_validation(tmp_path: Path) -> None:
    base = fx.policy_dict("/nowhere")
    with pytest.raises(BadInput, match="extra_field"):
        _policy(tmp_path, {**base, "extra_field": 1})
    with pytest.raises(BadInput, match="exactly one"):
        _policy(tmp_path, {**base, "baseline": {"checkpoint": "x", "value": 0.3}})
    with pytest.raises(BadInput, match="needs a baseline checkpoint"):
        _policy(tmp_path, {**base, "baseline": {"value": 0.3}, "rules": {"max_length_inflation": 1.2}})
    with pytest.raises(BadInput, match="metric"):
        _policy(tmp_path, {**base, "metric": "mean_completion_tokens"})


def test_policy_errors_name_file_line_and_nearest_key(tmp_path: Path) -> None:
    p = tmp_path / "gate.yaml"
    p.write_text("name: g\n"
                 "protocol: p@1\n"
                 "selection_split: s-dev\n"
                 "decison_split: s-private\n"
                 "baseline:\n"
                 "  value: 0.5\n"
                 "rules:\n"
                 "  min_improvment: 0.0\n"
                 "  max_length_inflation: 1.2\n")
    with pytest.raises(BadInput) as e:
        load_policy(p)
    msg = e.value.message
    assert msg.startswith("invalid gate policy:")
    assert f"{p}:4: decison_split: unknown key 'decison_split'; did you mean 'decision_split'?" in msg
    assert f"{p}:8: rules.min_improvment: unknown key 'min_improvment'; did you mean 'min_improvement'?" in msg
    assert f"{p}: decision_split: Field required" in msg  # absent: no line to give
    p.write_text(p.read_text().replace("decison_split", "decision_split").replace("  min_improvment: 0.0\n", ""))
    with pytest.raises(BadInput) as e:
        load_policy(p)
    assert f"{p}:7: rules: rules.max_length_inflation needs a baseline checkpoint" in e.value.message


def test_a_misspelt_key_in_a_list_of_sections_names_the_nearest_key(tmp_path: Path) -> None:
    """A proxy_protocols entry is a section too: its misspelt key gets the nearest known one, not 'this section takes
    no keys' (what a new user was told for 'splt'); a reference that is not name@version says so in words."""
    p = tmp_path / "gate.yaml"
    p.write_text("name: g\n"
                 "protocol: p\n"
                 "selection_split: s-dev\n"
                 "decision_split: s-private\n"
                 "baseline:\n"
                 "  value: 0.5\n"
                 "proxy_protocols:\n"
                 "  - protocol: judge@1\n"
                 "    splt: s-dev\n")
    with pytest.raises(BadInput) as e:
        load_policy(p)
    msg = e.value.message
    assert f"{p}:9: proxy_protocols.0.splt: unknown key 'splt'; did you mean 'split'?" in msg
    assert (f"{p}:2: protocol: 'p' is not name@version, a protocol's name and version as its file says them "
            "(e.g. 'addition@1')") in msg


def test_fixed_value_baseline(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1,))
    d = {**fx.policy_dict(built["baseline"]), "baseline": {"value": 0.5}, "train_run": "fx-run"}
    d["rules"] = {"min_improvement": 0.0, "seeds_beat_baseline_share": 1.0, "reward_hacking": False}
    v = run_gate(_policy(tmp_path, d), built["store"], evaluate_decision=False)
    assert v.stats is not None
    assert v.stats.difference.diff == pytest.approx(0.1)  # X1 mean 0.6 - 0.5
    assert "fixed value" in v.stats.difference.method
    assert {r.rule: r.passed for r in v.rules}["seeds_beat_baseline"] is True


def test_nan_weights_mark_a_checkpoint_failed(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    from evalgate.gate import weights_finite

    ok, bad = tmp_path / "ok", tmp_path / "bad"
    ok.mkdir()
    bad.mkdir()
    save_file({"w": torch.ones(3)}, str(ok / "model.safetensors"))
    save_file({"w": torch.tensor([1.0, float("inf"), 0.0])}, str(bad / "model.safetensors"))
    assert weights_finite(ok) is True and weights_finite(bad) is False and weights_finite(tmp_path) is None


def test_policy_metric_and_protocol_checked_before_any_read(tmp_path: Path) -> None:
    # Found by a fresh-user test: metric pass@3 on a protocol reporting pass@1 spent a private read, then crashed.
    import shutil

    from tests.conftest import REPO

    built = fx.build(tmp_path / "runs")
    proto = tmp_path / "humaneval-smoke.yaml"
    shutil.copy(REPO / "protocols" / "humaneval-smoke.yaml", proto)  # pass_at_k [1, 4], humaneval-smoke@1
    rows_before = len(built["store"].access_rows())
    d = fx.policy_dict(built["baseline"])
    d.update(protocol="humaneval-smoke@1", protocol_file=str(proto), metric="pass@3")
    with pytest.raises(BadInput, match=r"metric pass@3 is not reported by humaneval-smoke@1 .*pass@1, pass@4"):
        run_gate(_policy(tmp_path, d), built["store"])
    d.update(protocol="humaneval-smoke@2", metric="pass@1")
    with pytest.raises(BadInput, match="protocol is humaneval-smoke@2 but protocol_file .* is humaneval-smoke@1"):
        run_gate(_policy(tmp_path, d), built["store"])
    assert len(built["store"].access_rows()) == rows_before


def test_report_of_a_gate_without_runs(tmp_path: Path) -> None:
    # Found by a fresh-user test: --report crashed (exit 3) when the policy matched no runs.
    from evalgate.gate.report.outputs import render_html

    built = fx.build(tmp_path / "runs")
    d = fx.policy_dict(built["baseline"])
    d["protocol"] = "nothing@1"
    v = run_gate(_policy(tmp_path, d), built["store"], evaluate_decision=False)
    assert not v.passed and [r.rule for r in v.rules] == ["runs_present"]
    html = render_html(v)
    assert "FAIL" in html and "no run of nothing@1" in html


def test_a_gate_the_whole_budget_cannot_cover_says_so(tmp_path: Path) -> None:
    """Issue 44, item 8: 4 seeds and a baseline checkpoint need 5 reads, more than the private split's whole budget
    of 4 per 30 days: the refusal said "wait for the window to pass", which never helps. It says no window will
    cover the gate, and what to do; nothing is spent. (Here 5 seeds with a fixed baseline value: 5 reads.)"""
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    (tmp_path / "proto.yaml").write_text("name: fx\nversion: '1'\nprompt: {template: '{{ q }}'}\n"
                                         "scorer: {name: exact}\n")
    _lock(tmp_path / "proto.yaml")
    store = built["store"]
    for seed in (4, 5, 6):  # three more seeds with a dev run each: 5 seeds' bests = 5 reads
        ck = tmp_path / "runs" / f"fx-run-seed{seed}" / "checkpoint-10"
        ck.mkdir(parents=True)
        fx.add_run(store, f"dev-{seed}-10", f"d{seed}-10", ck, "fx-dev", "dev", seed, 10, [1] * 5 + [0] * 5)
    pol = _policy(tmp_path, {**fx.policy_dict(built["baseline"]), "protocol_file": "proto.yaml",
                             "baseline": {"value": 0.4}, "train_run": "fx-run",
                             "rules": {"reward_hacking": False, "training_guards": False}})
    with pytest.raises(RefusedByPolicy, match="needs 5 reads .* more than its whole budget of 4 per 30 days: no "
                                              "window will ever cover this gate") as e:
        run_gate(pol, store)
    assert "baseline: {value: ...}" in str(e.value)
    rows = store.access_rows("fx-private")
    assert [r.outcome for r in rows] == ["refused"]


def test_a_metric_the_protocols_scorer_does_not_produce_is_refused_before_any_read(tmp_path: Path) -> None:
    """Issue 46, item 6: a judge run's samples are 'judged', never 'correct', so its pass@1 is 0 for every
    checkpoint; a gate left on the default metric pass@1 printed PASS with "+0.0000, CI [+0.0000, +0.0000]". It is
    refused (exit 2) before any read, naming the metric, the scorer and what it produces; the same for IFEval's
    prompt-level accuracy asked of a judge protocol. The right pairings pass the check."""
    import shutil

    from evalgate.gate import reads
    from evalgate.protocol.spec import load_protocol
    from tests.conftest import REPO

    built = fx.build(tmp_path / "runs")
    judge = tmp_path / "chat-judge-pointwise.yaml"
    for suffix in ("", ".lock"):  # scorer judge, pass_at_k [1]
        shutil.copy(REPO / "protocols" / f"chat-judge-pointwise.yaml{suffix}", f"{judge}{suffix}")
    rows_before = len(built["store"].access_rows())
    d = fx.policy_dict(built["baseline"])
    d.update(protocol="chat-judge-pointwise@1", protocol_file=str(judge), metric="pass@1")
    with pytest.raises(BadInput) as e:
        run_gate(_policy(tmp_path, d), built["store"], evaluate_decision=False)
    assert e.value.exit_code == 2
    assert ("metric pass@1 is not produced by the judge scorer of chat-judge-pointwise@1 "
            f"({judge}): its samples are never 'correct' (statuses: judged, judge_unparseable, truncated)"
            in e.value.message)
    assert e.value.message.endswith("it produces mean_score: set metric to one of them")
    d["metric"] = "ifeval_prompt_strict"
    with pytest.raises(BadInput, match="metric ifeval_prompt_strict is not produced by the judge scorer .* its "
                                       "samples give no value of it; it produces mean_score"):
        run_gate(_policy(tmp_path, d), built["store"], evaluate_decision=False)
    assert len(built["store"].access_rows()) == rows_before  # nothing logged, nothing spent

    ifeval = REPO / "protocols" / "ifeval.yaml"
    for proto, metric in ((judge, "mean_score"), (ifeval, "ifeval_prompt_strict"), (ifeval, "ifeval_prompt_loose"),
                          (ifeval, "pass@1"), (REPO / "protocols" / "humaneval-smoke.yaml", "pass@4")):
        lp = load_protocol(proto)
        pol = _policy(tmp_path, {**d, "protocol": lp.ref, "protocol_file": str(proto), "metric": metric})
        reads.check_protocol(pol, evaluate_decision=False)  # no exception: the scorer produces the metric


def test_a_scorer_declaring_pass_at_k_without_a_correct_status_is_refused() -> None:
    """The registry refuses the judge's old declaration (pass@k with no 'correct' status) for any scorer, a plugin's
    included."""
    from evalgate.scoring.base import ScorerEntry

    with pytest.raises(ValueError, match="without it every pass@k is 0: set pass_at_k=False"):
        ScorerEntry("m:Options", "m:Scorer", statuses=("judged", "judge_unparseable"))
    assert ScorerEntry("m:Options", "m:Scorer", statuses=("judged",), pass_at_k=False).produces() == ("mean_score",)
