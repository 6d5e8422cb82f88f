"""Suite gates (issue 45): the policy format, the one checkpoint per seed, the intersection-union verdict, Holm's
adjustment, all-or-nothing budgets across members, on a real DuckDB file store with runs whose right answers are
known by construction.

The fixture: one training run ``sr``, seeds 1 and 2, checkpoints at steps 10 and 20; a target protocol ``ta@1``
(splits ta-dev, ta-private) and a guard protocol ``gu@1`` (gu-dev, gu-private), 10 items each; the baseline checkpoint
``base``. Dev pass@1:

=====  ====  ===========  ==========  ===========================================================
seed   step  target dev   guard dev   with the guard's margin 0.1 against its baseline dev 0.8
=====  ====  ===========  ==========  ===========================================================
1      10    0.5          0.8         qualifies
1      20    0.7          0.5         0.5 < 0.8 - 0.1: rejected, though the target alone picks it
2      10    0.6          0.8         qualifies; highest target of seed 2
2      20    0.4          0.9         qualifies
=====  ====  ===========  ==========  ===========================================================

So the suite ships step 10 of both seeds (the target alone would ship seed 1's step 20). Private: the target's
baseline scores 2 of 10 and every pick 10 of 10 (an improvement whatever the resampling: each resampled mean of
(1 - b_i) lies in [0, 1] and only an all-baseline-correct draw, (2/10)^10, reaches 0); the guard's baseline 10 of 10,
its picks either 10 of 10 (``GUARD_OK``) or 6 of 10 (``GUARD_BAD``: diff -0.4, and a resampled mean of per-item
differences in {0, -1} is >= -0.1 only when at most 1 of the 10 draws hits one of the 4 failed items).
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.gate.report.suite import suite_junit
from evalgate.gate.results import CheckpointResult, SeedResult
from evalgate.gate.suite import load_suite
from evalgate.gate.suite_decide import SelectingMember, holm, intersection_union, pick_checkpoints
from evalgate.gate.suite_run import run_suite
from evalgate.splits import load_manifest, write_split
from evalgate.splits.manifest import DEFAULT_POLICIES
from evalgate.store import Store

pytestmark = pytest.mark.usefixtures("memory_store")  # DuckDB in memory: no test here needs a file or a second process

ITEMS = {"ta": [{"id": f"q{i}", "question": f"{i}+{i}", "answer": str(2 * i)} for i in range(10)],
         "gu": [{"id": f"q{i}", "question": f"{i}*{i}", "answer": str(i * i)} for i in range(10)]}
# (two splits of the same content are one budget under two names: the members' contents differ)
DEV = {"ta": {(1, 10): 0.5, (1, 20): 0.7, (2, 10): 0.6, (2, 20): 0.4},
       "gu": {(1, 10): 0.8, (1, 20): 0.5, (2, 10): 0.8, (2, 20): 0.9}}
BASE_DEV = {"ta": 0.4, "gu": 0.8}
GUARD_OK = [1] * 10
GUARD_BAD = [1] * 6 + [0] * 4


def _scores(value: float) -> list[int]:
    k = round(value * 10)
    return [1] * k + [0] * (10 - k)


def _add_run(store: Store, proto: str, run_id: str, digest: str, path: Path, split: str, tier: str,
             seed: int | None, step: int | None, scores: list[int]) -> None:
    """One complete run of ``scores`` (1 = correct) on the split's current content, as the runner records it."""
    store.create_run({
        "run_id": run_id, "protocol_name": proto, "protocol_version": "1", "protocol_hash": proto * 32,
        "checkpoint_digest": digest, "checkpoint_path": str(path), "train_run": "sr" if seed else None,
        "train_seed": seed, "step": step, "split": split, "tier": tier,
        "split_sha256": load_manifest(split).content_sha256, "sampling_seed": 0, "backend": "hf",
        "backend_info": {}, "effective_params": {}, "actor": "t",
        "purpose": "release-gate" if tier == "private" else "evaluation"})
    n = len(scores)
    mean = sum(scores) / n
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
    samples = [{"item_id": f"q{i}", "sample_index": 0, "seed": 1, "score": float(s),
                "status": "correct" if s else "incorrect", "extracted": "x", "detail": None, "cached": False,
                "behavior": {"completion_tokens": 20.0}} for i, s in enumerate(scores)]
    store.finish_run({"run_id": run_id, "metrics": {
        "pass@1": mean, "pass@1_stderr": sd / math.sqrt(n), "mean_score": mean, "mean_completion_tokens": 20.0,
        "truncation_rate": 0.0, "mean_repetition": 0.0, "empty_rate": 0.0},
        "counts": {"items": n, "samples": n}, "wall_s": 1.0}, samples)


