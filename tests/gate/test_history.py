"""Stored gate verdicts (issue 13 point 5, issue 17): an unchanged gate reuses its decision and spends nothing, a
changed one decides afresh; ``evalgate report GATE_ID`` re-renders without reading; a gate that decides nothing
still writes its JUnit / JSON / Markdown with a machine-readable reason; the text output names what to ship.

Over the fixture runs of tests/gate_fixtures.py (seeds 1 and 2: best steps 30 and 20, dev pass@1 0.6 and 0.7)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import evalgate.gate.report.outputs as report_mod
from evalgate.cli import main
from evalgate.gate import load_policy, run_gate
from evalgate.gate.history import load_verdict
from evalgate.store import AccessRow, Store
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

PASSING = {"min_seeds": 2, "reward_hacking": False}  # seeds 1 and 2 pass these (test_gate.py)


def _policy_file(tmp_path: Path, d: dict[str, Any], name: str = "gate.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(d))
    return p


def _private(store: Store, outcome: str | None = None) -> list[AccessRow]:
    return [r for r in store.access_rows("fx-private") if outcome is None or r.outcome == outcome]


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Any]:
    return fx.build(tmp_path / "runs", seeds=(1, 2))


def test_an_unchanged_gate_reuses_its_decision_and_spends_nothing(tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    policy = load_policy(_policy_file(tmp_path, fx.policy_dict(built["baseline"], **PASSING)))
    first = run_gate(policy, store, evaluate_decision=False)
    # baseline + two seeds' best: 3 reads, all logged (reserved) before the first
    assert len(_private(store, "read")) == 3 and first.reused_from is None and first.gate_id
    rows_before = len(_private(store))
    again = run_gate(load_policy(_policy_file(tmp_path, fx.policy_dict(built["baseline"], **PASSING))), store,
                     evaluate_decision=False)
    assert again.reused_from is not None and again.reused_from.gate_id == first.gate_id
    assert len(_private(store, "read")) == 3  # nothing spent
    new = _private(store)[rows_before:]
    # the reuse, then the new verdict's uncounted result row (what 'evalgate report' checks it against)
    assert [r.outcome for r in new] == ["reused", "result"] and first.gate_id in new[0].detail
    assert new[1].detail.startswith("verdict sha256 ") and f"of gate {again.gate_id} (PASS)" in new[1].detail
    assert again.as_dict()["stats"] == first.as_dict()["stats"] and again.passed and first.passed
    stored = store.gates()
    assert [g.gate_id for g in stored] == [first.gate_id, again.gate_id]
    assert stored[1].reused_from == first.gate_id and stored[1].reason == "pass"
    assert {d["run_id"] for d in stored[0].decision_runs} == {"dec-base", "dec-1", "dec-2"}
    assert stored[0].inputs["candidate_runs"] == sorted(f"dev-{s}-{t}" for s in (1, 2) for t in fx.STEPS)


def test_a_changed_input_decides_afresh(tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    d = {**fx.policy_dict(built["baseline"], **PASSING), "baseline": {"value": 0.4}}  # 2 reads a gate: the seeds'
    run_gate(load_policy(_policy_file(tmp_path, d)), store, evaluate_decision=False)
    # another checkpoint of seed 1 (a new candidate run): the gate reads again
    fx.add_run(store, "dev-1-50", "d1-50", tmp_path / "runs" / "fx-run-seed1" / "checkpoint-50", "fx-dev", "dev", 1,
               50, fx._scores(0.5))
    second = run_gate(load_policy(_policy_file(tmp_path, d)), store, evaluate_decision=False)
    # decided afresh, but seed 1's best is still step 30 (0.5 < 0.6): both decision runs were shown by the first
    # gate, so both reads are re-reads, logged and not charged (issue 27)
    assert second.reused_from is None and sorted(second.rereads) == ["dec-1", "dec-2"]
    assert len(_private(store, "read")) == 2 and len(_private(store, "re-read")) == 2
    # a changed rule changes the policy hash: afresh too, and again nothing new is shown, nothing charged
    third = run_gate(load_policy(_policy_file(tmp_path, {**d, "bootstrap_seed": 1})), store, evaluate_decision=False)
    assert third.reused_from is None and len(_private(store, "read")) == 2 and len(_private(store, "re-read")) == 4


def test_a_reservation_is_all_or_nothing(tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    from evalgate.splits import SplitManager

    m = SplitManager(store).manifest("fx-private")
    for _ in range(2):  # 2 of 4 used: the gate needs 3 (baseline + 2 seeds), so it gets none
        SplitManager(store).log_read(m, "t", "release-gate", cached=True)
    from evalgate.core.errors import RefusedByPolicy

    with pytest.raises(RefusedByPolicy, match="needs 3 reads of private split fx-private .* only 2 of 4"):
        run_gate(load_policy(_policy_file(tmp_path, fx.policy_dict(built["baseline"], **PASSING))), store,
                 evaluate_decision=False)
    assert len(_private(store, "read")) == 2 and [r.outcome for r in _private(store)][-1] == "refused"
    assert store.gates() == []


def test_report_rerenders_a_stored_verdict_without_reading(tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    failing = {**PASSING, "min_improvement": 0.9}  # no seed beats the baseline by 0.9
    v = run_gate(load_policy(_policy_file(tmp_path, fx.policy_dict(built["baseline"], **failing))), store,
                 evaluate_decision=False)
    assert not v.passed and v.stats is not None
    (row,) = store.gates()  # the stored document rebuilds the very verdict (after its JSON round trip)
    assert load_verdict(row.document) == v and row.verdict == "FAIL" and row.reason == "fail"
    rows = len(store.access_rows())
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["report", v.gate_id or "", "--report", str(out / "r.html"), "--json-out",
                                  str(out / "r.json"), "--junit", str(out / "r.xml"), "--markdown", str(out / "r.md")])
    assert r.exit_code == 1, r.output
    assert len(store.access_rows()) == rows  # no row at all: nothing read, nothing spent
    doc = json.loads((out / "r.json").read_text())
    for key in ("verdict", "reasons", "rules", "stats", "seeds", "baseline", "reason", "gate_id", "ship"):
        assert doc[key] == json.loads(json.dumps(v.as_dict()[key])), key
    assert doc["reason"] == "fail" and doc["ship"]["checkpoint"] is None
    suite = ET.parse(out / "r.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"reason": "fail", "verdict": "FAIL", "gate_id": v.gate_id, "accept_not_checkable": "false",
                     "decision_split_size": v.as_dict()["decision_split_size"]["detail"]}
    assert "FAIL" in (out / "r.md").read_text() and "<svg" in (out / "r.html").read_text()
    printed = CliRunner().invoke(main, ["report", v.gate_id or "", "--json", "--html", str(out / "again.html")])
    assert printed.exit_code == 1 and json.loads(printed.stdout)["gate_id"] == v.gate_id  # --json: a flag, as in gate
    assert "<svg" in (out / "again.html").read_text()  # --html: the old name of --report still works
    unknown = CliRunner().invoke(main, ["report", "gate-nope"])
    assert unknown.exit_code == 2 and "no stored gate 'gate-nope'" in unknown.output


def _cli_gate(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Any:
    """``evalgate gate`` over the fixtures: their decision runs are stored, not evaluated (no model here)."""
    monkeypatch.setattr(report_mod, "run_gate", lambda p, s, a, **k: run_gate(p, s, a, evaluate_decision=False, **k))
    return CliRunner().invoke(main, ["gate", *args])


def test_gate_prints_best_last_failed_paths_and_what_to_ship(tmp_path: Path, built: dict[str, Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pol = _policy_file(tmp_path, fx.policy_dict(built["baseline"], **PASSING))
    r = _cli_gate(monkeypatch, ["--policy", str(pol)])
    assert r.exit_code == 0, r.output
    runs = tmp_path / "runs"
    lines = r.output.splitlines()
    # seed 2 collapsed at step 30 (0.7 -> 0.2); best by dev: seed 1 step 30 (0.6), seed 2 step 20 (0.7)
    for want in (f"    best: step 30 pass@1 0.600  {runs / 'fx-run-seed1' / 'checkpoint-30'}",
                 f"    last: step 40 pass@1 0.500  {runs / 'fx-run-seed1' / 'checkpoint-40'}",
                 f"    best: step 20 pass@1 0.700  {runs / 'fx-run-seed2' / 'checkpoint-20'}",
                 f"    last: step 40 pass@1 0.600  {runs / 'fx-run-seed2' / 'checkpoint-40'}"):
        assert want in lines, want
    assert any(ln.startswith(f"    failed: step 30  {runs / 'fx-run-seed2' / 'checkpoint-30'}: collapse")
               for ln in lines)
    # ship the seeds' best with the highest dev metric: seed 2's step 20 (0.7 > 0.6)
    # the fixture's checkpoint folders hold no weights: the gate warns (stderr) that it could not verify them
    ship = [ln for ln in lines if ln.startswith("ship: ")]
    assert ship == [ln for ln in lines if not ln.startswith("warning: ")][-1:]
    assert ship[0].startswith(f"ship: {runs / 'fx-run-seed2' / 'checkpoint-20'} (PASS; seed 2's best (step 20)")
    again = _cli_gate(monkeypatch, ["--policy", str(pol)])
    assert again.exit_code == 0 and "  reused decision of gate gate-" in again.output


def test_a_report_path_under_a_regular_file_is_bad_input(tmp_path: Path, built: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pol = _policy_file(tmp_path, fx.policy_dict(built["baseline"], **PASSING))
    blocker = tmp_path / "reports"
    blocker.write_text("")
    rows = len(_private(built["store"]))
    r = _cli_gate(monkeypatch, ["--policy", str(pol), "--report", str(blocker / "g.html")])
    assert r.exit_code == 2, r.output  # the verdict would be PASS (exit 0 above); the path is the user's error
    assert f"cannot write {blocker / 'g.html'}: {blocker} is a file, not a directory" in r.output
    # refused while the flags are parsed: nothing decided, no private read spent or even attempted
    assert built["store"].gates() == [] and len(_private(built["store"])) == rows
    assert _cli_gate(monkeypatch, ["--policy", str(pol)]).exit_code == 0
    (row,) = built["store"].gates()
    r = CliRunner().invoke(main, ["report", row.gate_id, "--junit", str(blocker / "sub" / "g.xml")])
    assert r.exit_code == 2 and f"{blocker} is a file, not a directory" in r.output, r.output


def test_a_gate_that_decides_nothing_still_writes_its_reports(tmp_path: Path, built: dict[str, Any],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    files = ["--junit", str(out / "j.xml"), "--markdown", str(out / "s.md"), "--json-out", str(out / "g.json")]

    def check(policy: Path, code: int, reason: str, says: str) -> None:
        r = _cli_gate(monkeypatch, ["--policy", str(policy), "--json", *files])
        assert r.exit_code == code, r.output
        doc = json.loads(r.stdout)
        assert (doc["reason"], doc["exit_code"], doc["verdict"]) == (reason, code, None) and says in doc["error"]
        assert json.loads((out / "g.json").read_text())["reason"] == reason
        suite = ET.parse(out / "j.xml").getroot().find("testsuite")
        assert suite is not None and suite.get("errors") == "1" and suite.get("tests") == "1"
        (case,) = suite.iter("testcase")
        error = case.find("error")
        assert error is not None and says in (error.get("message") or "")
        assert {p.get("name"): p.get("value") for p in suite.iter("property")}["reason"] == reason
        assert f"**{reason.upper()}**" in (out / "s.md").read_text()

    d = fx.policy_dict(built["baseline"], **PASSING)
    check(_policy_file(tmp_path, {**d, "selection_split": "fx-public"}, "public.yaml"), 2, "refused",
          "selected on a dev split only")
    check(_policy_file(tmp_path, {**d, "rules": {"min_seedz": 2}}, "typo.yaml"), 2, "invalid", "min_seedz")
    proto = tmp_path / "fx.yaml"  # frozen, then edited: drift, exit 1 like a FAIL but reason drift
    proto.write_text("name: fx\nversion: '1'\nprompt: {template: '{{ question }}'}\nscorer: {name: exact}\n")
    from evalgate.protocol.spec import load_protocol, lock_document

    (tmp_path / "fx.yaml.lock").write_text(json.dumps(lock_document(load_protocol(proto))))
    proto.write_text(proto.read_text().replace("{{ question }}", "Q: {{ question }}"))
    monkeypatch.setattr(report_mod, "run_gate", run_gate)  # evaluating: the lock is checked before any read
    r = CliRunner().invoke(main, ["gate", "--policy", str(_policy_file(tmp_path, {**d, "protocol_file": str(proto)},
                                                                       "drift.yaml")), *files])
    assert r.exit_code == 1 and r.output.splitlines()[-1] == "ship: none (drift: no verdict)"
    assert json.loads((out / "g.json").read_text())["reason"] == "drift"
    assert not [x for x in _private(built["store"]) if x.outcome in ("read", "refused")]


def test_a_training_log_that_changes_a_best_checkpoint_decides_afresh(tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    # training_guards off: the NaN below fails seed 2's later checkpoints (guards always do) without failing the
    # gate before its decision reads
    d = {**fx.policy_dict(built["baseline"], min_seeds=2, reward_hacking=False, training_guards=False),
         "baseline": {"value": 0.4}}
    run_gate(load_policy(_policy_file(tmp_path, d)), store, evaluate_decision=False)
    # same candidate runs and policy, but seed 2's log now has NaN grad_norm at step 15: 20, 30, 40 fail, best is 10
    state = tmp_path / "runs" / "fx-run-seed2" / "checkpoint-40" / "trainer_state.json"
    doc = json.loads(state.read_text())
    next(e for e in doc["log_history"] if e["step"] == 15)["grad_norm"] = float("nan")
    state.write_text(json.dumps(doc))
    fx.add_run(store, "dec-2-10", "d2-10", tmp_path / "runs" / "fx-run-seed2" / "checkpoint-10", "fx-private",
               "private", 2, 10, fx.X[2], purpose="release-gate")
    second = run_gate(load_policy(_policy_file(tmp_path, d)), store, evaluate_decision=False)
    assert second.reused_from is None and second.seeds[1].best is not None and second.seeds[1].best.step == 10
    assert second.seeds[1].decision is not None and second.seeds[1].decision.run_id == "dec-2-10"
    assert len(_private(store, "read")) == 3  # 2 + 1: seed 2's new best is new; seed 1's is shown again, uncharged
    assert [r.run_id for r in _private(store, "re-read")] == ["dec-1"]


def test_report_refuses_a_stored_verdict_edited_to_pass(tmp_path: Path, built: dict[str, Any]) -> None:
    """Adversary: a failing gate's stored verdict set to PASS in the store (verdict column and the document's
    'passed'), the access log untouched: 'evalgate report GATE_ID', which exits like the gate did, exited 0 and
    printed PASS. The gate records its verdict's sha256 in the signed log; report checks it."""
    store = built["store"]
    failing = {**PASSING, "min_improvement": 0.9}  # no seed beats the baseline by 0.9
    v = run_gate(load_policy(_policy_file(tmp_path, fx.policy_dict(built["baseline"], **failing))), store,
                 evaluate_decision=False)
    assert not v.passed and v.gate_id
    assert CliRunner().invoke(main, ["report", v.gate_id]).exit_code == 1  # before the edit: FAIL, as the gate
    with store.connect() as con:  # the edit in Python: json_merge_patch is DuckDB's, not PostgreSQL's
        (document,) = con.execute("SELECT document FROM gates WHERE gate_id=?", [v.gate_id]).fetchone()
        con.execute("UPDATE gates SET verdict='PASS', document=? WHERE gate_id=?",
                    [json.dumps({**json.loads(document), "passed": True}), v.gate_id])
    r = CliRunner().invoke(main, ["report", v.gate_id])
    assert r.exit_code == 2 and "the store was edited after the gate" in r.output, r.output  # was 0, "PASS"
    assert "PASS" not in r.output


def test_report_without_the_signing_key_says_it_cannot_check(tmp_path: Path, built: dict[str, Any]) -> None:
    """On a machine without the access log's signing key (a colleague with the store), report refuses (exit 2), and
    says the verdict cannot be checked for want of the key: not that the log 'does not hold', which reads as a
    tampered store (what a new user was told)."""
    store = built["store"]
    v = run_gate(load_policy(_policy_file(tmp_path, fx.policy_dict(built["baseline"], min_seeds=2))), store,
                 evaluate_decision=False)
    key = tmp_path / "config" / "evalgate" / "log-signing.key"  # beside the private key (conftest's home)
    moved = key.rename(tmp_path / "elsewhere.key")
    r = CliRunner().invoke(main, ["report", v.gate_id or ""])
    assert r.exit_code == 2, r.output
    assert f"gate {v.gate_id}: its stored verdict cannot be checked here" in r.output
    assert f"no access-log signing key to check the signed head with ({key} is missing)" in r.output
    assert "does not hold" not in r.output and "edited" not in r.output
    moved.rename(key)
    assert CliRunner().invoke(main, ["report", v.gate_id or ""]).exit_code == 1  # the key back: FAIL, as the gate
