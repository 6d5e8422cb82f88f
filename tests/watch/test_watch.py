"""``evalgate watch``: checkpoints read only when completely written, bad input (missing run dir, deleted checkpoint,
corrupt trainer_state.json), one watch per run directory, and a real kill-and-restart (nothing evaluated twice,
nothing lost)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.store import Store
from evalgate.watch.files import STOP_FILE, read_queue
from evalgate.watch.loop import Watcher, WatchOptions, watch_locks
from tests.conftest import REPO

PROTOCOL = REPO / "protocols" / "addition.yaml"


@pytest.fixture
def dev_split() -> str:
    from evalgate.demo.train import addition_items
    from evalgate.splits import write_split

    write_split("addition-dev", "dev", addition_items("dev", 2), {"source": "evalgate.demo.train"})
    return "addition-dev"


def _state(step: int, max_steps: int = 9) -> str:
    return json.dumps({"global_step": step, "max_steps": max_steps, "log_history": [
        {"step": s, "loss": 1.0 / s} for s in range(1, step + 1)]})


def _write_ckpt(d: Path, step: int, weights: bytes = b"w" * 1000, max_steps: int = 9) -> Path:
    c = d / f"checkpoint-{step}"
    c.mkdir(parents=True)
    (c / "config.json").write_text("{}")
    (c / "model.safetensors").write_bytes(weights)
    (c / "trainer_state.json").write_text(_state(step, max_steps))
    return c


def _watcher(run_dirs: list[Path], tmp_path: Path, split: str, settle: float = 0.5) -> tuple[Watcher, list[str]]:
    said: list[str] = []
    w = Watcher(run_dirs, WatchOptions(PROTOCOL, split, settle_s=settle, status_dir=tmp_path / "status"), Store(),
                say=said.append)
    return w, said


@pytest.mark.integration  # a writer thread takes ~2.6 s of real time
def test_slowly_written_checkpoint_is_never_read_half_written(tmp_path: Path, dev_split: str) -> None:
    run = tmp_path / "run"
    c = run / "checkpoint-3"
    c.mkdir(parents=True)
    w, _ = _watcher([run], tmp_path, dev_split, settle=0.6)
    last_write: list[float] = []
    saw_half = threading.Event()

    def writer() -> None:  # one chunk every 0.2 s for about 2 s; trainer_state.json written in two halves
        (c / "config.json").write_text("{}")
        with open(c / "model.safetensors", "wb") as f:
            for _ in range(6):
                f.write(b"x" * 4096)
                f.flush()
                time.sleep(0.2)
        text = _state(3)
        with open(c / "trainer_state.json", "w") as f:
            f.write(text[: len(text) // 2])
            f.flush()
            time.sleep(0.8)  # longer than the settle time: only the parse check holds it back now
            saw_half.wait(60)  # and until the watcher has looked at it (a loaded machine can starve its thread)
            last_write.append(time.time())
            f.write(text[len(text) // 2:])
            f.flush()  # the last byte reaches the file here, after last_write[0]

    t = threading.Thread(target=writer)
    t.start()
    seen_corrupt, ready_at, starts = False, None, []
    while ready_at is None:
        assert not last_write or time.time() - last_write[0] < 120, "never became ready"
        starts.append(time.time())
        w.scan()
        cs = w.runs[0].checkpoints.get(3)
        if cs is not None and cs.status != "settling":
            assert cs.status == "ready", cs
            ready_at = time.time()
        elif cs is not None and "does not parse" in (cs.message or ""):
            seen_corrupt = True
            saw_half.set()
        time.sleep(0.05)
    t.join()
    assert seen_corrupt, "the half-written trainer_state.json was never seen as such"
    # never read while being written, and the settle time counted from the last byte, whatever the scheduling of
    # the writer thread on a loaded machine: the earliest the watcher can have seen the last byte is the start of
    # the scan under way when it was written
    assert last_write, "read while being written: ready before the last byte"
    seen_from = max((s for s in starts if s <= last_write[0]), default=last_write[0])
    assert ready_at - seen_from >= 0.6, f"ready {ready_at - seen_from:.2f} s after the last byte could be seen"

def test_a_file_written_while_it_is_checked_restarts_the_settle_time(tmp_path: Path, monkeypatch) -> None:
    """The race test_slowly_written_checkpoint_... hit once in a fast lane (ready 0.00 s after the last byte): the
    signature was taken, then trainer_state.json's last half was written, then it parsed, and the checkpoint was
    ready on a signature of the half-written file. Here the write lands inside the completeness check, every time."""
    from evalgate.watch import detect

    c = tmp_path / "run" / "checkpoint-3"
    c.mkdir(parents=True)
    (c / "config.json").write_text("{}")
    (c / "model.safetensors").write_bytes(b"w" * 100)
    text = _state(3)
    (c / "trainer_state.json").write_text(text[: len(text) // 2])
    cs = detect.CheckpointState(run_dir=str(c.parent), path=str(c), step=3)
    assert detect.settle(cs, c, False, now=0.0, settle_s=0.6) is not None  # half-written: does not parse
    real = detect.incomplete

    def finished_while_checked(path: Path) -> str | None:
        with open(c / "trainer_state.json", "a") as f:  # the writer's last bytes, between signature and parse
            f.write(text[len(text) // 2:])
        os.utime(c / "trainer_state.json", ns=(10**18, 10**18))  # a new mtime even on a coarse clock
        return real(path)

    monkeypatch.setattr(detect, "incomplete", finished_while_checked)
    detect.settle(cs, c, False, now=100.0, settle_s=0.6)  # 100 s after the half was seen unchanged
    assert cs.status == "settling", "ready on the signature of a file that changed while it was checked"
    monkeypatch.setattr(detect, "incomplete", real)
    detect.settle(cs, c, False, now=100.3, settle_s=0.6)
    assert cs.status == "settling"  # 0.3 s since the last byte
    detect.settle(cs, c, False, now=100.7, settle_s=0.6)
    assert cs.status == "ready"


def test_missing_run_dir_waits_and_deleted_checkpoint_is_skipped(tmp_path: Path, dev_split: str) -> None:
    run = tmp_path / "later"
    w, said = _watcher([run], tmp_path, dev_split, settle=30)
    w.scan()
    w.scan()
    assert [s for s in said if "does not exist yet" in s] == [f"watch: {run} does not exist yet; waiting for it"]
    _write_ckpt(run, 2)
    w.scan()
    assert w.runs[0].checkpoints[2].status == "settling"
    shutil.rmtree(run / "checkpoint-2")
    w.scan()
    assert w.runs[0].checkpoints[2].status == "skipped"
    assert any("deleted before it was evaluated" in s for s in said)
    w.write_status()
    doc = json.loads((tmp_path / "status" / "status.json").read_text())
    assert doc["runs"][0]["checkpoints"][0]["status"] == "skipped"
    assert "http-equiv='refresh'" in (tmp_path / "status" / "status.html").read_text()


def test_callback_queue_skips_the_settle_time(tmp_path: Path, dev_split: str) -> None:
    run = tmp_path / "run"
    _write_ckpt(run, 3)
    (run / "evalgate-queue.jsonl").write_text(json.dumps({"step": 3}) + "\n" + '{"event": "train_e')
    assert read_queue(run) == ({3}, False)  # the half-written last line is ignored
    w, _ = _watcher([run], tmp_path, dev_split, settle=60)
    w.scan()
    assert w.runs[0].checkpoints[3].status == "ready"


def test_second_watch_on_the_same_run_dir_is_refused(tmp_path: Path, dev_split: str) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main

    run = tmp_path / "run"
    with watch_locks([run], tmp_path / "home"):
        with pytest.raises(RefusedByPolicy, match="another evalgate watch"):
            with watch_locks([tmp_path / "other", run], tmp_path / "home"):
                pass
        res = CliRunner().invoke(main, ["watch", str(run), "--protocol", str(PROTOCOL), "--split", dev_split])
        assert res.exit_code == 2, res.output
        assert "another evalgate watch" in res.output
    with watch_locks([run], tmp_path / "home"):  # released with the first watch
        pass


def test_an_evaluated_checkpoint_is_reported_as_a_formatted_number(tmp_path: Path, dev_split: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # `watch` printed "dev pass@1 = 0.08333333333333333"; now the CLI's format with the stderr (1 of 12 correct:
    # sqrt(1/12 * 11/12 / 11) = 0.0833) and n. The evaluation itself is stood in for (the slow test runs it).
    from evalgate.watch import loop

    run = tmp_path / "run"
    ck = _write_ckpt(run, 3)
    w, said = _watcher([run], tmp_path, dev_split)
    w.scan()
    cs = w.runs[0].checkpoints[3]
    monkeypatch.setattr(loop, "resolve_checkpoint", lambda *a, **k: SimpleNamespace(digest="d" * 64))
    monkeypatch.setattr(loop, "evaluate", lambda *a, **k: {
        "run_id": "r1", "metrics": {"pass@1": 1 / 12, "pass@1_stderr": (1 / 12 * 11 / 12 / 11) ** 0.5},
        "counts": {"items": 12}})
    w.evaluate_one(cs)
    assert f"watch: {ck.name} ({run}): dev pass@1 0.083 ± 0.083 (± stderr, n 12 items)" in said
    assert cs.metric == 1 / 12  # status.json keeps the whole float


def test_collapse_writes_stop(tmp_path: Path, dev_split: str) -> None:
    from evalgate.watch.detect import CheckpointState

    run = tmp_path / "run"
    run.mkdir()
    w, said = _watcher([run], tmp_path, dev_split)
    rs = w.runs[0]
    rs.checkpoints[3] = CheckpointState(str(run), str(run / "checkpoint-3"), 3, status="done", metric=0.50)
    rs.checkpoints[6] = CheckpointState(str(run), str(run / "checkpoint-6"), 6, status="done", metric=0.35)
    w._check_collapse(rs, rs.checkpoints[6])  # a drop of 0.15 > 0.1 (the default collapse_drop)
    stop = json.loads((run / STOP_FILE).read_text())
    assert stop["step"] == 6 and stop["source"] == "collapse"
    assert "0.500 (step 3) -> 0.350, a drop of more than 0.1" in stop["reason"]


def _tiny_checkpoint(tok_dir: Path, dst: Path, step: int, max_steps: int) -> None:
    """A real HF checkpoint small enough to evaluate in seconds: a one-layer Llama (SmolLM2's architecture and
    tokenizer, random weights seeded by ``step``, so every checkpoint has its own digest) with trainer_state.json."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(step)
    cfg = json.loads((tok_dir / "config.json").read_text())
    small = LlamaConfig(vocab_size=cfg["vocab_size"], hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, bos_token_id=cfg.get("bos_token_id"),
                        eos_token_id=cfg.get("eos_token_id"), tie_word_embeddings=True)
    LlamaForCausalLM(small).save_pretrained(dst)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        if (tok_dir / f).is_file():
            shutil.copy(tok_dir / f, dst / f)
    (dst / "trainer_state.json").write_text(_state(step, max_steps))