def build(root: Path, guard_private: list[int], guard_budget: int | None = None) -> Store:
    """The splits, checkpoint folders and runs of the module docstring (``guard_budget``: max_reads of gu-private)."""
    for p in ("ta", "gu"):
        write_split(f"{p}-dev", "dev", ITEMS[p], {"source": "test"})
        pol = (DEFAULT_POLICIES["private"].model_copy(update={"max_reads": guard_budget})
               if p == "gu" and guard_budget is not None else None)
        write_split(f"{p}-private", "private", ITEMS[p], {"source": "test"}, policy=pol)
    store = Store()
    with store.session(), store.connect():  # the 20 runs in one transaction, each run's two joining it
        for p in ("ta", "gu"):
            store.record_protocol(p, "1", p * 32, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
        base = root / "base"
        base.mkdir(parents=True)
        for p in ("ta", "gu"):
            _add_run(store, p, f"{p}-dev-base", "dbase", base, f"{p}-dev", "dev", None, None, _scores(BASE_DEV[p]))
            _add_run(store, p, f"{p}-dec-base", "dbase", base, f"{p}-private", "private", None, None,
                     [1, 1] + [0] * 8 if p == "ta" else [1] * 10)
        for seed in (1, 2):
            for step in (10, 20):
                ck = root / f"seed{seed}" / f"checkpoint-{step}"
                ck.mkdir(parents=True)
                for p in ("ta", "gu"):
                    _add_run(store, p, f"{p}-dev-{seed}-{step}", f"d{seed}-{step}", ck, f"{p}-dev", "dev", seed,
                             step, _scores(DEV[p][(seed, step)]))
            ck = root / f"seed{seed}" / "checkpoint-10"  # the suite's pick for both seeds
            _add_run(store, "ta", f"ta-dec-{seed}", f"d{seed}-10", ck, "ta-private", "private", seed, 10, [1] * 10)
            _add_run(store, "gu", f"gu-dec-{seed}", f"d{seed}-10", ck, "gu-private", "private", seed, 10,
                     guard_private)
    return store


def suite_dict(root: Path, **extra: Any) -> dict[str, Any]:
    return {"name": "rel", "baseline": {"checkpoint": str(root / "base")}, "bootstrap_resamples": 2000,
            "selection": {"collapse_drop": None},  # the fixture's checkpoints have no training log:
            "rules": {"min_seeds": 2, "max_truncation_rate": 0.5, "training_guards": False, "reward_hacking": False},
            "members": [
                {"name": "skill", "role": "target", "protocol": "ta@1", "selection_split": "ta-dev",
                 "decision_split": "ta-private", "min_improvement": 0.0},
                {"name": "safety", "role": "guard", "protocol": "gu@1", "selection_split": "gu-dev",
                 "decision_split": "gu-private", "margin": 0.1, "rules": {"max_repetition": 0.3}}],
            **extra}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _counted(store: Store, split: str) -> int:
    return sum(1 for r in store.access_rows(split) if r.outcome in ("read", "override"))


# -- pure logic ----------------------------------------------------------------------------------------------------

def _ck(digest: str, step: int, value: float, failed: list[str] | None = None) -> CheckpointResult:
    return CheckpointResult(digest, f"/c/{digest}", step, "r", f"run-{digest}", "complete", value, None, {},
                            failed or [])


def _seed(seed: int, cks: list[CheckpointResult]) -> SeedResult:
    return SeedResult(seed, "r", cks, None, cks[-1])


def test_pick_is_the_best_target_among_checkpoints_within_every_selecting_guards_margin() -> None:
    target = SelectingMember("t", "target", None, [_seed(1, [_ck("a", 1, 0.5), _ck("b", 2, 0.7), _ck("c", 3, 0.7)])],
                             None)
    # guard: baseline dev 0.8, margin 0.1: a (0.8) and c (0.75) qualify, b (0.6) does not
    guard = SelectingMember("g", "guard", 0.1, [_seed(1, [_ck("a", 1, 0.8), _ck("b", 2, 0.6), _ck("c", 3, 0.75)])],
                            0.8)
    (pick,) = pick_checkpoints([target, guard]).values()
    assert (pick.digest, pick.step, pick.objective) == ("c", 3, 0.7)
    assert pick.rejected == {"b": ["g: dev 0.6000 < baseline 0.8000 - margin 0.1"]}
    # two targets: the mean of their dev values; a tie goes to the earlier step
    t2 = SelectingMember("t2", "target", None, [_seed(1, [_ck("a", 1, 0.9), _ck("b", 2, 0.7), _ck("c", 3, 0.7)])],
                         None)
    (pick,) = pick_checkpoints([target, t2, guard]).values()
    assert (pick.digest, pick.objective) == ("a", 0.7)  # a: (0.5 + 0.9) / 2 = 0.7 = c's (0.7 + 0.7) / 2, earlier
    # a checkpoint failed for any selecting member, or missing from one, never ships; none left: the seed ships none
    guard_failed = SelectingMember("g", "guard", 0.1, [_seed(1, [_ck("a", 1, 0.8, ["collapse"]), _ck("b", 2, 0.6)])],
                                   0.8)
    (pick,) = pick_checkpoints([target, guard_failed]).values()
    assert pick.digest is None and pick.objective is None
    assert pick.rejected == {"a": ["g: failed (collapse)"], "b": ["g: dev 0.6000 < baseline 0.8000 - margin 0.1"],
                             "c": ["g: no run on its selection split"]}
    # a guard whose baseline dev value is unknown is not checked on dev (and says so)
    (pick,) = pick_checkpoints([target, SelectingMember("g", "guard", 0.1, guard.seeds, None)]).values()
    assert pick.digest == "b" and pick.unchecked == ["g"]


def test_holm_adjusted_p_values_by_hand() -> None:
    # sorted 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04); back in the input order
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    # monotone: 0.03 x 2 = 0.06 is raised to nothing; 0.02 x 3 = 0.06; then max(0.06, 0.03 x 2 = 0.06) and 0.5
    assert holm([0.02, 0.03, 0.5]) == pytest.approx([0.06, 0.06, 0.5])
    # the step-down's running maximum: 0.001 x 4 = 0.004; 0.03 x 3 = 0.09; 0.031 x 2 = 0.062 -> 0.09; 0.9 x 1
    assert holm([0.9, 0.031, 0.001, 0.03]) == pytest.approx([0.9, 0.09, 0.004, 0.09])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1
    with pytest.raises(ValueError):
        holm([1.5])


def test_intersection_union_passes_only_when_every_member_passes() -> None:
    assert intersection_union({"a": True, "b": True}) == (True, [])
    assert intersection_union({"a": True, "b": False, "c": False}) == (False, ["b", "c"])
    assert intersection_union({}) == (False, [])


# -- the policy file -----------------------------------------------------------------------------------------------

def test_members_inherit_the_suites_fields_and_override_them(tmp_path: Path) -> None:
    write(tmp_path / "single.yaml", {
        "name": "xs", "protocol": "gu@1", "selection_split": "gu-dev", "decision_split": "gu-private",
        "metric": "mean_score", "baseline": {"value": 0.5}, "rules": {"max_truncation_rate": 0.2, "min_seeds": 1}})
    d = suite_dict(tmp_path, train_run="sr")
    d["members"].append({"name": "reused", "role": "guard", "policy": "single.yaml", "margin": 0.05,
                         "select": False, "rules": {"max_repetition": 0.4}})
    suite = load_suite(write(tmp_path / "suite.yaml", d))
    skill, safety, reused = (m.policy for m in suite.members)
    assert skill.name == "rel/skill" and skill.rules.min_improvement == 0.0 and skill.train_run == "sr"
    assert skill.rules.min_seeds == 2 and skill.rules.max_truncation_rate == 0.5 and skill.rules.max_repetition is None
    assert skill.selection.collapse_drop is None and skill.bootstrap_resamples == 2000
    assert skill.protocol_file == str(tmp_path.parent / "protocols" / "ta.yaml")  # ../protocols/<name>.yaml
    assert safety.rules.min_improvement == -0.1 and safety.rules.max_repetition == 0.3
    assert safety.rules.max_truncation_rate == 0.5
    # the policy file's fields, then the suite's top level (its baseline, rules key by key), then the entry
    assert reused.metric == "mean_score" and reused.decision_split == "gu-private"
    assert reused.baseline.checkpoint == str(tmp_path / "base")
    assert (reused.rules.max_truncation_rate, reused.rules.min_seeds, reused.rules.max_repetition) == (0.5, 2, 0.4)
    assert reused.rules.min_improvement == -0.05 and reused.train_run == "sr"


BAD_SUITES = [
    (lambda d: d["members"][1].update(role="sentinel"), "members.1.role"),
    (lambda d: d["members"][1].update(name="skill"), "member name skill appears twice"),
    (lambda d: d["members"][1].pop("decision_split"), "member safety: no decision_split"),
    (lambda d: d["members"][1].pop("margin"), "member safety: a guard needs margin"),
    (lambda d: d["members"][0].update(margin=0.1), "a target has min_improvement, not margin"),
    (lambda d: d["members"][1].update(rules={"min_improvement": 0.0}), "not rules.min_improvement"),
    (lambda d: d["members"][0].update(select=False), "no member is a target with select: true"),
    (lambda d: d["members"][1].pop("selection_split"), "no selection_split (or select: false)"),
    # thresholds that make no sense (session 16's adversary: a target's negative min_improvement lets it get worse)
    (lambda d: d["members"][0].update(min_improvement=-0.05), "member skill: min_improvement -0.05 is below 0"),
    (lambda d: d["members"][0].update(min_improvement=1.5), "member skill: min_improvement 1.5 is above 1"),
    (lambda d: d["members"][1].update(margin=1.0), "member safety: margin 1.0 is 1 or more"),
    (lambda d: d["members"][1].update(margin=-0.1), "members.1.margin: Input should be greater than or equal to 0"),
    (lambda d: d["members"][1].update(margin=float("nan")), "members.1.margin: Input should be a finite number"),
    (lambda d: d["members"][0].update(min_improvement=float("inf")),
     "members.0.min_improvement: Input should be a finite number"),
    (lambda d: d["rules"].update(max_truncation_rate=float("nan")), "rules.max_truncation_rate: Input should be a "
                                                                     "finite number"),
    (lambda d: d["rules"].update(confidence=1.0), "rules.confidence: Input should be less than 1"),
    (lambda d: d["members"][1].update(rules={"confidence": 0.0}), "members.1.rules.confidence: Input should be "
                                                                   "greater than 0"),
]
"""Suite files that must be refused, each with what the error says."""


@pytest.mark.parametrize(("change", "message"), BAD_SUITES)
def test_a_bad_suite_is_one_clear_error(tmp_path: Path, home: Path, change: Any, message: str) -> None:
    from tests.helpers.cli import cli_parts

    d = suite_dict(tmp_path / "runs")
    change(d)
    path = write(tmp_path / "suite.yaml", d)
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_suite(path)
    code, out, err = cli_parts("gate", "--policy", path)
    assert code == 2 and message in err and out.splitlines()[-1] == "ship: none (invalid: no verdict)", (out, err)


def test_no_bad_suite_reads_or_logs_anything_from_a_store_holding_every_run_it_names(tmp_path: Path,
                                                                                      home: Path) -> None:
    """Each of ``BAD_SUITES`` through the CLI against one store with every split and run the suite names (built
    once: no case changes it), then the good suite, whose reads show that there was something to read."""
    from tests.helpers.cli import cli_parts

    store = build(tmp_path / "runs", GUARD_OK)
    rows = len(store.access_rows())
    for i, (change, message) in enumerate(BAD_SUITES):
        d = suite_dict(tmp_path / "runs")
        change(d)
        code, _, err = cli_parts("gate", "--policy", write(tmp_path / f"suite-{i}.yaml", d))
        assert code == 2 and message in err, (message, err)
        assert len(Store().access_rows()) == rows, message  # nothing read, nothing logged
    run_suite(load_suite(write(tmp_path / "good.yaml", suite_dict(tmp_path / "runs"))), store,
              evaluate_decision=False)
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (3, 3)
    assert len(Store().access_rows()) > rows


def test_a_member_metric_its_scorer_does_not_produce_refuses_the_suite_before_any_read(tmp_path: Path,
                                                                                         home: Path) -> None:
    import shutil

    from tests.conftest import REPO

    store = build(tmp_path / "runs", GUARD_OK)
    judge = tmp_path / "chat-judge-pointwise.yaml"
    for suffix in ("", ".lock"):
        shutil.copy(REPO / "protocols" / f"chat-judge-pointwise.yaml{suffix}", f"{judge}{suffix}")
    d = suite_dict(tmp_path / "runs")
    d["members"][1].update(protocol="chat-judge-pointwise@1", protocol_file=str(judge))  # metric pass@1 by default
    rows = len(store.access_rows())
    with pytest.raises(BadInput, match="member safety: gate policy rel/safety: metric pass@1 is not produced by the "
                                       "judge scorer of chat-judge-pointwise@1"):
        run_suite(load_suite(write(tmp_path / "s.yaml", d)), store, evaluate_decision=False)
    assert len(store.access_rows()) == rows


def test_a_single_gate_file_is_not_taken_for_a_suite_and_a_suite_not_for_a_single_gate(tmp_path: Path) -> None:
    from evalgate.gate import load_policy
    from evalgate.gate.suite import is_suite

    path = write(tmp_path / "s.yaml", suite_dict(tmp_path))
    assert is_suite(path) and not is_suite(Path("gates/demo.yaml")) and not is_suite(tmp_path / "none.yaml")
    with pytest.raises(BadInput, match="is a suite policy"):
        load_policy(path)


# -- the suite on the store ----------------------------------------------------------------------------------------

def test_a_candidate_that_improves_the_target_but_regresses_a_guard_fails_naming_the_guard(tmp_path: Path,
                                                                                            home: Path) -> None:
    store = build(tmp_path / "runs", GUARD_BAD)
    v = run_suite(load_suite(write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))), store,
                  evaluate_decision=False)
    assert not v.passed and v.failing == ["safety"] and v.decided_by() == "safety"
    skill, safety = v.members
    assert skill.passed and not safety.passed
    assert [r.rule for r in safety.verdict.rules if not r.passed] == ["min_improvement"]
    # hand values: target 1.0 - 0.2 = +0.8; guard 0.6 - 1.0 = -0.4 (both seeds score the same items alike)
    assert skill.verdict.stats.difference.diff == pytest.approx(0.8)
    assert safety.verdict.stats.difference.diff == pytest.approx(-0.4)
    assert safety.verdict.stats.difference.low < -0.1 <= skill.verdict.stats.difference.low
    # one checkpoint per seed for the whole suite: step 10 of both (the target alone would ship seed 1's step 20)
    assert {k[1]: p.step for k, p in v.picks.items()} == {1: 10, 2: 10}
    assert v.picks[("sr", 1)].rejected[("d1-20")] == ["safety: dev 0.5000 < baseline 0.8000 - margin 0.1"]
    assert all(s.best and s.best.step == 10 for m in v.members for s in m.verdict.seeds)
    ship = v.ship()
    assert ship.checkpoint is None and ship.why.startswith("suite FAIL: member(s) safety failed: safety: "
                                                           "min_improvement")
    doc = v.as_dict()
    assert [(r["member"], r["passed"], r["threshold"]) for r in doc["table"]] == [
        ("skill", True, 0.0), ("safety", False, -0.1)]
    assert doc["table"][0]["seeds"] == {"1": 1.0, "2": 1.0} and doc["table"][1]["seeds"] == {"1": 0.6, "2": 0.6}
    # each member's verdict is stored as a gate of its own, then the suite's naming them (test_suite_report.py)
    assert {g.name for g in store.gates()} == {"rel/skill", "rel/safety", "rel"}  # and the suite's own row


