"""What the CLI writes besides its result: quiet exit when stdout is closed early, no progress bars under --json."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.helpers.cli import cli


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run evalgate with stdout on a pipe whose reader is already gone, as after ``| head -1`` has read its line."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, "-m", "evalgate.cli", *args], stdout=w, stderr=subprocess.PIPE,
                              text=True, env=os.environ.copy(), cwd=REPO, timeout=300)
    finally:
        os.close(w)


@pytest.mark.integration
@pytest.mark.parametrize("args", [["audit"], ["audit", "verify"], ["protocol", "docs"]],
                         ids=["audit", "audit-verify", "protocol-docs"])
def test_closed_stdout_exits_quietly(home, args: list[str]) -> None:
    p = run_into_closed_pipe(*args)
    assert p.stderr == ""  # no traceback, no "internal error", no "Exception ignored"
    assert p.returncode == 141  # 128 + SIGPIPE, as a shell reports `yes | head -1`; not 3 (internal error)


def evalgate_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalgate.cli", "run", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=900)


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_json_run_draws_no_progress_bar_even_while_converting_a_gguf(home, tmp_path, smollm2_gguf) -> None:
    import json

    import yaml

    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps({"id": "add-1-1", "question": "What is 1 + 1?", "answer": "2"}) + "\n")
    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto.update(name="bars", version="1")
    proto["sampling"]["max_tokens"] = 2
    ppath = tmp_path / "bars.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    env = {**os.environ, "EVALGATE_MODELS": str(tmp_path / "models")}  # empty: the GGUF is converted in this run
    for cmd in (["splits", "add", "one", "--tier", "smoke", "--file", str(data)], ["protocol", "freeze", str(ppath)]):
        assert cli(*cmd).exit_code == 0  # set-up in this process; the runs below are the subprocesses tested
    args = ["--protocol", str(ppath), "--checkpoint", str(smollm2_gguf), "--split", "one"]

    quiet = evalgate_run(env, *args, "--json")
    assert quiet.returncode == 0, quiet.stderr
    assert json.loads(quiet.stdout)["counts"]["generated"] == 1  # the model was loaded and generated
    assert (tmp_path / "models").is_dir()  # and the GGUF was converted by this run
    for bar in ("Converting and de-quantizing", "Loading weights", "%|", "it/s"):  # "%|": every tqdm bar
        assert bar not in quiet.stderr

    # without --json, off a terminal (this pipe, a CI log): evalgate's bars as whole lines, the libraries' bars
    # (carriage-return redraws) off; another seed, so the model is loaded again rather than read from the cache
    loud = evalgate_run(env, *args, "--seed", "1")
    assert loud.returncode == 0, loud.stderr
    assert "\r" not in loud.stderr and "Loading weights" not in loud.stderr
    assert any(ln.startswith("generate: 100%|") and "1/1" in ln for ln in loud.stderr.splitlines()), loud.stderr


def test_dump_writes_a_typed_row_as_its_document_and_other_values_as_text(capsys) -> None:
    """A typed store row reaching ``dump`` inside a document prints as the dict it was (``as_dict()``), not as its
    ``repr`` through ``str``; a datetime still prints as its text."""
    import json
    from datetime import datetime

    from evalgate.commands import dump
    from evalgate.store.rows import GateRow

    when = datetime(2026, 12, 6, 20, 50, 0)
    row = GateRow(gate_id="g1", name="demo", policy_sha256="p" * 64, protocol_hash=None, inputs_sha256="i" * 64,
                  inputs={"seeds": [0]}, decision_runs=[], verdict="PASS", reason="ok", reasons=["ok"],
                  document={"passed": True}, reused_from=None, created_at=when, actor="ci")
    dump({"gates": [row], "at": when})
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"gates": [{"gate_id": "g1", "name": "demo", "policy_sha256": "p" * 64, "protocol_hash": None,
                              "inputs_sha256": "i" * 64, "inputs": {"seeds": [0]}, "decision_runs": [],
                              "verdict": "PASS", "reason": "ok", "reasons": ["ok"], "document": {"passed": True},
                              "reused_from": None, "created_at": "2026-12-06 20:50:00", "actor": "ci"}],
                   "at": "2026-12-06 20:50:00"}
