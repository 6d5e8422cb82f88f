"""Selection that cannot drift (issue 13, points 6, 7, 8 and 14b): only runs on the selection split's current
content, failures outside the checkpoint never change the pick, only checkpoints of a training run and seed are
candidates, and a malformed policy names file:line. Answers by construction from tests/gate_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evalgate.core.errors import BadInput
from evalgate.gate import load_policy, run_gate
from evalgate.gate.report.outputs import markdown_summary, render_html
from evalgate.splits import write_split
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


def _gate(tmp_path: Path, built: dict, **over: object) -> dict:
    d = {**fx.policy_dict(built["baseline"], reward_hacking=False, training_guards=False), **over}
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(d))
    v = run_gate(load_policy(p), built["store"], evaluate_decision=False)
    return {"v": v, "doc": v.as_dict()}


def test_runs_on_older_split_content_are_stale(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1,))  # dev by step: 10: .3, 20: .5, 30: .6 (best), 40: .5
    store = built["store"]
    # new content of the selection split (one more item); only steps 10 and 20 are evaluated on it
    write_split("fx-dev", "dev", [*fx.ITEMS, {"id": "q10", "question": "10+10", "answer": "20"}], {"source": "t"})
    ck = tmp_path / "runs" / "fx-run-seed1"
    fx.add_run(store, "dev-new-10", "d1-10", ck / "checkpoint-10", "fx-dev", "dev", 1, 10, fx._scores(0.5))
    fx.add_run(store, "dev-new-20", "d1-20", ck / "checkpoint-20", "fx-dev", "dev", 1, 20, fx._scores(0.4))
    fx.add_run(store, "dec-1-10", "d1-10", ck / "checkpoint-10", "fx-private", "private", 1, 10, fx.X[1],
               purpose="release-gate")
    g = _gate(tmp_path, built)
    (seed,) = g["doc"]["seeds"]
    # the old-content runs of steps 30 and 40 (0.6 and 0.5) must not compete with new-content runs
    assert [c["step"] for c in seed["checkpoints"]] == [10, 20]
    assert (seed["best"]["step"], seed["last"]["step"]) == (10, 20)
    stale = {a["run_id"]: a["reason"] for a in g["doc"]["stale"]}
    assert set(stale) == {"dev-1-10", "dev-1-20", "dev-1-30", "dev-1-40"}
    assert "missing; re-evaluate" in stale["dev-1-30"] and "missing" in stale["dev-1-40"]
    assert "a run on the current content is used" in stale["dev-1-10"]
    html = render_html(g["v"])
    assert "Stale: run on older content of fx-dev" in html and "dev-1-30" in html
    assert "Runs set aside: 4 stale" in markdown_summary(g["v"])


def test_failures_outside_the_checkpoint_do_not_change_the_pick(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1,))  # best 30, last 40
    store = built["store"]
    ck = tmp_path / "runs" / "fx-run-seed1"
    # the case: a later vllm run of the best checkpoint, without a training seed, failed (engine missing)
    fx.add_run(store, "vllm-30", "d1-30", ck / "checkpoint-30", "fx-dev", "dev", None, None, None, status="failed",
               backend="vllm", error="MissingExtra: backend vllm needs the vllm extra: pip install 'evalgate[vllm]'")
    # Ctrl-C on a re-run of step 20, and two newer checkpoints whose only runs failed outside the checkpoint
    fx.add_run(store, "int-20", "d1-20", ck / "checkpoint-20", "fx-dev", "dev", 1, 20, None, status="interrupted",
               error="stopped by the user (Ctrl-C)")
    fx.add_run(store, "bad-50", "d1-50", ck / "checkpoint-50", "fx-dev", "dev", 1, 50, None, status="failed",
               error="BadInput: unknown backend option 'tensor_paralel'")
    fx.add_run(store, "int-60", "d1-60", ck / "checkpoint-60", "fx-dev", "dev", 1, 60, None, status="interrupted",
               error="stopped by the user (Ctrl-C)")
    # a complete run of another backend scores step 20 at 1.0: sampled outputs differ by engine, it must not count
    fx.add_run(store, "vllm-20", "d1-20", ck / "checkpoint-20", "fx-dev", "dev", 1, 20, fx._scores(1.0),
               backend="vllm")
    g = _gate(tmp_path, built)
    seeds = g["doc"]["seeds"]
    assert [s["train_seed"] for s in seeds] == [1]
    (s,) = seeds
    assert (s["best"]["step"], s["last"]["step"], s["failed"]) == (30, 40, [])
    fail = {a["run_id"]: a["reason"] for a in g["doc"]["failures"]}
    assert set(fail) == {"vllm-30", "int-20", "bad-50", "int-60"}
    assert "a complete run of this checkpoint is used" in fail["vllm-30"] and "MissingExtra" in fail["vllm-30"]
    assert "failed outside the checkpoint" in fail["bad-50"] and "failed outside the checkpoint" in fail["int-60"]
    assert [a["run_id"] for a in g["doc"]["ignored"]] == ["vllm-20"]


def test_only_checkpoints_of_a_training_run_and_seed_are_candidates(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1,))
    before = len([r for r in built["store"].access_rows("fx-private") if r.outcome not in ("refused", "result")])
    # a fixed-value baseline: the base model's dev run (no training seed) is no longer the baseline's
    g = _gate(tmp_path, built, baseline={"value": 0.4}, rules={"min_seeds": 1, "reward_hacking": False})
    assert [s["train_seed"] for s in g["doc"]["seeds"]] == [1]
    (ign,) = g["doc"]["ignored"]
    assert ign["run_id"] == "dev-base"
    assert "train seed recorded: only checkpoints of a training run and seed" in ign["reason"]
    assert g["doc"]["rules"][0]["detail"].startswith("1 seed(s) with a non-failed best checkpoint (1)")
    # one private read: seed 1's best; the base model costs none (the read's uncharged ``result`` row aside)
    after = [r for r in built["store"].access_rows("fx-private") if r.outcome not in ("refused", "result")]
    assert len(after) - before == 1


def test_malformed_yaml_gives_file_line_not_a_pyyaml_dump(tmp_path: Path) -> None:
    from evalgate.protocol.spec import load_protocol

    p = tmp_path / "gate.yaml"
    p.write_text("name: g\nprotocol: p@1\nrules: {min_seeds: 2\nselection_split: s\n")
    with pytest.raises(BadInput) as e:
        load_policy(p)
    msg = e.value.message
    assert msg.startswith(f"{p}:4:") and "gate policy is not valid YAML" in msg and "line 3" in msg
    assert "\n" not in msg and "<unicode string>" not in msg
    p.write_text("- just\n- a list\n")
    with pytest.raises(BadInput, match="must be a YAML mapping"):
        load_policy(p)
    p.write_bytes(b"name: g\n# caf\xe9\n")  # saved as Latin-1: bad input naming the line, not an internal error
    with pytest.raises(BadInput, match=rf"{p}:2: not UTF-8 text"):
        load_policy(p)
    proto = tmp_path / "p.yaml"
    proto.write_text("name: p\nversion: '1'\nprompt: {template: 'x'\nscorer: {name: exact}\n")
    with pytest.raises(BadInput) as e:
        load_protocol(proto)
    assert e.value.message.startswith(f"{proto}:4:") and "\n" not in e.value.message


def test_every_checkpoint_failed_with_a_baseline_checkpoint_is_a_fail_not_a_crash(tmp_path: Path) -> None:
    # the old gate read the baseline's decision value back out of a dict that only the statistics of a candidate
    # filled in: with no candidate it raised KeyError (exit 3)
    (tmp_path / "runs").mkdir()
    built = fx.build(tmp_path / "runs", seeds=())
    ck = tmp_path / "runs" / "fx-run-seed4" / "checkpoint-10"
    fx.add_run(built["store"], "dev-4-10", "d4-10", ck, "fx-dev", "dev", 4, 10, None, status="failed")
    g = _gate(tmp_path, built, rules={"min_seeds": 1})
    assert not g["v"].passed
    rules = [(r["rule"], r["passed"]) for r in g["doc"]["rules"]]
    assert rules[:2] == [("best_checkpoint", False), ("min_seeds", False)]
    assert g["doc"]["seeds"][0]["failed"][0]["failed_reasons"][0].startswith("run error (EngineError")


def test_a_candidate_that_is_the_baseline_is_listed_as_ignored(tmp_path: Path) -> None:
    """Issue 28, item 15: a candidate checkpoint that is the policy's baseline itself was dropped without a word
    (ignored: [])."""
    built = fx.build(tmp_path / "runs", seeds=(1,))  # dev by step: 10: .3, 20: .5, 30: .6 (best), 40: .5
    run = tmp_path / "runs" / "fx-run-seed1"
    ck30 = run / "checkpoint-30"
    # with 30 as the baseline the best candidate is 20 (.5): its decision run
    fx.add_run(built["store"], "dec-1-20", "d1-20", run / "checkpoint-20", "fx-private", "private", 1, 20, fx.X[1],
               purpose="release-gate")
    g = _gate(tmp_path, {**built, "baseline": str(ck30)})
    ignored = {a["run_id"]: a["reason"] for a in g["doc"]["ignored"]}
    # the fixture's old baseline directory (no training seed) is ignored as before; checkpoint-30 for being the baseline
    assert set(ignored) == {"dev-1-30", "dev-base"} and "is the policy's baseline" in ignored["dev-1-30"]
    (seed,) = g["doc"]["seeds"]
    assert [c["step"] for c in seed["checkpoints"]] == [10, 20, 40]  # still no candidate


def test_the_only_candidate_is_the_baseline(tmp_path: Path) -> None:
    """Issue 28, item 15, the reported shape: the only trained checkpoint is the baseline; the message said no run
    with a training run and seed exists, and ignored was empty."""
    write_split("fx-dev", "dev", fx.ITEMS, {"source": "test fixture"})
    write_split("fx-private", "private", fx.ITEMS, {"source": "test fixture"})
    store = fx.Store()
    store.record_protocol(*fx.PROTO, fx.HASH, {})
    only = tmp_path / "only" / "checkpoint-5"
    only.mkdir(parents=True)
    fx.add_run(store, "dev-only", "donly", only, "fx-dev", "dev", 7, 5, fx._scores(0.5))
    fx.add_run(store, "dec-only", "donly", only, "fx-private", "private", 7, 5, fx.X[1], purpose="release-gate")
    g = _gate(tmp_path, {"store": store, "baseline": str(only)})
    assert [a["run_id"] for a in g["doc"]["ignored"]] == ["dev-only"]
    assert "1 ignored" in g["v"].rules[0].detail