def test_the_suite_passes_when_every_member_passes_and_reads_are_free_the_second_time(tmp_path: Path,
                                                                                       home: Path) -> None:
    store = build(tmp_path / "runs", GUARD_OK)
    suite = load_suite(write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs", holm=True)))
    v = run_suite(suite, store, evaluate_decision=False)
    assert v.passed and v.failing == [] and v.decided_by() == "every member passed"
    # the baseline and both seeds' picks on each private split: 3 reads each
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (3, 3)
    assert v.ship().step == 10 and v.ship().train_seed == 2  # seed 2's pick has the higher target dev 0.6
    # p-value of "diff <= 0" for the target: only draws of the 2 baseline-correct items give a diff of 0
    (skill, _) = v.members
    assert skill.p_value == 0.0 and skill.holm_p == 0.0 and v.any_target_improved is True
    again = run_suite(suite, Store(), evaluate_decision=False)
    assert again.passed and all(m.verdict.reused_from is not None for m in again.members)
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (3, 3)  # nothing charged again


def test_a_member_whose_budget_is_spent_refuses_the_whole_suite_charging_no_member(tmp_path: Path,
                                                                                  home: Path) -> None:
    store = build(tmp_path / "runs", GUARD_OK, guard_budget=2)  # the guard needs 3 reads, 2 allowed
    before = {s: len(store.access_rows(s)) for s in ("ta-private", "gu-private")}
    with pytest.raises(RefusedByPolicy) as e:
        run_suite(load_suite(write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))), store,
                  evaluate_decision=False)
    assert e.value.exit_code == 2
    assert "the budget of gu-private cannot cover the suite's reads" in e.value.message
    assert "nothing was read or spent on any member" in e.value.message
    for split in ("ta-private", "gu-private"):
        new = store.access_rows(split)[before[split]:]
        assert [r.outcome for r in new] == ["refused"], new  # logged on each member's split, nothing charged
        assert _counted(store, split) == 0
    assert "suite rel is refused as a whole: the budget of gu-private" in store.access_rows("ta-private")[-1].detail
    assert store.gates() == []


