"""Agentic runs: GSM8K with the python tool (text protocol) through the hf backend and the real SmolLM2-135M-Instruct
model; the native ``hermes`` format through a chat template that renders tools, and the ``openai`` format over
HTTP, with recorded or scripted turns and the tiny checkpoint's folder (SmolLM2's tokenizer)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.datasets import import_dataset
from evalgate.protocol.freeze import freeze
from evalgate.runner.agent.loop import turn_seed
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import load_manifest, read_items, write_split
from evalgate.store import Store
from tests.conftest import REPO, SHARED_DATA
from tests.helpers.http_server import serve_in_thread

GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
TEMPLATE = Path(__file__).parent / "agent_data" / "hermes_tools.jinja"


@pytest.mark.slow
@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K test set not found at {GSM8K}")
def test_gsm8k_python_tool_end_to_end_with_smollm2_and_rerun_from_stored_turns(home: Path,
                                                                               smollm2_dir: Path) -> None:
    import_dataset("gsm8k", GSM8K, store=Store())
    two = read_items(load_manifest("gsm8k-smoke"))[:2]
    write_split("gsm8k-tool-two", "smoke", two, {"source": "gsm8k-smoke, first two"})
    proto = yaml.safe_load((REPO / "protocols" / "gsm8k-python-tool.yaml").read_text())
    proto.update(name="gsm8k-tool-e2e", version="1")
    proto["sampling"]["max_tokens"] = 16  # CPU time; the loop, storage and resume are what is tested
    proto["tools"]["max_turns"] = 2
    path = home / "gsm8k-tool-e2e.yaml"
    path.write_text(yaml.safe_dump(proto))
    freeze(path, Store)
    store = Store()
    doc = evaluate(path, smollm2_dir, "gsm8k-tool-two", RunOptions(progress=False), store)
    assert doc["status"] == "complete" and doc["counts"]["samples"] == 2
    tools = doc["metrics"]["tools"]
    assert 1 <= tools["turns_per_sample"] <= 2 and tools["turns_generated"] == round(2 * tools["turns_per_sample"])
    assert sum(tools["by_status"].values()) == 2 and set(tools["by_status"]) <= {"answered", "max_turns"}
    turns = store.trajectory_turns(doc["checkpoint"]["digest"], doc["protocol"]["sha256"],
                                   doc["backend"]["generation_settings_sha256"])
    assert len(turns) == tools["turns_generated"]
    for t in turns:
        assert t.turn_seed == turn_seed(t.seed, t.turn) and t.run_id == doc["run_id"]
        assert 0 < t.completion_tokens <= 16 and t.finish_reason in ("stop", "length")
    samples = store.samples(doc["run_id"])
    assert len(samples) == 2 and all("tool_calls" in s.behavior for s in samples)

    again = evaluate(path, smollm2_dir, "gsm8k-tool-two", RunOptions(progress=False), store)
    assert again["metrics"]["tools"]["turns_generated"] == 0
    assert again["metrics"]["tools"]["turns_cached"] == tools["turns_generated"]
    assert again["backend"]["model_loaded"] is False
    assert again["metrics"]["pass@1"] == doc["metrics"]["pass@1"]


def test_native_hermes_format_renders_tools_and_results_with_the_chat_template(home: Path,
                                                                              tiny_checkpoint: Path) -> None:
    """A chat template that supports tools (tests/agent/agent_data/hermes_tools.jinja) with SmolLM2's tokenizer and
    recorded turns: the call is read from <tool_call>, run, and shown back in <tool_response>; the stored prompt
    hash of turn 1 is that of the conversation written out by hand below."""
    doc = {"name": "native", "version": "1",
           "prompt": {"chat_template": str(TEMPLATE), "template": "{{ prompt }}"},
           "sampling": {"max_tokens": 32}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
           "extraction": {"rule": "gsm8k"},
           "tools": {"format": "hermes", "allowed": ["calculator"], "max_calls": 1}}
    path = home / "native.yaml"
    path.write_text(yaml.safe_dump(doc))
    freeze(path, Store)
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
    replay = home / "replay.jsonl"
    replay.write_text(json.dumps({"item_id": "q", "turn": 0, "text": call}) + "\n"
                      + json.dumps({"item_id": "q", "turn": 1, "text": "The answer is 42"}) + "\n")
    write_split("native-one", "smoke", [{"id": "q", "prompt": "What is 6*7?", "answer": "42"}], {"source": "test"})
    store = Store()
    run = evaluate(path, resolve_checkpoint(tiny_checkpoint), "native-one",
                   RunOptions(backend="replay", backend_options={"file": str(replay)}, progress=False), store)
    turns = store.trajectory_turns(run["checkpoint"]["digest"], run["protocol"]["sha256"],
                                   run["backend"]["generation_settings_sha256"])
    assert [c["result"] for c in turns[0].calls] == ["42"]
    expected = ("<|im_start|>system\nTools:\ncalculator: Evaluate an arithmetic expression, e.g. (3 + 4) * 2 / 7.\n"
                'Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>\n'
                "<|im_start|>user\nWhat is 6*7?<|im_end|>\n"
                f"<|im_start|>assistant\n{call}<|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n")
    assert turns[1].prompt_sha256 == hashlib.sha256(expected.encode()).hexdigest()
    assert run["metrics"]["pass@1"] == 1.0


def test_openai_format_sends_tools_and_reads_tool_calls_over_http(home: Path, tiny_checkpoint: Path) -> None:
    """tools.format: openai through the openai backend against a scripted OpenAI-compatible server on 127.0.0.1:
    the offered tools go out as ``tools``, the answer's ``tool_calls`` are run, and the next request carries the
    assistant's tool_calls and the ``tool`` message with the result under its tool_call_id."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[dict] = []

    class Server(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append({"path": self.path, **body})
            if not any(m["role"] == "tool" for m in body["messages"]):
                call = {"id": "call_1", "type": "function",
                        "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
                choice = {"index": 0, "finish_reason": "tool_calls",
                          "message": {"role": "assistant", "content": None, "tool_calls": [call]}}
            else:
                choice = {"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": "The answer is 42"}}
            out = json.dumps({"choices": [choice], "usage": {"completion_tokens": 5, "prompt_tokens": 20}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    serve_in_thread(server)
    try:
        doc = {"name": "oai-tools", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
               "sampling": {"max_tokens": 32}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
               "extraction": {"rule": "gsm8k"},
               "tools": {"format": "openai", "allowed": ["calculator"], "max_calls": 2}}
        path = home / "oai.yaml"
        path.write_text(yaml.safe_dump(doc))
        freeze(path, Store)
        write_split("oai-one", "smoke", [{"id": "q", "prompt": "What is 6*7?", "answer": "42"}], {"source": "t"})
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        run = evaluate(path, resolve_checkpoint(tiny_checkpoint), "oai-one",
                       RunOptions(backend="openai", backend_options={"base_url": url, "model": "m"},
                                  progress=False), Store())
    finally:
        server.shutdown()
    assert [b["path"] for b in bodies] == ["/v1/chat/completions"] * 2
    assert bodies[0]["tools"][0]["function"]["name"] == "calculator"
    assert bodies[0]["messages"] == [{"role": "user", "content": "What is 6*7?"}]
    assistant, tool = bodies[1]["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"expression": "6*7"}
    assert tool == {"role": "tool", "name": "calculator", "content": "42", "tool_call_id": "call_1"}
    assert run["metrics"]["pass@1"] == 1.0 and run["metrics"]["tools"]["tool_calls_per_sample"] == 1.0