def _watch_cmd(run: Path, tmp_path: Path, split: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "evalgate.cli", "watch", str(run), "--protocol", str(PROTOCOL), "--split", split,
            "--settle", "0.2", "--poll", "0.2", "--status-dir", str(tmp_path / "status"), *extra]


@pytest.mark.integration  # watch in a subprocess, killed and restarted
def test_kill_and_restart_evaluates_nothing_twice_and_loses_nothing(tmp_path: Path, dev_split: str,
                                                                    tiny_checkpoint: Path) -> None:
    from evalgate.store import Store

    run = tmp_path / "run"
    for step in (1, 2, 3):
        _tiny_checkpoint(tiny_checkpoint, run / f"checkpoint-{step}", step, max_steps=3)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen(_watch_cmd(run, tmp_path, dev_split), env=env, stderr=subprocess.PIPE, text=True)
    status = tmp_path / "status" / "status.json"
    deadline = time.time() + 600
    while True:  # kill it once the first checkpoint is done, before the last one is
        assert time.time() < deadline and p.poll() is None, "watch ended or hung"
        if status.is_file():
            doc = json.loads(status.read_text())
            cks = {c["step"]: c["status"] for c in doc["runs"][0]["checkpoints"]}
            if cks.get(1) == "done":
                break
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 143, err  # 128 + SIGTERM
    assert json.loads(status.read_text())["state"] == "stopped"
    first = Store().runs(status="complete")
    assert 1 in [r.step for r in first] and 3 not in [r.step for r in first]
    # the line a person reads, in the CLI's number format: pass@1 over the 2 items and its stderr, by hand from
    # the stored scores (2 items: 0 or 2 correct -> stderr 0; 1 correct -> sd 0.7071 / sqrt(2) = 0.5)
    r1 = next(r for r in first if r.step == 1)
    correct = sum(s.status == "correct" for s in Store().sample_scores(r1.run_id))
    want = {0: "0.000 ± 0.000", 1: "0.500 ± 0.500", 2: "1.000 ± 0.000"}[correct]
    assert f"checkpoint-1 ({run}): dev pass@1 {want} (± stderr, n 2 items)" in err
    res = subprocess.run(_watch_cmd(run, tmp_path, dev_split, "--exit-when-done"), env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "checkpoint-1 (" in res.stderr and "not evaluated again" in res.stderr
    runs = Store().runs(status="complete")
    assert sorted(r.step for r in runs) == [1, 2, 3]  # each exactly once: nothing twice, nothing lost
    assert len({r.checkpoint_digest for r in runs}) == 3
    assert {r.run_id for r in first} <= {r.run_id for r in runs}  # the first watch's runs were kept


def test_fail_signal_in_the_growing_log_writes_stop_and_exits(tmp_path: Path, dev_split: str) -> None:
    from evalgate.watch.files import LOG_FILE
    from evalgate.watch.loop import EXIT_STOPPED

    run = tmp_path / "run"
    run.mkdir()
    # the callback's log: loss NaN from step 3 (a fail finding of the nonfinite signal, docs/DIAGNOSTICS.md)
    rows = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.9}, {"step": 3, "loss": float("nan")}]
    (run / LOG_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    w, said = _watcher([run], tmp_path, dev_split, settle=60)
    w.opts.exit_on_stop = True
    assert w.run() == EXIT_STOPPED
    stop = json.loads((run / STOP_FILE).read_text())
    assert stop["source"] == "diagnostics" and stop["step"] == 3 and "nonfinite" in stop["reason"]
    assert json.loads((tmp_path / "status" / "status.json").read_text())["state"] == "stopped on STOP"


def test_a_policys_guards_reach_the_watch_and_the_callback(tmp_path: Path) -> None:
    """``--policy`` hands the gate policy's guards section (the diagnostics' ``Guards``) to the watch and the
    callback, so both stop on what the gate would fail."""
    from evalgate.training.callback import EvalgateCallback
    from evalgate.watch.loop import WatchOptions

    text = (REPO / "gates" / "demo.yaml").read_text().replace("guards:\n", "guards:\n  window: 7\n  fail_on: "
                                                               "[warn, fail]\n")
    policy = tmp_path / "gates" / "g.yaml"
    policy.parent.mkdir()
    policy.write_text(text.replace("../protocols/", str(REPO / "protocols") + "/")
                      .replace("$EVALGATE_DEMO_BASE", str(tmp_path / "base"))
                      .replace("$EVALGATE_DEMO_PROXIES", str(tmp_path / "proxies")))
    opts = WatchOptions.from_policy(policy, protocol=PROTOCOL, split="dev")
    assert (opts.guards.window, sorted(opts.guards.fail_on)) == (7, ["fail", "warn"])
    assert EvalgateCallback(policy=policy).guards.window == 7


@pytest.mark.usefixtures("memory_store")
def test_a_private_split_is_refused_at_start_and_logged(tmp_path: Path) -> None:
    """A watch on a private split must not start (it once ran on, failing each checkpoint, and showed the gate's
    release-gate runs there as 'already evaluated', their private metric on the status page)."""
    from evalgate.demo.train import addition_items
    from evalgate.splits import write_split
    from evalgate.store import Store

    write_split("addition-private", "private", addition_items("private", 2), {"source": "evalgate.demo.train"})
    with pytest.raises(RefusedByPolicy, match="addition-private \\(tier private\\) may be read only for purpose "
                                              "release-gate, not 'watch'"):
        _watcher([tmp_path / "run"], tmp_path, "addition-private")
    assert [(r.purpose, r.outcome) for r in Store().access_rows("addition-private")][-1] == ("watch", "refused")
    assert not (tmp_path / "status").exists()


def test_a_policy_is_read_for_what_watch_uses_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44, item 7: ``watch --policy`` with init's starter policy demanded ``$EVALGATE_BASELINE`` (the gate's
    baseline checkpoint), which watch never uses. The watch, the callback and ``audit reward --policy`` read the
    policy's metric, selection, guards or reward_audit without resolving its paths; the gate still demands it."""
    from evalgate.core.errors import BadInput
    from evalgate.gate import load_policy
    from evalgate.training.callback import EvalgateCallback
    from evalgate.watch.loop import WatchOptions

    monkeypatch.delenv("EVALGATE_BASELINE", raising=False)
    policy = tmp_path / "g.yaml"
    policy.write_text("name: g\nprotocol: p@1\nselection_split: d\ndecision_split: x\nmetric: mean_score\n"
                      "baseline: {checkpoint: $EVALGATE_BASELINE}\nselection: {collapse_drop: 0.25}\n"
                      "guards: {window: 3}\nreward_audit: {reward_min: 0.8}\n")
    opts = WatchOptions.from_policy(policy, protocol=PROTOCOL, split="dev")
    assert (opts.metric, opts.collapse_drop, opts.guards.window) == ("mean_score", 0.25, 3)
    assert EvalgateCallback(policy=policy).guards.window == 3
    with pytest.raises(BadInput, match="environment variable that is not set"):
        load_policy(policy)
    policy.write_text(policy.read_text().replace("window: 3", "windw: 3"))
    with pytest.raises(BadInput, match="did you mean 'window'"):  # the whole file is still validated
        WatchOptions.from_policy(policy, protocol=PROTOCOL, split="dev")