def test_an_interrupted_suite_leaves_every_member_fully_charged_or_none(tmp_path: Path, home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The reservation of every member's reads is one transaction: an exception in the middle of the second
    member's reads finds each member charged for all its reads (3), none for some; the grants are revoked."""
    from evalgate.gate import reads

    store = build(tmp_path / "runs", GUARD_OK)
    real = reads.DecisionReader.read
    calls: list[str] = []

    def read(self: Any, path: str, info: Any, digest: str | None) -> Any:
        calls.append(self.policy.name)
        if self.policy.name == "rel/safety" and calls.count("rel/safety") == 2:
            raise KeyboardInterrupt  # what Ctrl-C, and SIGTERM under the CLI, raise
        return real(self, path, info, digest)

    monkeypatch.setattr(reads.DecisionReader, "read", read)
    with pytest.raises(KeyboardInterrupt):
        run_suite(load_suite(write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))), store,
                  evaluate_decision=False)
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (3, 3)
    assert store.gates() == []


def test_the_suite_cli_evaluates_writes_one_report_and_exits_1_naming_the_failing_guard(home: Path,
                                                                                         tiny_checkpoint: Path) -> None:
    """In process, real evaluations of the tiny checkpoint (its outputs are noise). The target compares a variant
    with the same weights to the checkpoint itself (identical outputs: difference 0, CI [0, 0], passes
    min_improvement 0); a selecting guard does the same on other splits (``--evaluate-missing`` makes its dev run
    of the variant; equal to the baseline's, so within its margin); the third member (``select: false``, no
    selection split) compares the variant with a fixed value 1.0 on three additions the random model cannot do
    (pass@1 < 0.95: fails its margin 0.05)."""
    from evalgate.demo.train import addition_items
    from evalgate.runner.evaluate import RunOptions, evaluate
    from tests.gate.test_real import _variant, tiny_addition
    from tests.helpers.cli import cli_parts

    proto = tiny_addition(home, "st")
    write_split("sd-dev", "dev", addition_items("dev", 3), {"source": "test"})
    write_split("sd-private", "private", addition_items("private", 4), {"source": "test"})
    write_split("sg-private", "private", addition_items("private", 3), {"source": "test"})
    ck = _variant(tiny_checkpoint, home / "train" / "cr" / "seed1" / "checkpoint-2", 2)
    evaluate(proto, ck, "st-dev", RunOptions(train_run="cr", train_seed=1, progress=False),
             store=Store())  # not on sd-dev
    member = {"protocol": "st-add@1", "protocol_file": str(proto)}
    path = write(home / "suite.yaml", {
        "name": "cli", "baseline": {"checkpoint": str(tiny_checkpoint)}, "bootstrap_resamples": 500,
        "rules": {"min_seeds": 1, "max_truncation_rate": 1.0, "training_guards": False, "reward_hacking": False},
        "members": [
            {"name": "skill", "role": "target", **member, "selection_split": "st-dev", "decision_split": "st-private",
             "min_improvement": 0.0},
            {"name": "same", "role": "guard", **member, "selection_split": "sd-dev", "decision_split": "sd-private",
             "margin": 0.0},
            {"name": "guard", "role": "guard", **member, "decision_split": "sg-private", "select": False,
             "margin": 0.05, "baseline": {"value": 1.0}}]})
    out_dir = home / "out"
    out_dir.mkdir()
    code, out, err = cli_parts("gate", "--policy", path, "--evaluate-missing", str(home / "train" / "*" / "*" / "*"),
                               "--json-out", out_dir / "s.json", "--junit", out_dir / "s.xml", "--markdown",
                               out_dir / "s.md", "--report", out_dir / "s.html")
    assert code == 1, (out, err)
    assert out.splitlines()[0] == "FAIL: suite cli (3 members; decided by guard)"
    assert out.splitlines()[-1].startswith("ship: none (suite FAIL: member(s) guard failed: guard: min_improvement")
    store = Store()
    (dev,) = store.runs(split="sd-dev", train_seed=1)  # made by --evaluate-missing; st-dev's was skipped
    assert dev.checkpoint_path == str(ck) and len(store.runs(split="st-dev", train_seed=1)) == 1
    doc = json.loads((out_dir / "s.json").read_text())
    skill, same, guard = doc["table"]
    assert skill["passed"] and skill["diff"] == 0.0 and skill["ci"] == [0.0, 0.0]
    assert same["passed"] and same["diff"] == 0.0 and same["ci"] == [0.0, 0.0]
    assert not guard["passed"] and guard["seeds"]["1"] < 0.95 and guard["diff"] == pytest.approx(
        guard["seeds"]["1"] - 1.0)
    assert doc["picks"][0]["step"] == 2 and doc["picks"][0]["rejected"] == []
    assert doc["members"][2]["gate"]["seeds"][0]["best"]["step"] == 2  # the suite's pick, evaluated on sg-private
    cases = ET.parse(out_dir / "s.xml").getroot().findall("testsuite/testcase")
    assert [(c.get("name"), c.find("failure") is not None) for c in cases] == [
        ("skill", False), ("same", False), ("guard", True)]
    md = (out_dir / "s.md").read_text()
    assert "# evalgate suite `cli`: **FAIL**" in md and "## Member `guard` (guard)" in md
    assert "<h1>evalgate suite cli: FAIL</h1>" in (out_dir / "s.html").read_text()
    # reads: the baseline and the pick on st-private and on sd-private, the pick only on sg-private (a value)
    assert [_counted(store, s) for s in ("st-private", "sd-private", "sg-private")] == [2, 2, 1]
    # again, --json: every member's decision reused, nothing charged
    code, out, _ = cli_parts("gate", "--policy", path, "--json")
    again = json.loads(out)
    assert code == 1 and again["decided_by"] == "guard"
    assert all(m["gate"]["reused_from"] for m in again["members"])
    assert [_counted(store, s) for s in ("st-private", "sd-private", "sg-private")] == [2, 2, 1]


