"""Tool permissions enforced through the whole run, with the ``replay`` backend (recorded model turns): every
permission, both violation modes, the committed permission-probe task, and resume after a killed run."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from evalgate.backends.replay import ReplayBackend
from evalgate.checkpoints.resolve import Checkpoint
from evalgate.core.errors import EngineError
from evalgate.core.fileio import iter_jsonl
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store, TurnRow
from tests.conftest import REPO
from tests.helpers.http_server import serve_in_thread

PROBE = REPO / "protocols" / "tool-probe"


def _ckpt(tmp_path: Path) -> Checkpoint:
    d = tmp_path / "replayed-model"
    d.mkdir(exist_ok=True)
    return Checkpoint(path=d, kind="hf", digest="0" * 64, model_dir=d)


def _replay_file(tmp_path: Path, turns: dict[str, list[str]], name: str = "replay.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps({"item_id": iid, "turn": t, "text": text}) + "\n"
                         for iid, texts in turns.items() for t, text in enumerate(texts)))
    return p


def _protocol(tmp_path: Path, tools: dict[str, Any], name: str = "agent") -> Path:
    doc = {"name": name, "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
           "sampling": {"max_tokens": 64}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
           "extraction": {"rule": "gsm8k"}, "tools": {"format": "hermes", **tools}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    freeze(p, Store)
    return p


def _call(name: str, **args: Any) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'


def _run(tmp_path: Path, proto: Path, items: list[dict[str, Any]], replay: Path, split: str = "agent-split",
         store: Store | None = None) -> tuple[dict[str, Any], Store]:
    write_split(split, "smoke", items, {"source": "test"})
    store = store or Store()
    doc = evaluate(proto, _ckpt(tmp_path), split, RunOptions(backend="replay", backend_options={"file": str(replay)},
                                                             progress=False), store)
    return doc, store


def _turns(store: Store, doc: dict[str, Any]) -> dict[str, list[TurnRow]]:
    out: dict[str, list[TurnRow]] = {}
    for r in store.trajectory_turns(doc["checkpoint"]["digest"], doc["protocol"]["sha256"],
                                    doc["backend"]["generation_settings_sha256"]):
        out.setdefault(r.item_id, []).append(r)
    return out


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_probe_task_records_every_forbidden_attempt_and_executes_none(tmp_path: Path) -> None:
    """The committed probe (protocols/tool-probe.yaml): each attempt is a violation of the expected kind and the
    model is told it was refused; nothing is written, fetched or run; the allowed read returns the file."""
    items = [r for _, r in iter_jsonl((PROBE / "items.jsonl").read_text(), "items.jsonl")]
    escape = PROBE / "escape.txt"
    notes_before = (PROBE / "task" / "notes.txt").read_text()
    doc, store = _run(tmp_path, REPO / "protocols" / "tool-probe.yaml", items, PROBE / "replay.jsonl")
    turns = _turns(store, doc)
    kinds = {iid: [c["violation"] for t in ts for c in t.calls] for iid, ts in turns.items()}
    assert kinds == {"fetch-url": ["network"], "write-outside": ["fs_scope"], "write-readonly": ["fs_write"],
                     "disallowed-tool": ["disallowed_tool"], "call-budget": [None, None, "call_budget"],
                     "read-allowed": [None]}
    for ts in turns.values():
        for c in (c for t in ts for c in t.calls if c["violation"]):
            assert c["status"] == "violation" and c["wall_s"] == 0.0 and c["result"].startswith("refused: ")
    assert not escape.exists()
    assert (PROBE / "task" / "notes.txt").read_text() == notes_before
    assert not Path("/tmp/pwned").exists()
    read = turns["read-allowed"][0].calls[0]
    assert read["status"] == "ok" and read["result"] == notes_before
    budget = turns["call-budget"]
    assert [c["result"] for c in budget[0].calls] == ["2", "4"]  # 1+1, 2+2 by simpleeval
    # refuse mode: the sample goes on after each refusal and answers at its next turn
    assert all(ts[-1].ended == "answered" for ts in turns.values())
    tools = doc["metrics"]["tools"]
    assert tools["violations_by_kind"] == {"call_budget": 1, "disallowed_tool": 1, "fs_scope": 1, "fs_write": 1,
                                           "network": 1}
    assert tools["violation_rate"] == pytest.approx(5 / 6)
    assert tools["tool_calls_per_sample"] == pytest.approx(8 / 6)  # 1+1+1+1+3+1 calls over 6 samples
    assert tools["calls_per_tool"]["calculator"] == pytest.approx(3 / 6)
    assert tools["turns_per_sample"] == pytest.approx(13 / 6)  # 2 turns each, 3 for call-budget


@pytest.fixture
def local_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 that records each path it serves."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b"secret=42"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
@pytest.mark.parametrize("network", [False, True])
def test_http_get_reaches_the_local_server_only_when_network_is_permitted(
        tmp_path: Path, local_server: tuple[str, list[str]], network: bool) -> None:
    url, hits = local_server
    proto = _protocol(tmp_path, {"allowed": ["http_get"], "max_calls": 1, "network": network})
    replay = _replay_file(tmp_path, {"a": [_call("http_get", url=f"{url}/secret"), "The answer is 42"]})
    doc, store = _run(tmp_path, proto, [{"id": "a", "prompt": "fetch", "answer": "42"}], replay)
    call = _turns(store, doc)["a"][0].calls[0]
    if network:
        assert hits == ["/secret"] and call["status"] == "ok" and call["result"] == "HTTP 200\nsecret=42"
    else:
        assert hits == [] and call["violation"] == "network"


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_end_mode_ends_the_sample_with_status_tool_violation(tmp_path: Path) -> None:
    """violation: end: the sample stops at the violating call (its later turns never generated, the calls after
    it in the same turn never run) and scores 0 even though its text holds the right answer."""
    proto = _protocol(tmp_path, {"offered": [{"name": "calculator"}, {"name": "python"}], "allowed": ["calculator"],
                                 "max_calls": 5, "violation": "end"})
    turn0 = _call("python", code="print(42)") + _call("calculator", expression="40+2") + " The answer is 42"
    replay = _replay_file(tmp_path, {"a": [turn0, "The answer is 42"], "b": ["The answer is 42"]})
    doc, store = _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "42"},
                                        {"id": "b", "prompt": "y", "answer": "42"}], replay)
    turns = _turns(store, doc)
    assert len(turns["a"]) == 1 and turns["a"][0].ended == "tool_violation"
    assert [c["name"] for c in turns["a"][0].calls] == ["python"]  # the calculator call after it never ran
    samples = {s.item_id: s for s in store.samples(doc["run_id"])}
    assert samples["a"].status == "tool_violation" and samples["a"].score == 0.0
    assert samples["b"].score == 1.0
    assert doc["metrics"]["tools"]["by_status"] == {"answered": 1, "tool_violation": 1}


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_max_turns_ends_a_sample_that_keeps_calling(tmp_path: Path) -> None:
    proto = _protocol(tmp_path, {"allowed": ["calculator"], "max_calls": 10, "max_turns": 2})
    replay = _replay_file(tmp_path, {"a": [_call("calculator", expression="1"), _call("calculator", expression="2"),
                                           "The answer is 2"]})
    doc, store = _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "2"}], replay)
    turns = _turns(store, doc)["a"]
    assert [t.ended for t in turns] == [None, "max_turns"]
    assert doc["metrics"]["tools"]["by_status"] == {"max_turns": 1}


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_tool_errors_and_parse_errors_are_results_the_model_sees(tmp_path: Path) -> None:
    """A bad expression, arguments against the schema and an unparsable call: each becomes a message to the
    model, counted, and the run completes."""
    proto = _protocol(tmp_path, {"allowed": ["calculator"], "max_calls": 5, "max_turns": 5})
    replay = _replay_file(tmp_path, {"a": [_call("calculator", expression="1/0"), _call("calculator", expr="1"),
                                           '<tool_call>{"name": "calculator", </tool_call>', "The answer is 1"]})
    doc, store = _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "1"}], replay)
    turns = _turns(store, doc)["a"]
    assert turns[0].calls[0]["status"] == "error" and "ZeroDivisionError" in turns[0].calls[0]["result"]
    assert turns[1].calls[0]["status"] == "invalid_arguments"
    assert turns[2].calls == [] and turns[2].parse_error.startswith("unparsable <tool_call>: not JSON")
    assert doc["status"] == "complete" and doc["metrics"]["tools"]["parse_errors_per_sample"] == 1.0
    assert doc["metrics"]["pass@1"] == 1.0


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_killed_run_resumes_mid_trajectory_generating_only_missing_turns(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The recording lacks item a's turn 2: the first run dies there (after turns 0-1 of a and all of b are
    stored). The rerun with the full recording asks the backend for a's turn 2 only."""
    proto = _protocol(tmp_path, {"allowed": ["calculator"], "max_calls": 5, "max_turns": 5})
    full = {"a": [_call("calculator", expression="1+1"), _call("calculator", expression="2+2"), "The answer is 4"],
            "b": [_call("calculator", expression="3"), "The answer is 3"]}
    items = [{"id": "a", "prompt": "x", "answer": "4"}, {"id": "b", "prompt": "y", "answer": "3"}]
    # one recording file (its path is a generation setting), first without a's last turn
    recording = _replay_file(tmp_path, {"a": full["a"][:2], "b": full["b"]})
    with pytest.raises(EngineError, match="no recorded turn 2 for item 'a'"):
        _run(tmp_path, proto, items, recording)
    seen: list[tuple[str, int, int]] = []
    original = ReplayBackend._completion

    def spy(self: ReplayBackend, key: str, j: int, turn: int) -> Any:
        seen.append((key, j, turn))
        return original(self, key, j, turn)

    monkeypatch.setattr(ReplayBackend, "_completion", spy)
    doc, store = _run(tmp_path, proto, items, _replay_file(tmp_path, full))
    assert seen == [("a", 0, 2)]
    assert doc["metrics"]["tools"]["turns_generated"] == 1 and doc["metrics"]["tools"]["turns_cached"] == 4
    assert [c["result"] for t in _turns(store, doc)["a"] for c in t.calls] == ["2", "4"]
    assert doc["metrics"]["pass@1"] == 1.0


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_trajectories_command_shows_calls_results_and_violations(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main

    proto = _protocol(tmp_path, {"offered": [{"name": "calculator"}, {"name": "python"}], "allowed": ["calculator"],
                                 "max_calls": 5})
    replay = _replay_file(tmp_path, {"a": [_call("calculator", expression="6*7") + _call("python", code="1"),
                                           "The answer is 42"]})
    doc, _ = _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "42"}], replay)
    r = CliRunner().invoke(main, ["trajectories", doc["run_id"]])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("== a #0 (seed ") and lines[0].endswith("): answered")
    assert "   >> calculator({'expression': '6*7'}) [ok]" in lines and "      42" in lines
    assert "   >> python({'code': '1'}) [VIOLATION disallowed_tool]" in lines
    as_json = CliRunner().invoke(main, ["trajectories", doc["run_id"], "--json"])
    assert [len(s["turns"]) for s in json.loads(as_json.output)] == [2]
    (sample,) = json.loads(as_json.output)  # each turn printed as the stored row's columns, as before it was typed
    assert list(sample["turns"][0]) == list(TurnRow.COLUMNS) and sample["turns"][0]["turn"] == 0
    assert [c["name"] for c in sample["turns"][0]["calls"]] == ["calculator", "python"]
    missing = CliRunner().invoke(main, ["trajectories", "nope"])
    assert missing.exit_code == 2 and "no run 'nope'" in missing.output


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_sigkill_mid_trajectory_then_rerun_generates_only_the_missing_turns(tmp_path: Path) -> None:
    """The real CLI in a subprocess, killed with SIGKILL while item a's turn-1 python call runs (after the first
    step's turns were stored); the rerun replays the stored turns and generates a's turns 1 and 2 only."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proto = _protocol(tmp_path, {"allowed": ["python"], "max_calls": 3, "timeout_s": 3})
    replay = _replay_file(tmp_path, {"a": [_call("python", code="print(1)"),
                                           _call("python", code="import time\ntime.sleep(60)"), "The answer is 1"],
                                     "b": ["The answer is 2"]})
    write_split("kill-split", "smoke", [{"id": "a", "prompt": "x", "answer": "1"},
                                        {"id": "b", "prompt": "y", "answer": "2"}], {"source": "test"})
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros(1, np.float32)}, str(ckpt / "model.safetensors"))  # a checkpoint the CLI resolves
    argv = [sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(proto), "--checkpoint", str(ckpt),
            "--split", "kill-split", "--backend", "replay", "--backend-option", f"file={replay}", "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    store = Store()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        rows = store.runs()
        if rows and len(store.trajectory_turns(rows[0].checkpoint_digest, rows[0].protocol_hash,
                                               rows[0].backend_info["generation_settings_sha256"])) == 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    r = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    tools = json.loads(r.stdout)["metrics"]["tools"]
    assert (tools["turns_cached"], tools["turns_generated"]) == (2, 2)
    turns = _turns(store, json.loads(r.stdout))["a"]
    assert [t.turn for t in turns] == [0, 1, 2] and turns[1].calls[0]["result"].endswith("timed out after 3 s")


def test_a_human_audit_runs_trajectories_are_encrypted_at_rest(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Turns of a human-audit run quote the item (the model's text, tool arguments and results): stored sealed
    with the private split key like its completions (issue 13), read back in clear with the key."""
    from cryptography.fernet import Fernet

    monkeypatch.setenv("EVALGATE_PRIVATE_KEY", Fernet.generate_key().decode())
    secret = "zebra-quartz-7301"
    proto = _protocol(tmp_path, {"offered": [{"name": "calculator"}], "allowed": ["calculator"], "max_calls": 2})
    replay = _replay_file(tmp_path, {"a": [f"{secret} " + _call("calculator", expression="6*7"),
                                           f"{secret} The answer is 42"]})
    doc, store = _run(tmp_path, proto, [{"id": "a", "prompt": f"{secret}?", "answer": "42"}], replay,
                      split="ha-agent-split")
    write_split("ha-agent", "human-audit", [{"id": "a", "prompt": f"{secret}?", "answer": "42"}], {"source": "t"})
    doc = evaluate(proto, _ckpt(tmp_path), "ha-agent", RunOptions(
        backend="replay", backend_options={"file": str(replay)}, progress=False), store)
    with duckdb.connect(str(store.path)) as con:
        rows = con.execute("SELECT text, calls::VARCHAR FROM trajectories WHERE run_id=?", [doc["run_id"]]).fetchall()
    assert len(rows) == 2 and all(secret not in t and "6*7" not in c for t, c in rows)
    turns = _turns(store, doc)["a"]
    assert turns[0].text.startswith(secret) and turns[0].calls[0]["result"] == "42"


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_a_stored_turn_is_reused_only_for_the_prompt_it_answered(tmp_path: Path) -> None:
    """Two splits hold an item ``a`` with different text: the second run must generate its own turns, not replay
    the first split's (the trajectory cache is keyed by the prompt each turn answered, like the generation
    cache)."""
    proto = _protocol(tmp_path, {"offered": [{"name": "calculator"}], "allowed": ["calculator"], "max_calls": 2})
    replay = _replay_file(tmp_path, {"a": [_call("calculator", expression="6*7"), "The answer is 42"]})
    first, store = _run(tmp_path, proto, [{"id": "a", "prompt": "six times seven?", "answer": "42"}], replay,
                        split="split-one")
    second, _ = _run(tmp_path, proto, [{"id": "a", "prompt": "seven times six?", "answer": "42"}], replay,
                     split="split-two", store=store)
    assert first["metrics"]["tools"]["turns_generated"] == 2
    assert second["metrics"]["tools"]["turns_generated"] == 2 and second["metrics"]["tools"]["turns_cached"] == 0
    third, _ = _run(tmp_path, proto, [{"id": "a", "prompt": "seven times six?", "answer": "42"}], replay,
                    split="split-two", store=store)
    assert third["metrics"]["tools"]["turns_generated"] == 0 and third["metrics"]["tools"]["turns_cached"] == 2


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_turns_still_being_written_when_the_engine_fails_are_stored(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step's turns are written by a background thread while the next step runs; when the engine fails
    (item a's turn 2 is not recorded) while step 1's write is still in flight (each write made 0.3 s slower),
    the run waits for it: all four turns made before the failure are stored, and the run is marked failed."""
    import time

    proto = _protocol(tmp_path, {"allowed": ["calculator"], "max_calls": 5, "max_turns": 5})
    replay = _replay_file(tmp_path, {"a": [_call("calculator", expression="1+1"), _call("calculator", expression="2")],
                                     "b": [_call("calculator", expression="3"), "The answer is 3"]})
    slow_writes: list[int] = []
    original = Store.put_turns

    def slow(self: Store, *args: Any) -> None:
        time.sleep(0.3)
        original(self, *args)
        slow_writes.append(len(args[3]))

    monkeypatch.setattr(Store, "put_turns", slow)
    with pytest.raises(EngineError, match="no recorded turn 2 for item 'a'"):
        _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "2"}, {"id": "b", "prompt": "y", "answer": "3"}],
             replay)
    store = Store()
    (run,) = store.runs()
    turns = store.trajectory_turns(run.checkpoint_digest, run.protocol_hash,
                                   run.backend_info["generation_settings_sha256"])
    assert sorted((t.item_id, t.turn) for t in turns) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert sum(slow_writes) == 4 and run.status == "failed"


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_a_failed_turn_write_fails_the_run_instead_of_hanging(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A write of turns that fails in the writer thread (here the store refuses it) stops the run with that
    error at the next step or at the end, and the run is marked failed."""
    from evalgate.core.errors import RefusedByPolicy

    def refuse(self: Store, *args: Any) -> None:
        raise RefusedByPolicy("store refused the turns (test)")

    proto = _protocol(tmp_path, {"allowed": ["calculator"], "max_calls": 5, "max_turns": 5})
    replay = _replay_file(tmp_path, {"a": [_call("calculator", expression="1+1"), "The answer is 2"]})
    monkeypatch.setattr(Store, "put_turns", refuse)
    with pytest.raises(RefusedByPolicy, match="store refused the turns"):
        _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "2"}], replay)
    (run,) = Store().runs()
    assert run.status == "failed"


@pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory
def test_a_call_drafted_inside_a_reasoning_block_is_not_made(tmp_path: Path) -> None:
    """Issue 28, point 2 in agentic runs: a reasoning model drafts a call inside <think> and then answers; only
    calls after the block are read (vLLM parses reasoning out before tool calls)."""
    proto = _protocol(tmp_path, {"allowed": ["calculator"], "max_calls": 5, "max_turns": 3})
    replay = _replay_file(tmp_path, {"a": [
        f"<think>maybe {_call('calculator', expression='1/0')}? no.</think>\n{_call('calculator', expression='6*7')}",
        "<think>\nThe answer is 41?\n</think>\nThe answer is 42"]})
    doc, store = _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "42"}], replay)
    turns = _turns(store, doc)["a"]
    assert [c["arguments"] for c in turns[0].calls] == [{"expression": "6*7"}]
    assert doc["metrics"]["pass@1"] == 1.0


@pytest.mark.usefixtures("memory_store")
def test_a_writable_task_directory_is_each_samples_own_copy(tmp_path: Path) -> None:
    """Adversary, third pass: with ``fs_write`` the model wrote into the protocol's own task directory, shared by
    every sample, run and checkpoint. One item's sample wrote its answer to a file and the next item's sample read it
    back (a channel between samples; on a private split the item's text lands in clear on disk), and the directory's
    content, hashed into the protocol, changed under its lock. Each sample now works in a copy of its own: a file
    written by one sample is not there for another, a sample reads back what it wrote itself, the protocol's
    directory and hash stay as they were, and no copy is left behind."""
    task = tmp_path / "task"
    task.mkdir()
    (task / "notes.txt").write_text("seed notes")
    proto = _protocol(tmp_path, {"offered": [{"name": "read_file"}, {"name": "write_file"}],
                                 "allowed": ["read_file", "write_file"], "max_calls": 4, "task_dir": "task",
                                 "fs_write": True})
    from evalgate.protocol.spec import load_protocol

    sha_before = load_protocol(proto).sha256
    items = [{"id": "a", "prompt": "write the answer down", "answer": "42"},
             {"id": "b", "prompt": "read what the other sample wrote", "answer": "42"}]
    replay = _replay_file(tmp_path, {
        "a": [_call("write_file", path="answer.txt", content="42") + _call("read_file", path="answer.txt"),
              "The answer is 42"],
        # b reads at its second turn, after a's first turn wrote the file
        "b": [_call("read_file", path="notes.txt"), _call("read_file", path="answer.txt"), "The answer is 42"]})
    doc, store = _run(tmp_path, proto, items, replay)
    turns = _turns(store, doc)
    a_calls, b_calls = turns["a"][0].calls, turns["b"][1].calls + turns["b"][0].calls
    assert [(c["status"], c["result"]) for c in a_calls] == [("ok", "wrote 2 characters to answer.txt"), ("ok", "42")]
    assert b_calls[0]["status"] == "error" and "answer.txt" in b_calls[0]["result"]  # not written in b's copy
    assert (b_calls[1]["status"], b_calls[1]["result"]) == ("ok", "seed notes")  # the task's own files are there
    assert sorted(p.name for p in task.iterdir()) == ["notes.txt"]
    assert load_protocol(proto).sha256 == sha_before
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob("evalgate-task-*"))


