"""Issue 13 point 2: gates started together on one private split. Each reserves all its decision reads in one locked
step before reading anything, so exactly one decides and the others are refused having spent nothing (a private
result shown before is a free re-read, issue 27, so each gate here needs a read no other has made); then an
unchanged gate reuses the stored decision (point 5). Real ``evalgate gate`` processes, variants of the tiny random
checkpoint on tiny splits, a real DuckDB store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.gate import load_policy, run_gate
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import DEFAULT_POLICIES
from evalgate.store import AccessRow, Store
from evalgate.views.audit import verify_chain
from tests.gate.test_real import REPO, _variant, tiny_addition


def _counted(rows: list[AccessRow]) -> list[AccessRow]:
    return [r for r in rows if r.outcome in ("read", "override")]


@pytest.mark.integration  # four gate processes at once
@pytest.mark.timeout(900)
def test_four_gates_at_once_one_decides_three_refused_spending_nothing(home: Path, tiny_checkpoint: Path) -> None:
    # the private tier's policy with a budget of 3 reads / 30 days (a manifest may lower the tier's 4)
    ppath = tiny_addition(home, "cc", DEFAULT_POLICIES["private"].model_copy(update={"max_reads": 3}))
    ck = _variant(tiny_checkpoint, home / "train" / "seed1" / "checkpoint-2", 2)
    evaluate(ppath, ck, "cc-dev", RunOptions(train_run="cc", train_seed=1, progress=False), store=Store())

    def policy(name: str, baseline: Path) -> Path:
        p = home / f"{name}.yaml"
        p.write_text(yaml.safe_dump({
            "name": name, "protocol": "cc-add@1", "protocol_file": str(ppath), "selection_split": "cc-dev",
            "decision_split": "cc-private", "baseline": {"checkpoint": str(baseline)},
            "rules": {"min_seeds": 1, "max_truncation_rate": 1.0, "training_guards": False,
                      "reward_hacking": False}}))  # no training log: both would fail as not checkable
        return p

    # a first gate (baseline + seed 1's best = 2 reads) leaves 1 of 3
    first = run_gate(load_policy(policy("g0", tiny_checkpoint)), Store())
    store = Store()
    assert len(_counted(store.access_rows("cc-private"))) == 2
    before = len(store.access_rows("cc-private"))

    def gate(name: str, actor: str, baseline: Path) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "evalgate.cli", "gate", "--policy", str(policy(name, baseline)),
                                 "--actor", actor], cwd=REPO, env={**os.environ}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    # four different gates (their own names: no one can reuse another's verdict), started together, each against a
    # baseline of its own (a checkpoint no gate has shown on the private split): each needs exactly 1 new read (its
    # baseline; seed 1's best was shown by g0, a free re-read), and 1 is left, so exactly one can decide whatever
    # the timing
    bases = [_variant(tiny_checkpoint, home / "bases" / f"b{i}", 100 + i) for i in range(1, 5)]
    procs = [gate(f"g{i}", f"actor-{i}", bases[i - 1]) for i in range(1, 5)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = [p.returncode for p in procs]
    winners = [i for i, c in enumerate(codes) if c in (0, 1)]
    assert len(winners) == 1 and sorted(codes).count(2) == 3, (codes, outs)
    for i, (out, err) in enumerate(outs):
        if i not in winners:
            assert "the gate needs 1 read of private split cc-private" in err and "only 0 of 3" in err, err
            assert "nothing was read or spent" in err and out.splitlines()[-1] == "ship: none (refused: no verdict)"
    new = store.access_rows("cc-private")[before:]
    by_actor = {f"actor-{i}": [r for r in new if r.actor == f"actor-{i}"] for i in range(1, 5)}
    win = f"actor-{winners[0] + 1}"
    # the winner: 1 read reserved (counted) before reading, its baseline run logged under the reservation (not
    # counted) and its stored result recorded when it completed (not counted), seed 1's best shown again as a free
    # re-read, and its verdict recorded when stored (not counted)
    won = by_actor.pop(win)
    assert sorted(r.outcome for r in won) == ["re-read", "read", "reserved-read", "result", "result"], won
    assert {r.outcome: r.checkpoint_digest for r in won}["re-read"] == first.seeds[0].best.digest  # type: ignore[union-attr]
    assert {a: [r.outcome for r in rows] for a, rows in by_actor.items()} == {a: ["refused"] for a in by_actor}
    assert len(_counted(store.access_rows("cc-private"))) == 3
    text = outs[winners[0]][0].splitlines()
    # the CLI writes numbers through evalgate.core.formatting: three decimals
    assert f"    best: step 2 pass@1 {first.seeds[0].best.value:.3f}  {ck}" in text  # type: ignore[union-attr]
    if codes[winners[0]] != 0:
        assert text[-1].startswith("ship: none (gate FAIL: ")

    # the first gate again, unchanged: its stored decision is reused, nothing is read or spent
    rows = len(store.access_rows("cc-private"))
    again = CliRunner().invoke(main, ["gate", "--policy", str(policy("g0", tiny_checkpoint))])
    assert again.exit_code in (0, 1), again.output
    assert f"  reused decision of gate {first.gate_id} from " in again.output
    assert [r.outcome for r in store.access_rows("cc-private")[rows:]] == ["reused", "result"]
    assert verify_chain(store)["ok"]
