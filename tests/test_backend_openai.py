"""The openai backend against real servers on loopback: ``transformers serve`` with the SmolLM2 checkpoint (greedy
parity with hf, a server that ignores ``n``, a full run through the CLI), and a small scripted HTTP server for
429/5xx retries and timeouts (a real socket server; its answers are fixed so the retry counts can be checked)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner

from evalgate.backends.base import EffectiveParams, GenerationRequest, OpenAIOptions
from evalgate.backends.openai import OpenAIBackend, request_body
from evalgate.errors import EngineError
from tests.conftest import REPO

GREEDY = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=12, stop=("\n```",), repetition_penalty=1.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tserve(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``transformers serve`` on 127.0.0.1 with the SmolLM2 directory; yields the /v1 base URL."""
    exe = Path(sys.executable).parent / "transformers"
    if not exe.exists() or shutil.which(str(exe)) is None:
        pytest.fail("the transformers CLI is missing; run 'make setup' (the test extra installs its serving deps)")
    port = free_port()
    log = tmp_path_factory.mktemp("tserve") / "serve.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen([str(exe), "serve", str(smollm2_dir), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not come up:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_request_body_carries_only_protocol_values() -> None:
    p = EffectiveParams(0.7, 0.9, 40, 64, ("\n\n",), 1.2)
    assert request_body("hi", p, "m", 1, 99, "completions") == {
        "model": "m", "prompt": "hi", "max_tokens": 64, "temperature": 0.7, "top_p": 0.9, "n": 1, "seed": 99,
        "stream": False, "stop": ["\n\n"], "top_k": 40, "repetition_penalty": 1.2}
    chat = request_body("hi", GREEDY, "m", 2, 1, "chat")
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and "prompt" not in chat
    assert "top_k" not in chat and "repetition_penalty" not in chat


@pytest.mark.slow
def test_greedy_parity_with_hf_and_a_run_through_the_server(tserve: str, smollm2_dir: Path, home: Path,
                                                            humaneval_records: list[dict]) -> None:
    from evalgate.cli import main

    data = home / "two.jsonl"
    data.write_text("".join(json.dumps({"id": r["task_id"], **r}) + "\n" for r in humaneval_records[:2]))
    runner = CliRunner()
    assert runner.invoke(main, ["splits", "add", "he-two", "--tier", "smoke", "--file", str(data)]).exit_code == 0
    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    proto.update(name="he-greedy", version="1", pass_at_k=[1])
    proto["sampling"].update(temperature=0.0, top_p=1.0, max_tokens=12, n=1)
    ppath = home / "greedy.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    assert runner.invoke(main, ["protocol", "freeze", str(ppath)]).exit_code == 0

    r = runner.invoke(main, ["parity", "--protocol", str(ppath), "--checkpoint", str(smollm2_dir), "--split",
                             "he-two", "--a", "hf", "--b", "openai", "--b-option", f"base_url={tserve}", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0, doc["drift"]
    assert doc["samples"] == 2 and doc["identical"] == 2 and doc["drift"] == []
    assert doc["backend_b"]["http_requests"] == 2

    r = runner.invoke(main, ["run", "--protocol", str(ppath), "--checkpoint", str(smollm2_dir), "--split", "he-two",
                             "--backend", "openai", "--backend-option", f"base_url={tserve}",
                             "--backend-option", "concurrency=2", "--json"])
    assert r.exit_code == 0, r.output
    run = json.loads(r.stdout)
    assert run["counts"]["generated"] == 2 and run["backend"]["engine"] == "openai-compatible server"
    assert run["backend"]["options"] == {"base_url": tserve, "concurrency": 2}


@pytest.mark.slow
def test_server_that_ignores_n_still_yields_n_samples(tserve: str, smollm2_dir: Path) -> None:
    """transformers serve answers n=3 with one choice ("Ignoring unsupported fields"); the backend notices and
    fetches the other two samples one request each."""
    backend = OpenAIBackend(str(smollm2_dir), OpenAIOptions(base_url=tserve, use_n=True))
    req = GenerationRequest("x", "def add(a, b):\n", (0, 1, 2), (11, 22, 33), GREEDY)
    (res,) = backend.generate([req])
    assert len(res.completions) == 3 and all(c.text for c in res.completions)
    assert backend.stats["short_n_fallbacks"] == 1 and backend.stats["http_requests"] == 3


class Scripted(BaseHTTPRequestHandler):
    """Answers POSTs from a script of (status, delay_s) steps, then 200 with a fixed completion."""

    script: list[tuple[int, float]] = []
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Scripted.seen.append(body)
        status, delay = Scripted.script.pop(0) if Scripted.script else (200, 0.0)
        time.sleep(delay)
        if status == 200:
            payload = json.dumps({"choices": [{"index": 0, "text": "    return a + b\n```\nmore",
                                               "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 5, "completion_tokens": 7}}).encode()
        else:
            payload = json.dumps({"error": {"message": f"scripted {status}"}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[str]:
    Scripted.script, Scripted.seen = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _backend(url: str, smollm2_dir: Path, **kw: object) -> OpenAIBackend:
    return OpenAIBackend(str(smollm2_dir), OpenAIOptions(base_url=url, backoff_s=0.01, **kw))


REQ = GenerationRequest("x", "def add(a, b):\n", (0,), (5,), GREEDY)


def test_retries_429_and_5xx_then_succeeds(scripted: str, smollm2_dir: Path) -> None:
    Scripted.script = [(429, 0.0), (503, 0.0), (500, 0.0)]
    b = _backend(scripted, smollm2_dir, max_retries=3)
    (res,) = b.generate([REQ])
    # the server returned the stop sequence and text after it; OpenAI semantics cut both
    assert res.completions[0].text == "    return a + b" and res.completions[0].finish_reason == "stop"
    assert res.completions[0].completion_tokens == 7
    assert len(Scripted.seen) == 4 and b.stats["retries"] == 3
    assert Scripted.seen[-1]["seed"] == 5 and Scripted.seen[-1]["n"] == 1


def test_gives_up_after_max_retries(scripted: str, smollm2_dir: Path) -> None:
    Scripted.script = [(502, 0.0)] * 5
    with pytest.raises(EngineError, match="after 2 retries.*HTTP 502"):
        _backend(scripted, smollm2_dir, max_retries=2).generate([REQ])
    assert len(Scripted.seen) == 3


def test_client_error_is_not_retried(scripted: str, smollm2_dir: Path) -> None:
    Scripted.script = [(400, 0.0)]
    with pytest.raises(EngineError, match="HTTP 400"):
        _backend(scripted, smollm2_dir, max_retries=3).generate([REQ])
    assert len(Scripted.seen) == 1


def test_timeout_is_retried_then_reported(scripted: str, smollm2_dir: Path) -> None:
    Scripted.script = [(200, 1.5), (200, 1.5)]
    with pytest.raises(EngineError, match="Timeout"):
        _backend(scripted, smollm2_dir, max_retries=1, timeout_s=0.3).generate([REQ])
    assert len(Scripted.seen) == 2