@pytest.mark.usefixtures("memory_store")
def test_a_sample_resumed_from_stored_turns_finds_its_own_writes(tmp_path: Path) -> None:
    """The first run dies at item a's turn 2 after its turn 0 wrote a file in its copy of the task directory (the
    copy is gone with the run); the rerun replays turns 0-1, which writes the file again in a new copy, so turn 2's
    read returns what turn 0 wrote, and the protocol's directory is never written."""
    task = tmp_path / "task"
    task.mkdir()
    proto = _protocol(tmp_path, {"offered": [{"name": "read_file"}, {"name": "write_file"}],
                                 "allowed": ["read_file", "write_file"], "max_calls": 4, "max_turns": 5,
                                 "task_dir": "task", "fs_write": True})
    full = {"a": [_call("write_file", path="n.txt", content="first"), _call("write_file", path="m.txt", content="x"),
                  _call("read_file", path="n.txt"), "The answer is first"]}
    items = [{"id": "a", "prompt": "x", "answer": "first"}]
    with pytest.raises(EngineError, match="no recorded turn 2 for item 'a'"):
        _run(tmp_path, proto, items, _replay_file(tmp_path, {"a": full["a"][:2]}))
    doc, store = _run(tmp_path, proto, items, _replay_file(tmp_path, full))
    assert doc["metrics"]["tools"]["turns_cached"] == 2 and doc["metrics"]["tools"]["turns_generated"] == 2
    read = _turns(store, doc)["a"][2].calls[0]
    assert (read["status"], read["result"]) == ("ok", "first")
    assert list(task.iterdir()) == []
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob("evalgate-task-*"))


