"""The generation cache (hits and misses for each key part) through ``evaluate``, on the tiny random checkpoint (real
decoding, any weights do), and resume after SIGKILL or Ctrl-C with the real SmolLM2 model (decoding slow enough to
be stopped half-way) and the real CLI in a subprocess."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from evalgate.protocol.prompts import RenderedPrompt
from evalgate.runner import generate as generate_mod
from evalgate.runner import plan as plan_mod
from evalgate.runner import prompts as prompts_mod
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO
from tests.helpers.processes import as_from_a_terminal

pytestmark = pytest.mark.timeout(900)  # model runs in subprocesses: 15 minutes, not the default 5


def _protocol(home: Path, name: str, n: int, max_tokens: int, temperature: float = 1.0, version: str = "1") -> Path:
    from evalgate.protocol.freeze import freeze

    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    proto.update(name=name, version=version, pass_at_k=[1])
    proto["sampling"].update(temperature=temperature, top_p=1.0, max_tokens=max_tokens, n=n, stop=[])
    path = home / f"{name}-{version}.yaml"
    path.write_text(yaml.safe_dump(proto))
    freeze(path, Store)
    return path


def _texts(store: Store, run_id: str) -> dict[tuple[str, int], str]:
    return {(s.item_id, s.sample_index): s.text for s in store.samples(run_id)}


def test_cache_hits_and_misses_for_each_key_part(home: Path, tiny_checkpoint: Path, humaneval_records: list[dict],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    write_split("he-one", "smoke", [{"id": r["task_id"], **r} for r in humaneval_records[:1]], {"source": "test"})
    proto = _protocol(home, "cache", n=2, max_tokens=6)
    store = Store()

    first = evaluate(proto, tiny_checkpoint, "he-one", RunOptions(), store)
    assert first["counts"]["generated"] == 2 and first["backend"]["model_loaded"] is True
    err = capsys.readouterr().err
    assert "generate" in err and "score" in err and "tok/s" in err  # progress bars on stderr
    texts = _texts(store, first["run_id"])
    # the two samples come from two seeds: they differ (temperature 1), so a cache that repeated one would show
    assert texts[("HumanEval/0", 0)] != texts[("HumanEval/0", 1)]

    # identical rerun: every sample from the cache, the backend never constructed, the model never loaded, and
    # not even the tokenizer: the prompts and their records come from the first run
    def no_backend(*a: object, **k: object) -> None:
        raise AssertionError("a fully cached run must not create a backend")

    def no_tokenizer(*a: object, **k: object) -> None:
        raise AssertionError("a fully cached rerun must not load the tokenizer")

    with monkeypatch.context() as m:
        m.setattr(generate_mod, "get_backend", no_backend)
        m.setattr(prompts_mod, "load_tokenizer", no_tokenizer)
        again = evaluate(proto, tiny_checkpoint, "he-one", RunOptions(progress=False), store)
    assert again["counts"]["cached"] == 2 and again["counts"]["generated"] == 0
    assert again["backend"]["model_loaded"] is False
    assert again["backend"]["prompts_from_run"] == first["run_id"]
    assert again["backend"]["tokenizer"] == first["backend"]["tokenizer"]
    assert _texts(store, again["run_id"]) == texts
    strip = [dataclasses.replace(r, run_id="") for r in store.run_prompts(first["run_id"])]
    assert [dataclasses.replace(r, run_id="") for r in store.run_prompts(again["run_id"])] == strip

    # each key part misses on its own
    seed = evaluate(proto, tiny_checkpoint, "he-one", RunOptions(seed=99, progress=False), store)
    assert seed["counts"]["generated"] == 2 and seed["counts"]["cached"] == 0

    other_proto = _protocol(home, "cache", n=2, max_tokens=5, version="2")
    changed = evaluate(other_proto, tiny_checkpoint, "he-one", RunOptions(progress=False), store)
    assert changed["counts"]["generated"] == 2 and changed["protocol"]["sha256"] != first["protocol"]["sha256"]

    other_ckpt = home / "ckpt-copy"
    other_ckpt.mkdir()
    for f in tiny_checkpoint.iterdir():
        if f.name != "config.json":
            (other_ckpt / f.name).symlink_to(f)
    cfg = json.loads((tiny_checkpoint / "config.json").read_text())
    cfg["evalgate_test_marker"] = 1  # different bytes, different digest, same weights
    (other_ckpt / "config.json").write_text(json.dumps(cfg))
    moved = evaluate(proto, other_ckpt, "he-one", RunOptions(progress=False), store)
    assert moved["checkpoint"]["digest"] != first["checkpoint"]["digest"]
    assert moved["counts"]["generated"] == 2 and moved["counts"]["cached"] == 0

    # the misses added entries; they replaced nothing: the original key still hits
    assert evaluate(proto, tiny_checkpoint, "he-one", RunOptions(progress=False), store)["counts"]["cached"] == 2

    # the rendered prompt is part of the key: same checkpoint, protocol, item and seeds, but a renderer that now
    # writes the prompt differently (as a transformers upgrade can change a chat template's output) regenerates
    real_render = prompts_mod.render_prompt

    def upgraded(protocol, item, tokenizer):  # type: ignore[no-untyped-def]
        r = real_render(protocol, item, tokenizer)
        text = "# rendered by a newer library\n" + r.text
        return RenderedPrompt(r.item_id, text, r.response_prefix,
                                      __import__("hashlib").sha256(text.encode()).hexdigest(), r.system_merged)

    with monkeypatch.context() as m:
        m.setattr(prompts_mod, "render_prompt", upgraded)
        m.setattr(plan_mod, "renderer_versions", lambda: {"evalgate": "next", "transformers": "next"})
        rerendered = evaluate(proto, tiny_checkpoint, "he-one", RunOptions(progress=False), store)
    assert rerendered["counts"]["generated"] == 2 and rerendered["backend"]["prompts_from_run"] is None
    # the first run's samples still show the completions of its own prompt
    assert _texts(store, first["run_id"]) == texts


def _start_four_item_run(home: Path, name: str, smollm2_dir: Path,
                         humaneval_records: list[dict]) -> tuple[list[str], subprocess.Popen]:
    """Start ``evalgate run`` on four HumanEval items, one sample per batch, in a subprocess; return once the first
    generation is stored (the run is then half-way)."""
    items = [{"id": r["task_id"], **r} for r in humaneval_records[:4]]
    write_split("he-four", "smoke", items, {"source": "test"})
    proto = _protocol(home, name, n=1, max_tokens=8)
    args = [sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(proto), "--checkpoint", str(smollm2_dir),
            "--split", "he-four", "--json", "--backend-option", "token_budget=1"]  # one sample per batch
    store = Store()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=os.environ.copy(),
                            preexec_fn=as_from_a_terminal)  # Ctrl-C reaches it even from a background test run
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        with store.connect() as con:
            if con.execute("SELECT count(*) FROM generations").fetchone()[0] >= 1:
                break
        time.sleep(0.1)
    assert proc.poll() is None, f"the run ended before it could be stopped: {proc.stderr.read().decode()[-500:]}"
    return args, proc


def test_sigkill_half_way_then_resume_regenerates_only_what_is_missing(home: Path, smollm2_dir: Path,
                                                                        humaneval_records: list[dict]) -> None:
    args, proc = _start_four_item_run(home, "resume", smollm2_dir, humaneval_records)
    store = Store()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with store.connect() as con:
        stored = con.execute("SELECT count(*) FROM generations").fetchone()[0]
    assert 1 <= stored < 4, stored
    (killed,) = store.runs()
    assert killed["status"] == "running" and killed["metrics"] is None
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 0

    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=os.environ.copy(), timeout=900)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["counts"]["cached"] == stored and doc["counts"]["generated"] == 4 - stored
    assert f"run {killed['run_id']} was left unfinished" in r.stderr
    runs = {x["run_id"]: x for x in store.runs()}
    assert runs[killed["run_id"]]["status"] == "interrupted"
    assert runs[doc["run_id"]]["status"] == "complete"
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM generations").fetchone()[0] == 4
        assert con.execute("SELECT count(*) FROM samples WHERE run_id=?", [doc["run_id"]]).fetchone()[0] == 4


def test_resumed_samples_equal_uninterrupted_ones(home: Path, tiny_checkpoint: Path,
                                                  humaneval_records: list[dict]) -> None:
    """Per-sample seeds make a sample independent of which others are pending: generating samples {0, 1} at once
    equals generating 0 first and 1 later (what a resume does)."""
    write_split("he-one", "smoke", [{"id": r["task_id"], **r} for r in humaneval_records[:1]], {"source": "test"})
    proto = _protocol(home, "indep", n=2, max_tokens=6)
    together = Store(home / "a.duckdb")
    doc = evaluate(proto, tiny_checkpoint, "he-one", RunOptions(progress=False), together)
    separate = Store(home / "b.duckdb")
    first = _protocol(home, "indep", n=1, max_tokens=6, version="n1")  # generates sample 0 only
    evaluate(first, tiny_checkpoint, "he-one", RunOptions(progress=False), separate)
    with separate.connect() as con:  # move sample 0 under the n=2 protocol's hash, as if an earlier run stored it
        con.execute("UPDATE generations SET protocol_hash=?", [doc["protocol"]["sha256"]])
    resumed = evaluate(proto, tiny_checkpoint, "he-one", RunOptions(progress=False), separate)
    assert resumed["counts"]["cached"] == 1 and resumed["counts"]["generated"] == 1
    assert _texts(separate, resumed["run_id"]) == _texts(together, doc["run_id"])


def test_ctrl_c_exits_130_and_marks_the_run_interrupted(home: Path, smollm2_dir: Path,
                                                         humaneval_records: list[dict]) -> None:
    # fresh-user finding: Ctrl-C used to exit 1 (click's "Aborted!", which reads as gate FAIL) and mark the run
    # failed; 130 is the shell's code for SIGINT, and the run can resume like a killed one
    _, proc = _start_four_item_run(home, "sigint", smollm2_dir, humaneval_records)
    store = Store()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err.decode()[-800:]
    assert "interrupted (Ctrl-C)" in err.decode() and "Traceback" not in err.decode()
    (run,) = store.runs()
    assert run["status"] == "interrupted" and "Ctrl-C" in run["error"]
    # and `evalgate runs` shows it, with why it ended; the JSON form carries every stored field
    listed = subprocess.run([sys.executable, "-m", "evalgate.cli", "runs", "--status", "interrupted"],
                            capture_output=True, text=True, cwd=REPO, env=os.environ.copy(), timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert run["run_id"] in listed.stdout and "interrupted" in listed.stdout and "Ctrl-C" in listed.stdout
    as_json = subprocess.run([sys.executable, "-m", "evalgate.cli", "runs", "--json", "--status", "complete"],
                             capture_output=True, text=True, cwd=REPO, env=os.environ.copy(), timeout=120)
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == []


def test_sigterm_exits_143_marks_the_run_interrupted_and_it_resumes(home: Path, smollm2_dir: Path,
                                                                   humaneval_records: list[dict]) -> None:
    """Issue 44, item 12: SIGTERM (what Slurm and Kubernetes send on preemption) ended the process with Python's
    default action and left the run ``running`` until another run noticed; it is handled like Ctrl-C now: the run is
    marked interrupted at once, the command exits 143 (128 + SIGTERM), and the next run reuses what was stored."""
    args, proc = _start_four_item_run(home, "sigterm", smollm2_dir, humaneval_records)
    store = Store()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()[-800:]
    assert "terminated (SIGTERM)" in err.decode() and "Traceback" not in err.decode()
    (run,) = store.runs()
    assert run["status"] == "interrupted" and "SIGTERM" in run["error"]
    with store.connect() as con:
        stored = con.execute("SELECT count(*) FROM generations").fetchone()[0]
    r = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=os.environ.copy(), timeout=900)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["counts"]["cached"] == stored >= 1 and doc["counts"]["generated"] == 4 - stored
    assert "was left unfinished" not in r.stderr  # nothing was left running
