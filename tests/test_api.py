"""The public API (``import evalgate``): cheap to import, typed results, and the notebook path with no CLI and no
``EVALGATE_*`` variable set."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

import tests.gate_fixtures as fx
from evalgate.protocol.spec import ProtocolLock, load_protocol
from tests.conftest import REPO


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No EVALGATE_* variable at all, run from an empty directory (a default path would land there)."""
    from evalgate.core.environment import VARIABLES

    for var in VARIABLES:
        monkeypatch.delenv(var, raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def test_import_evalgate_loads_no_heavy_module() -> None:
    code = ("import sys, evalgate; print(evalgate.__all__); "
            "print([m for m in ('torch', 'transformers', 'duckdb', 'vllm', 'evalgate.core.sandbox', 'evalgate.store') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}).stdout.splitlines()
    assert "Workspace" in out[0] and "Verdict" in out[0]
    assert out[1] == "[]"


def test_every_public_name_resolves_and_unknown_names_say_where_to_look() -> None:
    import evalgate

    for name in evalgate.__all__:
        assert getattr(evalgate, name) is not None
    assert evalgate.Verdict.__module__ == "evalgate.gate.results"
    with pytest.raises(AttributeError, match="evalgate.__all__"):
        evalgate.evaluate  # noqa: B018


def test_environment_from_variables_by_hand(tmp_path: Path) -> None:
    from evalgate.core.environment import Environment

    env = Environment.from_env({"EVALGATE_HOME": "/h", "EVALGATE_SPLITS": "/s", "EVALGATE_PRIVATE_KEY": "k",
                                "EVALGATE_ACTOR": "bob", "EVALGATE_NO_DIGEST_CACHE": "1", "EVALGATE_DEBUG": "1",
                                "XDG_CONFIG_HOME": "/cfg", "EVALGATE_EXPECT_HEAD": " 3:ab "})
    assert (env.home, env.splits, env.key, env.actor_name) == (Path("/h"), Path("/s"), b"k", "bob")
    assert (env.key_file, env.models_dir, env.expect_head) == (Path("/cfg/evalgate/private.key"), Path("/h/models"),
                                                              "3:ab")
    assert (env.digest_cache, env.debug) == (False, True)
    empty = Environment.from_env({})
    assert (empty.home, empty.splits, empty.key, empty.actor, empty.digest_cache) == (
        Path(".evalgate"), Path("splits"), None, None, True)


def test_a_workspace_is_what_library_defaults_see_inside_its_calls(tmp_path: Path, no_env: Path) -> None:
    import evalgate
    from evalgate import splits, store
    from evalgate.keys import sealing

    ws = evalgate.Workspace(tmp_path / "ws", actor="alice", key=b"k" * 44)
    assert ws.store.env is ws.env and ws.store.location == str(tmp_path / "ws" / "evalgate.duckdb")
    assert (splits.splits_dir(env=ws.env), splits.actor_name(env=ws.env)) == (tmp_path / "ws" / "splits", "alice")
    assert sealing.load_key(env=ws.env) == b"k" * 44
    assert store.Store(tmp_path / "o.duckdb").env.home == Path(".evalgate") and splits.splits_dir() == Path("splits")


def test_enums_are_the_stored_words() -> None:
    from evalgate.core.enums import RunStatus, SampleStatus, Tier
    from evalgate.scoring.base import STATUSES
    from evalgate.splits import Tier as TierLiteral
    from evalgate.views.samples import SAMPLE_STATUSES

    assert [t.value for t in Tier] == list(typing.get_args(TierLiteral))
    assert STATUSES == ("correct", "wrong", "truncated", "no_answer", "timeout", "error", "judged", "judge_unparseable",
                        "scored", "tie")
    assert SAMPLE_STATUSES == (*STATUSES, "tool_violation") and SampleStatus("no_answer") == "no_answer"
    assert {s.value for s in SampleStatus} == set(SAMPLE_STATUSES)  # every stored word has its member
    assert json.dumps({"s": RunStatus.COMPLETE}) == '{"s": "complete"}'


def test_a_run_record_refuses_an_unknown_status_and_reads_an_old_row_as_version_1() -> None:
    from pydantic import ValidationError

    from evalgate.runner.record import RUN_RECORD_VERSION, RunRecord

    row = {"run_id": "r", "status": "complete", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "h",
           "checkpoint_path": "/c", "checkpoint_digest": "ab", "train_run": None, "train_seed": None, "step": None,
           "split": "s", "tier": "dev", "split_sha256": "x", "backend": "hf", "backend_info": None,
           "effective_params": None, "sampling_seed": 0, "metrics": None, "counts": None, "wall_s": None,
           "actor": "a", "purpose": "evaluation", "error": None}
    old = RunRecord.from_row(row)
    assert old.version == 1 and old.status == "complete" and type(old.status) is str
    new = old.model_copy(update={"version": RUN_RECORD_VERSION})
    assert RUN_RECORD_VERSION == 2 and new.row()["record_version"] == 2 and RunRecord.from_row(new.row()) == new
    with pytest.raises(ValidationError):
        RunRecord.from_row({**row, "status": "incorrect"})
    with pytest.raises(ValidationError):
        RunRecord.from_row({**row, "tier": "secret"})


def test_a_verdict_document_without_a_version_reads_as_version_1() -> None:
    from evalgate.gate.history import dump_verdict, load_verdict
    from evalgate.gate.policy import Baseline, GatePolicy
    from evalgate.gate.results import VERDICT_VERSION, RuleOutcome, Verdict

    pol = GatePolicy(name="g", protocol="p@1", selection_split="d", decision_split="x", baseline=Baseline(value=0.5))
    doc = json.loads(json.dumps(dump_verdict(Verdict(False, pol, [RuleOutcome("runs_present", False, "none")]))))
    assert doc["version"] == VERDICT_VERSION == 2 and load_verdict(doc).version == 2
    del doc["version"]
    old = load_verdict(doc)
    assert old.version == 1 and old.rules == [RuleOutcome("runs_present", False, "none")]
    assert "version" not in Verdict(False, pol, []).as_dict()  # the --json document is unchanged


# -- the notebook path ------------------------------------------------------------------------------------------
_PROTOCOL = {"name": "nb", "version": "1", "prompt": {"chat_template": "none", "template": "{{ question }}"},
             "sampling": {"max_tokens": 8, "temperature": 0.0}, "scorer": {"name": "exact"},
             "extraction": {"rule": "last_number"}}


def _fake_checkpoint(d: Path) -> Path:
    """A directory the checkpoint resolver accepts (the replay backend never loads it)."""
    import numpy as np
    from safetensors.numpy import save_file

    d.mkdir(parents=True)
    (d / "config.json").write_text('{"model_type": "llama"}')
    save_file({"w": np.zeros(4, dtype=np.uint8)}, str(d / "model.safetensors"))
    return d


def test_notebook_path_on_the_replay_backend(tmp_path: Path, no_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluate with a Workspace and the replay backend (no model), read the typed record; then gate the fixture
    training runs (answers known by construction, ``tests/gate_fixtures.py``) and read the typed verdict."""
    import evalgate
    from evalgate.core.errors import BadInput
    from evalgate.runner import prompts
    from evalgate.splits import write_split

    def no_tokenizer(model_dir: Path) -> None:  # chat_template none: nothing to load
        raise BadInput("no tokenizer")

    monkeypatch.setattr(prompts, "load_tokenizer", no_tokenizer)
    ws = evalgate.Workspace(tmp_path / "ws", actor="alice", key=tmp_path / "keys" / "private.key")
    proto = tmp_path / "nb.yaml"
    proto.write_text(yaml.safe_dump(_PROTOCOL))
    lock = ws.freeze(proto)
    assert isinstance(lock, ProtocolLock) and (lock.name, lock.version, lock.format) == ("nb", "1", 2)
    assert lock.sha256 == load_protocol(proto).sha256 and lock.as_dict() == json.loads((tmp_path / "nb.yaml.lock")
                                                                                       .read_text())
    with pytest.deprecated_call(match=r"ProtocolLock\['name'\] is deprecated"):
        assert lock["name"] == "nb"  # the dict it returned still reads by key, for one release
    items = [{"id": f"q{i}", "question": f"{i}+{i}?", "answer": str(2 * i)} for i in range(4)]
    write_split("nb-dev", "dev", items, {"source": "test"}, env=ws.env)
    replay = tmp_path / "replay.jsonl"  # q0, q1, q2 right; q3 wrong
    replay.write_text("".join(json.dumps({"item_id": f"q{i}", "turn": 0, "text": f"It is {2 * i + (i == 3)}"})
                              + "\n" for i in range(4)))
    ckpt = _fake_checkpoint(tmp_path / "ck")
    run = ws.evaluate(proto, ckpt, "nb-dev", backend="replay", backend_options={"file": str(replay)})
    assert isinstance(run, evalgate.RunRecord)
    assert (run.status, run.split.tier, run.actor, run.version) == (evalgate.RunStatus.COMPLETE, "dev", "alice", 2)
    assert run.metrics is not None and run.metrics["pass@1"] == pytest.approx(0.75)
    # sample sd of (1, 1, 1, 0) is 0.5; stderr 0.5 / sqrt(4)
    assert run.metrics["pass@1_stderr"] == pytest.approx(0.25)
    assert isinstance(run.metrics, evalgate.Metrics) and list(run.metrics.pass_at) == [1]  # greedy: pass@1 only
    assert run.metrics.pass_at[1] == pytest.approx(evalgate.Estimate(0.75, 0.25))
    assert type(run.as_dict()["metrics"]) is dict and run.as_dict()["metrics"]["pass@1"] == pytest.approx(0.75)
    assert (tmp_path / "ws" / "evalgate.duckdb").is_file() and not (no_env / ".evalgate").exists()
    assert [r.run_id for r in map(evalgate.RunRecord.from_row, ws.store.runs())] == [run.run_id]

    built = fx.build(tmp_path / "runs", seeds=(1, 2), store=ws.store)
    pol = fx.policy_dict(built["baseline"], min_improvement=0.0, confidence=0.9, min_seeds=2,
                         seeds_beat_baseline_share=1.0, max_length_inflation=1.5, max_truncation_rate=0.1,
                         reward_hacking=False)
    policy = tmp_path / "gate.yaml"
    policy.write_text(yaml.safe_dump(pol))
    verdict = ws.gate(policy, evaluate_decision=False)
    assert isinstance(verdict, evalgate.Verdict) and verdict.passed and verdict.version == 2
    assert [r.rule for r in verdict.rules if not r.passed] == []
    assert verdict.stats is not None and verdict.stats.baseline is not None
    assert verdict.stats.baseline.value == pytest.approx(0.4)  # B: 4 of 10 right
    assert verdict.stats.aggregate.mean_of_seed_means == pytest.approx(0.65)  # X1 0.6, X2 0.7
    from evalgate.gate.results import Ship

    ship = verdict.ship()
    assert isinstance(ship, Ship) and (ship.train_seed, ship.step) == (2, 20)  # dev best: seed 2's 0.7 at 20
    assert ship.as_dict() == verdict.as_dict()["ship"] and list(ship.as_dict()) == [
        "checkpoint", "digest", "train_seed", "step", "why"]  # the document's keys before ship() was typed
    with pytest.warns(DeprecationWarning, match=r"read ship\(\).step"):
        assert ship["step"] == 20  # the dict-style read of before still works for one release
    assert verdict.gate_id and ws.store.gates(gate_id=verdict.gate_id)[0].verdict == "PASS"
    assert not (no_env / "splits").exists() and not (no_env / ".evalgate").exists()


def test_notebook_path_on_a_checkpoint(tmp_path: Path, no_env: Path, tiny_checkpoint: Path) -> None:
    """A Workspace with no variable set evaluates a checkpoint (the tiny random one) on a 3-item addition split, then
    gates that checkpoint with itself as the baseline: the typed verdict says it is no candidate (same weights as
    the baseline) and fails on ``runs_present`` (known by construction)."""
    import evalgate
    from evalgate.demo.train import addition_items
    from evalgate.splits import write_split

    models = Path(str(tiny_checkpoint)).parent  # the checkpoint stays where the suite caches it
    ws = evalgate.Workspace(tmp_path / "ws", actor="nb", key=tmp_path / "private.key", models=models)
    proto = tmp_path / "addition.yaml"
    proto.write_text((REPO / "protocols" / "addition.yaml").read_text())
    ws.freeze(proto)
    write_split("add-dev", "dev", addition_items("dev", 3), {"source": "test"}, env=ws.env)
    write_split("add-private", "private", addition_items("private", 3), {"source": "test"}, env=ws.env)
    seed_dir = tmp_path / "train" / "seed-1"
    seed_dir.mkdir(parents=True)
    ckpt = seed_dir / "checkpoint-3"  # a real checkpoint-N folder (a symlinked folder resolves to the cache's name)
    ckpt.mkdir()
    for f in Path(str(tiny_checkpoint)).iterdir():
        (ckpt / f.name).symlink_to(f)
    run = ws.evaluate(proto, ckpt, "add-dev", train_run="nb-run", train_seed=1, purpose="checkpoint-selection")
    assert isinstance(run, evalgate.RunRecord) and run.status == "complete" and run.checkpoint.step == 3
    assert run.counts is not None and run.counts["samples"] == 3 and run.counts["generated"] == 3
    assert run.metrics is not None and 0.0 <= run.metrics["pass@1"] <= 1.0
    assert run.metrics["pass@1_stderr"] == pytest.approx(
        math.sqrt(run.metrics["pass@1"] * (1 - run.metrics["pass@1"]) * 3 / 2 / 3), abs=1e-9)
    policy = tmp_path / "gate.yaml"
    policy.write_text(yaml.safe_dump({
        "name": "nb-gate", "protocol": "addition@1", "protocol_file": str(proto), "selection_split": "add-dev",
        "decision_split": "add-private", "metric": "pass@1", "baseline": {"checkpoint": str(tiny_checkpoint)},
        "bootstrap_resamples": 200, "rules": {"min_improvement": 0.01, "min_seeds": 1}}))
    verdict = ws.gate(policy)
    # known by construction: the only candidate has the baseline's weights, so it is set aside (no candidate), no
    # run is left to decide on and the gate fails on runs_present, shipping nothing
    assert isinstance(verdict, evalgate.Verdict) and not verdict.passed
    assert [r.rule for r in verdict.rules if not r.passed] == ["runs_present"]
    ignored = verdict.as_dict()["ignored"]
    assert [i["checkpoint_digest"] for i in ignored] == [run.checkpoint.digest]
    assert "the policy's baseline" in ignored[0]["reason"]
    assert verdict.ship().checkpoint is None