@pytest.mark.usefixtures("memory_store")
def test_strict_isolation_holds_for_the_python_tool_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adversary, third pass: ``execution.isolation: strict`` was enforced by the humaneval scorer only, so an
    agentic protocol that offers the ``python`` tool under strict ran the model's programs on a machine whose sandbox
    lacks layers (without bubblewrap it does not stop reading, docs/SANDBOX.md: the private key file included). The
    run is now refused (exit 2) before the split is read or the model asked, as humaneval's is. The missing layer is
    simulated (glue: the sandbox's own detection is tested in tests/test_sandbox.py)."""
    import evalgate.core.sandbox as sandbox
    from evalgate.core.errors import RefusedByPolicy

    monkeypatch.setattr(sandbox, "missing_layers", lambda network=False: ["minfs"])
    doc = {"name": "py-strict", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
           "sampling": {"max_tokens": 64}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
           "extraction": {"rule": "gsm8k"}, "execution": {"isolation": "strict"},
           "tools": {"format": "hermes", "offered": [{"name": "python"}], "allowed": ["python"], "max_calls": 1}}
    proto = tmp_path / "py-strict.yaml"
    proto.write_text(yaml.safe_dump(doc))
    freeze(proto, Store)
    replay = _replay_file(tmp_path, {"a": [_call("python", code="print(open('/etc/hostname').read())"),
                                           "The answer is 1"]})
    store = Store()
    with pytest.raises(RefusedByPolicy, match=r"execution.isolation \(the python tool\) is strict .* lacks minfs"):
        _run(tmp_path, proto, [{"id": "a", "prompt": "x", "answer": "1"}], replay, store=store)
    assert store.runs() == [] and store.access_rows() == []  # nothing read, logged or spent