def test_the_shipped_example_suite_loads_with_its_members_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import REPO

    monkeypatch.setenv("EVALGATE_DEMO_BASE", "/models/base.gguf")
    monkeypatch.delenv("EVALGATE_SAFETY_BASELINE", raising=False)  # the suite's baseline replaces the files'
    suite = load_suite(REPO / "gates" / "release-suite.yaml")
    add, safe, unsafe = (m.policy for m in suite.members)
    assert [m.spec.role for m in suite.members] == ["target", "guard", "guard"]
    assert {p.baseline.checkpoint for p in (add, safe, unsafe)} == {"/models/base.gguf"}
    assert (add.rules.min_improvement, safe.rules.min_improvement, unsafe.rules.min_improvement) == (0.0, -0.05, -0.05)
    assert safe.protocol == "xstest-safe@2" and safe.decision_split == "xstest-safe-private"
    assert safe.protocol_file == str(REPO / "protocols" / "xstest-safe-2.yaml")
    assert (add.rules.max_truncation_rate, unsafe.rules.max_truncation_rate) == (0.05, 0.5)
    assert add.rules.max_repetition == 0.2 and safe.rules.max_repetition is None
    assert not suite.members[2].spec.select and safe.selection.collapse_drop == 0.15


def test_trackers_get_one_summary_per_member_and_no_private_value(tmp_path: Path, home: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``--report-to tensorboard`` on a failing suite (the fixture's stored decision runs: the CLI's run_suite is
    told not to evaluate): each member's verdict and rules under its own gate name, at the highest checkpoint step
    considered (20: the suite ships nothing), and no private per-seed value anywhere."""
    import evalgate.gate.report.suite as suite_mod
    from tests.helpers.cli import cli_parts
    from tests.trackers.tracker_read import tb_scalars

    store = build(tmp_path / "runs", GUARD_BAD)
    monkeypatch.setattr(suite_mod, "run_suite", lambda s, st, a, **k: run_suite(s, st, a, evaluate_decision=False))
    path = write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))
    trk = tmp_path / "trk"
    code, out, err = cli_parts("gate", "--policy", path, "--report-to", "tensorboard", "--tracker-dir", trk)
    assert code == 1, (out, err)
    tb = trk / "tensorboard" / "gate"
    assert sorted(p.name for p in tb.iterdir()) == ["rel_safety", "rel_skill"]
    assert tb_scalars(tb / "rel_skill")["gate/passed"] == [(20, 1.0)]
    safety = tb_scalars(tb / "rel_safety")
    assert safety["gate/passed"] == [(20, 0.0)] and safety["gate/rule/min_improvement"] == [(20, 0.0)]
    assert all(k.startswith("gate/") for k in safety)
    exported = [r for r in store.access_rows("gu-private") if r.purpose == "export-tracker"]
    assert [r.outcome for r in exported] == ["exported"]


def test_two_members_on_one_split_and_protocol_share_its_reads(tmp_path: Path, home: Path) -> None:
    """IFEval-style: two metrics of the same runs as two members (the target's pass@1, and its mean_score as a
    non-selecting guard on the same split and protocol): the second is shown the first's decision runs (3 logged
    re-reads, not charged) instead of being charged 3 more reads of ta-private."""
    store = build(tmp_path / "runs", GUARD_OK)
    d = suite_dict(tmp_path / "runs")
    d["members"].append({"name": "skill-mean", "role": "guard", "protocol": "ta@1", "decision_split": "ta-private",
                         "metric": "mean_score", "margin": 0.0, "select": False})
    v = run_suite(load_suite(write(tmp_path / "s.yaml", d)), store, evaluate_decision=False)
    assert v.passed
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (3, 3)
    skill, _, mean = v.members
    assert sorted(mean.verdict.rereads) == ["ta-dec-1", "ta-dec-2", "ta-dec-base"]
    assert mean.verdict.stats.difference.diff == pytest.approx(0.8)  # mean_score of 0/1 scores: as pass@1
    shared = [r for r in store.access_rows("ta-private") if r.outcome == "re-read"]
    assert len(shared) == 3 and all("shows the read member skill of the suite made" in r.detail for r in shared)


def test_a_member_failing_a_rule_on_non_private_data_fails_the_suite_before_any_private_read(tmp_path: Path,
                                                                                             home: Path) -> None:
    """The guard asks for 3 seeds and the run has 2: ``min_seeds`` needs no private data, so the suite fails
    (naming the guard) before reserving anything on either split; every member's verdict says why it was not
    decided."""
    store = build(tmp_path / "runs", GUARD_OK)
    d = suite_dict(tmp_path / "runs")
    d["members"][1]["rules"] = {"min_seeds": 3}
    v = run_suite(load_suite(write(tmp_path / "s.yaml", d)), store, evaluate_decision=False)
    assert not v.passed and v.failing == ["safety"]
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (0, 0)
    assert all("failed on data that is not private" in (m.verdict.decision_not_read or "") for m in v.members)
    assert [r["failed_rules"] for r in v.table()] == [[], ["min_seeds"]]
    assert not any(r.outcome == "reserved" for r in store.access_rows("ta-private"))
    junit = ET.fromstring(suite_junit(v))
    (suite,) = junit.findall("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "1")
    assert [c.find("skipped") is not None for c in suite.findall("testcase")] == [True, False]


CHILD = """
import sys, time
from pathlib import Path
import evalgate.gate.report.suite as suite_mod
from evalgate.gate import reads
from evalgate.gate.suite_run import run_suite
from evalgate.cli import main

