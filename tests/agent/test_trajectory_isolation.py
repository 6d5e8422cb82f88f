"""A private split and a dev split whose items share an id (two files each numbered from ``q1``), run under one
checkpoint, protocol and backend settings (adversary): a turn's cache key holds the item id, not its split, so the
dev run's trajectories used to take in the private run's turns, in clear where the key is at hand: the release
report's audit samples (a CI artifact) showed the private prompt's secret, and ``evalgate trajectories DEV_RUN``
listed it, unlogged. The store's real SQL (in memory: the leak was in the cache key, not the file), real runs (the
``replay`` backend's recorded turns, one recording file for both splits, rewritten between the runs, as a model
answers each prompt), the real gate and CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.store import Store
from tests.agent_gate_fixtures import build, call

pytestmark = pytest.mark.usefixtures("memory_store")

SECRET = "zebra_quartz_7301"


def _gate(root: Path) -> tuple[Any, Store]:
    return build(root, [{"id": "q1", "prompt": "one?", "answer": "1"}],
                 {"q1": ["dev turn " + call("calculator", expression="1"), "The answer is 1"]},
                 [{"id": "q1", "prompt": f"{SECRET}?", "answer": "1"}],
                 {"q1": [f"{SECRET} " + call("calculator", expression=SECRET), f"{SECRET} The answer is 1"]},
                 recording="model.jsonl")


def _run(store: Store, split: str) -> str:
    return next(r.run_id for r in store.runs() if r.split == split and r.checkpoint_digest[0] == "c")


def test_the_release_report_shows_no_private_turn_of_a_shared_item_id(tmp_path: Path) -> None:
    from evalgate.gate.report.outputs import write_reports

    v, store = _gate(tmp_path.resolve())
    shown = [s for s in v.samples.rows()]
    assert shown and all(s.item_id == "q1" for s in shown)
    assert shown[0].trajectory is not None
    turns = shown[0].trajectory["turns"]
    assert [t["text"] for t in turns] == ["dev turn " + call("calculator", expression="1"), "The answer is 1"]
    out = tmp_path / "out"
    write_reports(v, {"html": out / "r.html", "json": out / "r.json", "markdown": out / "r.md"}, store)
    assert "dev turn" in (out / "r.html").read_text()
    assert [p.name for p in sorted(out.iterdir()) if SECRET in p.read_text()] == []


def test_evalgate_trajectories_shows_one_split_logs_the_read_and_refuses_the_private_run(tmp_path: Path) -> None:
    _, store = _gate(tmp_path.resolve())
    dev, private = _run(store, "ag-dev"), _run(store, "ag-private")
    r = CliRunner().invoke(main, ["trajectories", dev, "--json", "--actor", "mallory"])
    assert r.exit_code == 0, r.output
    records = json.loads(r.output)
    assert [(x["item_id"], len(x["turns"])) for x in records] == [("q1", 2)] and SECRET not in r.output
    r = CliRunner().invoke(main, ["trajectories", private, "--actor", "mallory"])
    assert r.exit_code == 2 and SECRET not in r.output and "never shown" in r.output
    rows = [(x.split, x.purpose, x.outcome) for x in store.access_rows() if x.actor == "mallory"]
    assert rows == [("ag-dev", "inspect-trajectories", "read"), ("ag-private", "inspect-trajectories", "refused")]


def test_a_dev_runs_row_pointed_at_the_private_runs_turns_shows_none_of_them(tmp_path: Path) -> None:
    """Adversary, third pass: the dev run's row (not signed) given the private run's split content hash, so the turn
    query read the private run's sealed turns back for the dev run and decrypted them: 'evalgate trajectories
    DEV_RUN' listed the secret. An open tier's turns are stored in clear: a sealed one is refused, never opened."""
    _, store = _gate(tmp_path.resolve())
    dev, private = _run(store, "ag-dev"), _run(store, "ag-private")
    (p,) = store.runs(run_id=private)
    with store.connect() as con:
        con.execute("UPDATE runs SET split_sha256=? WHERE run_id=?", [p.split_sha256, dev])
    r = CliRunner().invoke(main, ["trajectories", dev, "--json", "--actor", "mallory"])
    assert r.exit_code == 2 and SECRET not in r.output and "store was edited" in r.output, r.output
