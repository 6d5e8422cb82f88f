"""``evalgate sweep`` run locally: checkpoint discovery, one model load per checkpoint, skipping complete units, and
Ctrl-C marking the running unit interrupted so a rerun generates only what is missing (the tiny random checkpoint
with SmolLM2's tokenizer: real loads and decoding, what the text says does not matter here; real DuckDB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.runner.evaluate import RunOptions
from evalgate.store import Store
from evalgate.sweep import SweepOptions, UnitSummary, discover_checkpoints, sweep
from evalgate.sweep import local as local_mod
from tests.conftest import REPO
from tests.sweep.sweep_fixtures import addition_protocol, addition_split, make_checkpoints


def test_discovery_orders_by_step_and_says_what_it_ignored(home: Path, tiny_checkpoint: Path,
                                                           gguf_path: Path) -> None:
    seed_dir = home / "runs" / "grpo" / "seed-1"
    make_checkpoints(home / "runs", tiny_checkpoint, [20, 5])
    (seed_dir / "checkpoint-30").mkdir()  # an optimizer-only folder: no config.json
    (seed_dir / "final.gguf").symlink_to(gguf_path)
    found, ignored = discover_checkpoints(str(seed_dir / "*"))
    # by training run, seed, step: the GGUF carries no training run (sorts first), then step 5 before 20 although
    # "checkpoint-20" sorts before "checkpoint-5" as text
    assert [(c.kind, c.step) for c in found] == [("gguf", None), ("hf", 5), ("hf", 20)]
    assert found[1].train_run == "grpo" and found[1].train_seed == 1
    assert len(ignored) == 1 and "checkpoint-30: not a checkpoint" in ignored[0]
    with pytest.raises(BadInput, match="matches no checkpoint"):
        discover_checkpoints(str(home / "nothing-*"))


def test_cli_sweep_loads_each_model_once_and_skips_complete_units(home: Path, tiny_checkpoint: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    make_checkpoints(home / "runs", tiny_checkpoint, [10, 20])
    proto = addition_protocol(home, max_tokens=4, n=2)
    addition_split("dev-a", 1)
    addition_split("dev-b", 1, first=5)  # other items: nothing shared through the generation cache
    loads: list[str] = []
    real_get_backend = local_mod.get_backend

    def counting_get_backend(name: str, model_dir: str, *a: object, **k: object) -> object:
        loads.append(model_dir)
        return real_get_backend(name, model_dir, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(local_mod, "get_backend", counting_get_backend)
    args = ["sweep", "--protocol", str(proto), "--checkpoints", str(home / "runs/*/*/checkpoint-*"),
            "--split", "dev-a", "--split", "dev-b", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "Loading weights" not in res.stderr and "unit/s" not in res.stderr  # --json: no progress bars
    doc = json.loads(res.stdout)
    assert doc["counts"] == {"done": 4}
    assert [(u["step"], u["split"]) for u in doc["units"]] == [(10, "dev-a"), (10, "dev-b"), (20, "dev-a"),
                                                               (20, "dev-b")]
    assert len(loads) == 2 and loads[0].endswith("checkpoint-10") and loads[1].endswith("checkpoint-20")
    store = Store()
    runs = {r.run_id: r for r in store.runs()}
    assert {runs[u["run_id"]].status for u in doc["units"]} == {"complete"}
    assert all(u["generated"] == 2 and runs[u["run_id"]].counts["generated"] == 2 for u in doc["units"])
    reads = len(store.access_rows())

    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    doc2 = json.loads(again.stdout)
    assert doc2["counts"] == {"skipped": 4}
    assert [u["run_id"] for u in doc2["units"]] == [u["run_id"] for u in doc["units"]]
    assert len(store.runs()) == 4 and len(store.access_rows()) == reads  # a skipped unit reads nothing
    assert len(loads) == 2

    # without --json the sweep ends with its scores (no second command needed): per unit, pass@1 = the share of
    # its split's one item's 2 samples scored correct, n = 1 item (a stderr over one item is undefined: none shown)
    text = CliRunner().invoke(main, args[:-1])
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    at = lines.index("results:")
    assert lines[at + 1].split() == ["run", "checkpoint", "step", "seed", "split", "pass@1", "±", "stderr", "n"]
    for u, line in zip(doc["units"], lines[at + 3:], strict=True):
        correct = [s.status == "correct" for s in store.sample_scores(u["run_id"])]
        assert len(correct) == 2
        assert line.split() == [u["run_id"], f"seed-1/checkpoint-{u['step']}", str(u["step"]), "1", u["split"],
                                f"{sum(correct) / 2:.3f}", "1"]


def test_ctrl_c_marks_the_running_unit_interrupted_and_a_rerun_generates_only_the_rest(
        home: Path, tiny_checkpoint: Path) -> None:
    make_checkpoints(home / "runs", tiny_checkpoint, [10])
    proto = addition_protocol(home, max_tokens=4, n=1)
    addition_split("dev-a", 3)
    pattern = str(home / "runs/*/*/checkpoint-*")

    def ctrl_c(unit: object, stored: int) -> None:  # SIGINT arriving in the main thread after the first store
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(proto, pattern, ["dev-a"], SweepOptions(run=RunOptions(progress=False), on_stored=ctrl_c), Store())
    store = Store()
    (first,) = store.runs()
    assert first.status == "interrupted" and "Ctrl-C" in first.error

    summary = sweep(proto, pattern, ["dev-a"], SweepOptions(run=RunOptions(progress=False)), Store())
    (unit,) = summary.units
    assert isinstance(unit, UnitSummary) and (unit.split, unit.step, unit.attempts, unit.node_id) == (
        "dev-a", 10, 0, None)  # run here: no Ray worker tried
    assert unit.status == "done" and unit.generated == 2  # 3 items, 1 stored before Ctrl-C
    assert summary.counts == {"done": 1} and summary.failed == [] and summary.exit_code == 0
    # the document it returned before it was typed still reads by key, for one release
    with pytest.deprecated_call(match=r"SweepSummary\['units'\] is deprecated"):
        assert summary["units"] == [unit.as_dict()] and summary["units"][0]["generated"] == 2
    with pytest.deprecated_call(match=r"UnitSummary\['run_id'\]"):
        assert unit["run_id"] == unit.run_id
    done = next(r for r in store.runs() if r.run_id == unit.run_id)
    assert done.counts["cached"] == 1 and done.counts["samples_from"][first.run_id] == 1


@pytest.mark.integration  # a fresh interpreter: what importing the sweep loads
def test_nothing_imports_ray_without_the_ray_flag() -> None:
    code = ("import sys, evalgate.cli, evalgate.sweep, evalgate.sweep.local, evalgate.commands.sweep; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_gate_evaluate_missing_sweeps_the_selection_split_with_the_policy_backend(home: Path,
                                                                                   tiny_checkpoint: Path) -> None:
    from evalgate.gate.missing import evaluate_missing

    make_checkpoints(home / "runs", tiny_checkpoint, [10])
    proto = addition_protocol(home, max_tokens=4, n=1)
    addition_split("dev-a", 1)
    policy = home / "gate.yaml"
    policy.write_text(f"name: g\nprotocol: sweep-addition@1\nprotocol_file: {proto.name}\nselection_split: dev-a\n"
                      "decision_split: private-a\nbaseline:\n  value: 0.5\n")
    pattern = str(home / "runs/*/*/checkpoint-*")
    summary = evaluate_missing(policy, pattern, progress=False, store=Store())
    assert summary.counts == {"done": 1} and summary.splits == ["dev-a"]
    (run,) = Store().runs(split="dev-a", status="complete")
    assert run.backend == "hf" and run.step == 10 and run.train_run == "grpo"
    assert evaluate_missing(policy, pattern, progress=False, store=Store()).counts == {"skipped": 1}


def test_gate_evaluate_missing_says_which_checkpoint_it_dropped_as_a_duplicate(home: Path,
                                                                             tiny_checkpoint: Path) -> None:
    """Issue 28 item 17: seed 2's checkpoint-10 holding the very files of seed 1's was dropped by
    ``gate --evaluate-missing`` without a word (only ``sweep`` listed it). Right: named, with the seed it lacks."""
    make_checkpoints(home / "runs", tiny_checkpoint, [10], seed=1)
    make_checkpoints(home / "runs", tiny_checkpoint, [10], seed=2)  # same config marker, same links: same digest
    proto = addition_protocol(home, max_tokens=4, n=1)
    addition_split("dev-a", 1)
    policy = home / "gate.yaml"
    policy.write_text(f"name: g\nprotocol: sweep-addition@1\nprotocol_file: {proto.name}\nselection_split: dev-a\n"
                      "decision_split: private-a\nbaseline:\n  value: 0.5\n")
    res = CliRunner().invoke(main, ["gate", "--policy", str(policy), "--evaluate-missing",
                                    str(home / "runs/*/*/checkpoint-*")])
    dup = home / "runs" / "grpo" / "seed-2" / "checkpoint-10"
    line = next((ln for ln in res.stderr.splitlines() if ln.startswith("--evaluate-missing: not evaluated:")), "")
    assert f"not evaluated: {dup}: the same checkpoint" in line, res.output
    assert str(home / "runs" / "grpo" / "seed-1" / "checkpoint-10") in line
    assert "grpo seed 2 step 10 vs grpo seed 1 step 10" in line and "no run of its own" in line
    assert [r.train_seed for r in Store().runs(split="dev-a")] == [1]


def test_a_protocol_that_offers_tools_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """An agentic protocol needs the multi-turn loop, which only `evalgate run` drives: the sweep refuses it
    (exit 2) before finding checkpoints or reading a split."""
    r = CliRunner().invoke(main, ["sweep", "--protocol", str(REPO / "protocols" / "tool-probe.yaml"),
                                  "--checkpoints", str(tmp_path / "none-*"), "--split", "any"])
    assert r.exit_code == 2 and "offers tools" in r.output, r.output


def test_a_split_the_tier_never_lets_a_sweep_read_is_refused_and_logged_before_planning(home: Path) -> None:
    """A sweep on a private split must neither start nor report the gate's complete release-gate runs there as
    'skipped' units: it is refused before any stored run is looked at, and the refusal is in the access log."""
    from evalgate.core.errors import RefusedByPolicy
    from evalgate.protocol.spec import load_protocol
    from evalgate.sweep.units import plan_units

    addition_split("private-a", 1, tier="private")
    addition_split("dev-a", 1)
    protocol = load_protocol(addition_protocol(home, max_tokens=4, n=1))
    with pytest.raises(RefusedByPolicy, match="private-a \\(tier private\\) may be read only for purpose release-gate"):
        plan_units(protocol, [], ["dev-a", "private-a"], RunOptions(purpose="sweep", actor="ann"), Store())
    rows = [(r.actor, r.purpose, r.outcome) for r in Store().access_rows("private-a")]
    assert rows[-1] == ("ann", "sweep", "refused")
    assert plan_units(protocol, [], ["dev-a"], RunOptions(purpose="sweep"), Store()) == []
