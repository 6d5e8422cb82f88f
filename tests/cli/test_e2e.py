"""End to end with the real SmolLM2-135M-Instruct model, through the CLI: the run that loads the model in a real
subprocess (``python -m evalgate.cli``, as a user types it), the other commands in this process
(``tests/helpers/cli.py``)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import REPO
from tests.helpers.cli import cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a model run in a subprocess: 15 minutes, not the default 5


def evalgate(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "evalgate.cli", *args], capture_output=True, text=True,
                       env=os.environ.copy(), cwd=REPO, timeout=900)
    if r.returncode not in (0, 1):
        raise AssertionError(f"evalgate {args} exited {r.returncode}: {r.stderr}")
    return r


def test_run_then_gate_on_two_smoke_items(home: Path, smollm2_gguf: Path, smollm2_dir: Path,
                                          humaneval_records: list[dict]) -> None:
    data = home / "two.jsonl"
    data.write_text("".join(json.dumps({"id": r["task_id"], **r}) + "\n" for r in humaneval_records[:2]))
    assert cli("splits", "add", "he-two", "--tier", "smoke", "--file", data).exit_code == 0
    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    proto.update(name="he-e2e", version="1")
    proto["sampling"].update(max_tokens=24, n=2)
    proto["pass_at_k"] = [1, 2]
    ppath = home / "he-e2e.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    assert cli("protocol", "freeze", ppath).exit_code == 0

    r = evalgate("run", "--protocol", str(ppath), "--checkpoint", str(smollm2_gguf), "--split", "he-two",
                 "--json", "--train-run", "smoke-test", "--step", "0")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["protocol"]["name"] == "he-e2e" and len(doc["protocol"]["sha256"]) == 64
    assert doc["split"] == {"name": "he-two", "tier": "smoke", "sha256": doc["split"]["sha256"], "items": 2}
    assert doc["checkpoint"]["kind"] == "gguf" and doc["checkpoint"]["digest_algorithm"] == "blake3"
    assert re.fullmatch("blake3:[0-9a-f]{64}", doc["checkpoint"]["digest"])  # a new checkpoint here (issue 21)
    assert doc["effective_params"]["max_tokens"] == 24 and doc["effective_params"]["temperature"] == 0.8
    assert doc["counts"]["samples"] == 4 and doc["counts"]["generated"] == 4
    assert set(doc["metrics"]) >= {"pass@1", "pass@2", "mean_completion_tokens", "truncation_rate"}
    assert 0 < doc["metrics"]["mean_completion_tokens"] <= 24
    assert "transformers" in doc["versions"] and doc["backend"]["model_loaded"] is True
    # the run record
    assert doc["counts"]["sandbox"]["isolation"] == "netns+pidns+minfs+rofs+unpriv+nouserns+nproc+stdlib"

    con = duckdb.connect(str(home / "home" / "evalgate.duckdb"), read_only=True)
    assert con.execute("SELECT status FROM runs WHERE run_id=?", [doc["run_id"]]).fetchone() == ("complete",)
    assert con.execute("SELECT count(*) FROM samples WHERE run_id=?", [doc["run_id"]]).fetchone() == (4,)
    assert con.execute("SELECT count(*) FROM generations").fetchone() == (4,)
    reads = con.execute("SELECT split, tier, purpose, actor, cached, run_id FROM access_log ORDER BY seq").fetchall()
    con.close()
    assert ("he-two", "smoke", "evaluation", "test-actor", False, doc["run_id"]) in reads

    # an identical rerun comes from the cache, without loading the model, and is logged as a cached read
    r2 = json.loads(cli("run", "--protocol", ppath, "--checkpoint", smollm2_gguf, "--split", "he-two",
                        "--json").stdout)
    assert r2["counts"]["cached"] == 4 and r2["backend"]["model_loaded"] is False
    assert r2["metrics"] == doc["metrics"]

    # the gate selects on dev splits only (tests/gate/test_gate.py covers the gate): a smoke split is refused, exit 2
    policy = home / "gate.yaml"
    policy.write_text(yaml.safe_dump({"name": "e2e", "protocol": "he-e2e@1", "selection_split": "he-two",
                                      "decision_split": "he-two", "baseline": {"value": 0.0}}))
    g = cli("gate", "--policy", policy)
    assert g.exit_code == 2 and "selected on a dev split only" in g.stderr

    a = json.loads(cli("audit", "--json").stdout)
    assert a["splits"]["he-two"]["reads"] == 2  # two runs; the refused gate read nothing
    assert a["splits"]["he-two"]["cached_reads"] == 1 and a["chain"]["ok"]