marker = Path(sys.argv[2])
real = reads.DecisionReader.read
calls = []

def read(self, path, info, digest):
    calls.append(self.policy.name)
    if self.policy.name == "rel/safety" and calls.count("rel/safety") == 2:
        marker.write_text("reading")
        time.sleep(120)  # SIGTERM arrives here, in the middle of the second member's reads
    return real(self, path, info, digest)

reads.DecisionReader.read = read
suite_mod.run_suite = lambda s, st, a, **k: run_suite(s, st, a, evaluate_decision=False)
main(["gate", "--policy", sys.argv[1]])
"""


@pytest.mark.integration  # a real process and a real SIGTERM
def test_a_suite_killed_by_sigterm_mid_way_leaves_every_member_fully_charged(tmp_path: Path, home: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``evalgate gate`` on a suite in its own process, SIGTERM'd (what Slurm and Kubernetes send) while it reads the
    guard's second decision run: it exits 143, and each member's split holds all 3 of its reads (the reservation
    was one transaction), not some; no verdict is stored."""
    import signal

    from tests.conftest import REPO
    from tests.helpers.processes import signal_at_marker

    monkeypatch.delenv("EVALGATE_STORE")  # the home's DuckDB file: the child process must share the store
    store = build(tmp_path / "runs", GUARD_OK)
    path = write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))
    marker = tmp_path / "marker"
    code, out, err = signal_at_marker(CHILD, [str(path), str(marker)], marker, signal.SIGTERM, REPO)
    assert code == 143, (out, err)
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (3, 3)
    assert store.gates() == []


