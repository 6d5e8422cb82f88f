"""A stored private result edited in the store, then shown again without a read (adversary): the access log is
hash-chained and its head signed, but the decision runs' per-item scores beside it were not, so whoever could
replace the store (a CI cache, docs/CI.md) could set a failing checkpoint's private scores to 1 and rerun the
unchanged gate: it reused the stored decision, or showed the edited run again as a free re-read, and passed without
evaluating anything, ``audit verify`` still ok. Real ``evalgate gate`` (CliRunner), variants of the tiny random
checkpoint on tiny splits, a real DuckDB file edited with duckdb."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.store import Store
from evalgate.views.audit import verify_chain
from tests.gate.test_real import _variant, tiny_addition


def _policy(home: Path, name: str, proto: Path, baseline: Path) -> Path:
    p = home / f"{name}.yaml"
    p.write_text(yaml.safe_dump({
        "name": name, "protocol": "sr-add@1", "protocol_file": str(proto), "selection_split": "sr-dev",
        "decision_split": "sr-private", "baseline": {"checkpoint": str(baseline)},
        # the candidate must beat the baseline by half the items: two variants of one model never do; the log-based
        # rules off (no trainer_state.json: they would fail as not checkable before the private read tested here)
        "rules": {"min_seeds": 1, "max_truncation_rate": 1.0, "min_improvement": 0.5,
                  "training_guards": False, "reward_hacking": False}}))  # no training log beside the variants
    return p


@pytest.mark.timeout(900)
def test_an_edited_private_result_is_refused_not_reused_or_re_read(home: Path, tiny_checkpoint: Path) -> None:
    proto = tiny_addition(home, "sr")
    ck = _variant(tiny_checkpoint, home / "train" / "seed1" / "checkpoint-2", 2)
    evaluate(proto, ck, "sr-dev", RunOptions(train_run="sr", train_seed=1, progress=False), store=Store())
    cli = CliRunner()
    first = cli.invoke(main, ["gate", "--policy", str(_policy(home, "g1", proto, tiny_checkpoint)), "--json"])
    assert first.exit_code == 1, first.output  # FAIL, honestly
    store = Store()
    candidate = next(r for r in store.runs() if r.split == "sr-private" and r.checkpoint_digest != next(
        x.checkpoint_digest for x in store.runs() if x.checkpoint_path == str(tiny_checkpoint)))
    rows = len(store.access_rows("sr-private"))
    # the edit: every private sample of the candidate correct, in the DuckDB file; the access log untouched
    with duckdb.connect(str(store.path)) as con:
        con.execute("UPDATE samples SET score = 1.0, status = 'correct' WHERE run_id = ?", [candidate.run_id])
    assert verify_chain(store)["ok"]
    for name in ("g1", "g2"):  # g1 unchanged: its decision would be reused; g2, a new gate: both runs re-read
        again = cli.invoke(main, ["gate", "--policy", str(_policy(home, name, proto, tiny_checkpoint))])
        assert again.exit_code == 2, again.output  # was 0: PASS, nothing evaluated
        assert f"run {candidate.run_id}" in again.output and "edited" in again.output
    new = store.access_rows("sr-private")[rows:]
    assert [r.outcome for r in new] == ["refused", "refused"] and all(not r.cached for r in new)
