"""``evalgate runs``: training run, seed and step on each line, the filters, and ``--by-step`` tables (rows steps,
columns seeds, cells metric ± stderr) over the gate fixtures, whose dev pass@1 by step is known by construction."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests import gate_fixtures as fx
from tests.helpers.cli import cli_out

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


def test_by_step_prints_one_table_per_training_run_with_metric_and_stderr(home: Path) -> None:
    fx.build(home)
    code, out = cli_out("runs", "--by-step", "--split", "fx-dev")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "fx-run  (fx@1 on fx-dev, pass@1 ± stderr)"
    assert lines[1].split() == ["step", "seed", "1", "seed", "2", "seed", "3"]
    # seed 2 at step 20: 7 of 10 correct; stderr = sqrt(0.7 * 0.3 * 10 / 9) / sqrt(10) = 0.1528
    step20 = lines[3].split()
    assert step20[0] == "20" and step20[4:7] == ["0.700", "±", "0.153"]
    assert [ln.split()[0] for ln in lines[2:6]] == ["10", "20", "30", "40"]
    assert lines[2].split()[1] == "0.300" and lines[5].split()[7] == "0.900"
    assert len(lines) == 6  # seed 3's failed run at step 50 has no metric: no row

    code, out = cli_out("runs", "--by-step", "--split", "fx-dev", "--json")
    (table,) = json.loads(out)
    cell = table["rows"][1]["cells"]["2"]
    assert cell["run_id"] == "dev-2-20" and cell["value"] == 0.7
    assert math.isclose(cell["stderr"], math.sqrt(0.7 * 0.3 * 10 / 9) / math.sqrt(10))
    # the decision runs are another split: another table
    code, out = cli_out("runs", "--by-step")
    assert out.count("fx-run  (fx@1 on") == 2 and "fx-private" in out


def test_runs_lines_show_training_run_seed_and_step_and_the_filters_apply(home: Path) -> None:
    fx.build(home)
    code, out = cli_out("runs", "--train-seed", "2", "--split", "fx-dev")
    assert code == 0, out
    assert [ln.split()[0] for ln in out.splitlines()] == ["dev-2-10", "dev-2-20", "dev-2-30", "dev-2-40"]
    assert "checkpoint-20 (step 20) [fx-run seed 2]" in out
    code, out = cli_out("runs", "--checkpoint", "fx-run-seed1/checkpoint-30", "--json")
    assert sorted(r["run_id"] for r in json.loads(out)) == ["dec-1", "dev-1-30"]
    code, out = cli_out("runs", "--checkpoint", str(home / "fx-run-seed3" / "checkpoint-20"), "--json")
    assert sorted(r["run_id"] for r in json.loads(out)) == ["dec-3", "dev-3-20"]
    code, out = cli_out("runs", "--train-run", "no such run")
    assert code == 0 and out.strip() == "no runs matching --train-run 'no such run'"  # the flags, pasteable
    code, out = cli_out("runs", "--split", "fx-devv")  # a typo: no split and no run of that name
    assert code == 2 and "--split 'fx-devv': no split of that name" in out and "fx-dev" in out
    code, out = cli_out("runs", "--by-step", "--metric", "pass@8")
    assert code == 2 and "no run has metric 'pass@8'" in out


def test_protocol_filter_takes_name_at_version_as_runs_prints_it(home: Path) -> None:
    fx.build(home)
    code, out = cli_out("runs", "--protocol", "fx@1", "--split", "fx-dev", "--train-seed", "2")
    assert code == 0, out
    assert [ln.split()[0] for ln in out.splitlines()] == ["dev-2-10", "dev-2-20", "dev-2-30", "dev-2-40"]
    assert all("fx@1" in ln for ln in out.splitlines())
    code, out = cli_out("runs", "--protocol", "fx@2")  # another version of the same name: none of these runs
    assert code == 0 and out.strip() == "no runs matching --protocol fx@2"
    code, out = cli_out("runs", "--protocol", "fx", "--split", "fx-dev", "--train-seed", "2")  # the bare name works
    assert len(out.splitlines()) == 4


def test_by_step_note_on_repeated_runs_is_a_whole_sentence(home: Path) -> None:
    store = fx.build(home)["store"]
    fx.add_run(store, "dev-2-20-again", "d2-20", home / "fx-run-seed2" / "checkpoint-20", "fx-dev", "dev", 2, 20,
               fx._scores(0.8))
    code, out = cli_out("runs", "--by-step", "--split", "fx-dev")
    assert code == 0, out
    assert out.splitlines()[3].split()[4] == "0.800"  # the latest run of that checkpoint
    note = out.strip().splitlines()[-1].strip()
    assert note.startswith("(1 earlier run(s)") and note.endswith("latest complete run)"), note
