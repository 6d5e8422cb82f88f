"""Issue 42, item 1, end to end: a checkpoint changed after its runs, with the digest cache poisoned to hide it, is
refused by the gate and not taken for the gated one by a run on a public split.

The attack as the issue ran it on landed main: ``config.json``'s ``rms_norm_eps`` 1e-5 -> 0.5 (every output
changes), the new file's stat signature copied into the old entry of ``$EVALGATE_HOME/file-digests.json``. Then
``evalgate run`` generated nothing (all cached) and ``evalgate gate`` printed its verdict from free re-reads, the
budget unchanged. Real SmolLM2 checkpoint, real ``evalgate gate`` (CliRunner), tiny splits.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalgate.checkpoints import identity
from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.cli import main
from evalgate.demo.train import addition_items
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.gate.test_real import _variant, tiny_addition


def _poison(home: Path, f: Path) -> None:
    cache = home / "home" / "file-digests.json"
    entries = json.loads(cache.read_text())
    st = f.stat()
    entries[str(f.resolve())]["stat"] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    cache.write_text(json.dumps(entries))


@pytest.mark.timeout(1200)
def test_the_gate_refuses_a_changed_checkpoint_behind_a_poisoned_digest_cache(
        home: Path, smollm2_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "RACY_WINDOW_S", 0.05)  # the files below were written a moment ago
    monkeypatch.delenv("EVALGATE_NO_DIGEST_CACHE", raising=False)
    proto = tiny_addition(home, "cc")
    write_split("cc-public", "public", addition_items("train", 2), {"source": "test"})
    ck = _variant(smollm2_dir, home / "train" / "seed1" / "checkpoint-2", 2)
    config = ck / "config.json"
    t = time.time() - 3600
    os.utime(config, (t, t))
    time.sleep(0.2)
    opts = RunOptions(train_run="cc", train_seed=1, progress=False)
    evaluate(proto, ck, "cc-dev", opts, store=Store())
    first_public = evaluate(proto, ck, "cc-public", opts, store=Store())
    policy = home / "g.yaml"
    policy.write_text(yaml.safe_dump({
        "name": "cc", "protocol": "cc-add@1", "protocol_file": str(proto), "selection_split": "cc-dev",
        "decision_split": "cc-private", "baseline": {"checkpoint": str(smollm2_dir)},
        "rules": {"min_seeds": 1, "max_truncation_rate": 1.0}}))
    cli = CliRunner()
    first = cli.invoke(main, ["gate", "--policy", str(policy), "--json"])
    assert first.exit_code in (0, 1), first.output
    old = first_public["checkpoint"]["digest"]

    cfg = json.loads(config.read_text())
    assert cfg["rms_norm_eps"] == pytest.approx(1e-5)
    config.write_text(json.dumps({**cfg, "rms_norm_eps": 0.5}))
    os.utime(config, (t, t))  # its mtime restored, as a careful attacker would; ctime cannot be
    time.sleep(0.2)
    _poison(home, config)
    assert resolve_checkpoint(ck).digest == old  # the poisoned entry holds on the dev fast path (documented)

    store = Store()
    rows = len(store.access_rows("cc-private"))
    again = cli.invoke(main, ["gate", "--policy", str(policy)])
    assert again.exit_code == 2, again.output  # before issue 42: the first verdict again, from re-reads
    assert "is not the checkpoint its runs evaluated" in again.output
    new = store.access_rows("cc-private")[rows:]
    assert [r.outcome for r in new] == ["refused"]

    public = evaluate(proto, ck, "cc-public", opts, store=Store())  # a public run hashes the bytes: a new identity
    assert public["checkpoint"]["digest"] != old
    assert public["counts"]["cached"] == 0