def test_a_read_one_member_makes_for_others_is_shown_by_that_member_even_when_a_third_shares_it(
        tmp_path: Path, home: Path) -> None:
    """Three members on ta-private and ta@1: ``skill`` (a published baseline value, so it reads only the two picks),
    ``mean`` (the checkpoint baseline: it reads ``base`` itself, the picks shown by skill) and ``again`` (every one
    of its reads is made by another member). ``again`` must be shown ``base``'s run by ``mean``, the member that
    read it: a logged, uncounted re-read naming ``mean``, as for the picks it is shown by skill. (Before: the
    shared reads were booked as all skill's, so base was shown by nobody and ``again`` took the stored run with no
    access-log row at all, and with evaluation, no run to take: a BadInput after every other read was spent.)"""
    store = build(tmp_path / "runs", GUARD_OK)
    d = suite_dict(tmp_path / "runs")
    d["members"][0]["baseline"] = {"value": 0.2}
    d["members"] += [{"name": "mean", "role": "guard", "protocol": "ta@1", "decision_split": "ta-private",
                      "metric": "mean_score", "margin": 0.0, "select": False},
                     {"name": "again", "role": "guard", "protocol": "ta@1", "decision_split": "ta-private",
                      "margin": 0.0, "select": False}]
    v = run_suite(load_suite(write(tmp_path / "s.yaml", d)), store, evaluate_decision=False)
    assert v.passed
    assert _counted(store, "ta-private") == 3  # the two picks (skill) and base (mean): each charged once
    _, _, mean, again = v.members
    assert sorted(mean.verdict.rereads) == ["ta-dec-1", "ta-dec-2"]
    assert sorted(again.verdict.rereads) == ["ta-dec-1", "ta-dec-2", "ta-dec-base"]
    shown = {(r.run_id, r.detail.split(" shows the read member ")[1].split(" ")[0])
             for r in store.access_rows("ta-private") if r.outcome == "re-read" and "rel/again" in r.detail}
    assert shown == {("ta-dec-1", "skill"), ("ta-dec-2", "skill"), ("ta-dec-base", "mean")}


