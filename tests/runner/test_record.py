"""One run record: the stored ``runs`` row holds everything ``evaluate()`` returns and ``run --json`` prints (issue 13
point 12), with the real SmolLM2 model on one addition item."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.demo.train import addition_items
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, RunRecord, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO


def addition_protocol(home: Path, max_tokens: int = 3) -> Path:
    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto["name"] = "add-record"
    proto["sampling"]["max_tokens"] = max_tokens
    path = home / "add-record.yaml"
    path.write_text(yaml.safe_dump(proto))
    freeze(path, Store)
    return path


def test_stored_run_equals_the_returned_document_and_run_json(home: Path, tiny_checkpoint: Path) -> None:
    write_split("add-one", "dev", addition_items("dev", 1), {"source": "test"})
    proto = addition_protocol(home)
    store = Store()
    doc = evaluate(proto, tiny_checkpoint, "add-one", RunOptions(progress=False), store)
    (row,) = store.runs(run_id=doc["run_id"])
    # what the issue found missing from the stored row
    info = row.backend_info
    assert info["engine"] == "transformers" and info["model_loaded"] is True and info["dtype"] == "float32"
    assert "sent" in info and "ignored_generation_config" in info
    assert row.versions["transformers"] == importlib.metadata.version("transformers")
    assert row.versions["duckdb"] == importlib.metadata.version("duckdb")
    # and the whole document
    assert RunRecord.from_row(row).as_dict() == doc

    # run --json (a cached rerun) prints exactly what it stored
    r = CliRunner().invoke(main, ["run", "--protocol", str(proto), "--checkpoint", str(tiny_checkpoint), "--split",
                                  "add-one", "--json"])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.stdout)
    assert printed["counts"]["cached"] == 1 and printed["backend"]["model_loaded"] is False
    (again,) = store.runs(run_id=printed["run_id"])
    assert RunRecord.from_row(again).as_dict() == printed


def test_a_run_stored_before_migration_7_still_reads_as_a_record(tmp_path: Path) -> None:
    from evalgate.store import Database
    from evalgate.store.migrations import MIGRATIONS

    path = tmp_path / "s.duckdb"
    old_schema = [x for x in MIGRATIONS if x[0] < 7]
    old = Store(Database(path, old_schema))
    old.create_run({"run_id": "r1", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "h",
                    "checkpoint_digest": "ck", "checkpoint_path": "/ck", "split": "s", "tier": "dev",
                    "split_sha256": "x", "sampling_seed": 3, "backend": "hf",
                    "backend_info": {"name": "hf"}, "effective_params": {"seed": 3}})
    (row,) = Store(path).runs()
    rec = RunRecord.from_row(row)
    assert rec.status == "running" and rec.versions == {} and rec.split.items is None and rec.protocol.path is None