def test_a_suite_with_no_candidate_run_says_what_is_missing_and_evaluates_no_baseline(tmp_path: Path, home: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch
                                                                                      ) -> None:
    """A new user gated a suite before evaluating any checkpoint on dev: the suite spent 11 minutes evaluating the
    baseline on the target's dev split, then failed with 'every checkpoint of every seed failed', where a single
    gate says runs_present: no run ... evaluate the checkpoints first."""
    from evalgate.gate import reads

    for p in ("ta", "gu"):
        write_split(f"{p}-dev", "dev", ITEMS[p], {"source": "test"})
        write_split(f"{p}-private", "private", ITEMS[p], {"source": "test"})
    store = Store()
    for p in ("ta", "gu"):
        store.record_protocol(p, "1", p * 32, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
    (tmp_path / "runs" / "base").mkdir(parents=True)
    monkeypatch.setattr(reads, "check_protocol", lambda *a, **k: None)  # the stored protocols stand for the files
    monkeypatch.setattr(reads, "baseline_digest", lambda *a, **k: "dbase")
    monkeypatch.setattr(reads, "evaluate_for_gate", lambda *a, **k: pytest.fail("nothing to pick: no evaluation"))
    v = run_suite(load_suite(write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))), store)
    assert not v.passed and v.failing == ["skill", "safety"]
    for m in v.members:
        (first, *_) = [r for r in m.verdict.rules if not r.passed]
        assert first.rule == "runs_present" and "--evaluate-missing" in first.detail
        assert not any("every checkpoint of every seed failed" in r.detail for r in m.verdict.rules)
    assert (_counted(store, "ta-private"), _counted(store, "gu-private")) == (0, 0)


def test_the_suite_reports_state_the_test_level_as_written(tmp_path: Path, home: Path) -> None:
    """The HTML report of a new user's suite said 'each member at one-sided level 0.025000000000000022'."""
    from evalgate.gate.report.suite import suite_html

    store = build(tmp_path / "runs", GUARD_OK)
    v = run_suite(load_suite(write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))), store,
                  evaluate_decision=False)
    assert v.as_dict()["alpha"] == 0.025  # (1 - 0.95) / 2
    assert "one-sided level 0.025)" in suite_html(v)
