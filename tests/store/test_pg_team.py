"""One PostgreSQL store for several machines: a researcher's Ray sweep (a real local Ray cluster; its driver writes
the store, its workers generate) and a CI runner on "another machine" (a separate process with its own
EVALGATE_HOME and config directory, given only the store's URL, the signing key as a secret and the project's
splits) write to the same server store at the same time; ``evalgate audit`` from a third home, with only the URL
and the key, shows every read by anyone, and the chain and its signed head hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.splits import SplitManager
from evalgate.store import Store
from evalgate.sweep import SweepOptions, sweep
from tests.conftest import REPO
from tests.helpers.cli import cli_parts
from tests.sweep.sweep_fixtures import addition_protocol, addition_split, make_checkpoints, replay_options

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.server_only("several machines on one PostgreSQL server"),
              pytest.mark.integration, pytest.mark.timeout(900)]  # a Ray cluster and 3 processes: minutes under load


def _machine(root: Path, url: str, actor: str, key: str) -> dict[str, str]:
    """The environment of another machine: a home and a config directory of its own (no store file, no keys),
    the store's URL, the log-signing key as a secret, the project's splits (a checkout has them)."""
    return {**os.environ, "EVALGATE_HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "config"),
            "EVALGATE_STORE": url, "EVALGATE_ACTOR": actor, "EVALGATE_LOG_KEY": key}


def test_a_ray_sweep_and_a_ci_runner_share_one_log_that_any_home_audits(
        home: Path, postgres_url: str, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    monkeypatch.setenv("EVALGATE_STORE", postgres_url)
    monkeypatch.setenv("EVALGATE_ACTOR", "researcher")
    ckpts = make_checkpoints(home / "runs", tiny_checkpoint, [10, 20])
    proto = addition_protocol(home, max_tokens=4, n=1)
    addition_split("dev-a", 2)
    addition_split("dev-b", 2, first=5)
    # recorded answers (a0-a6) for both machines: the log, not the engine, is the point (the Ray workers then need
    # no torch; tests/sweep/test_ray_cluster.py runs the hf engine on Ray)
    replay = replay_options(home, 7, delay_s=0)
    store = Store(postgres_url)
    SplitManager(store).open("dev-b", "tuning", "researcher")  # the first append makes the team's signing key
    key = (home / "config" / "evalgate" / "log-signing.key").read_text()
    assert not (home / "ci").exists()

    ci = subprocess.Popen([sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(proto), "--checkpoint",
                           str(ckpts[0]), "--split", "dev-b", "--backend", "replay", "--backend-option",
                           f"file={replay.backend_options['file']}", "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=REPO, env=_machine(home / "ci", postgres_url, "ci-runner", key))
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        node = ray.get_runtime_context().get_node_id()
        doc = sweep(proto, str(home / "runs/*/*/checkpoint-*"), ["dev-a"],
                    SweepOptions(run=replay, ray="auto", chunk=1), store)
    finally:
        ray.shutdown()
    out, err = ci.communicate(timeout=600)
    assert ci.returncode == 0, err.decode()[-1500:]
    ci_run = json.loads(out)["run_id"]
    assert doc.counts == {"done": 2}
    assert not (home / "ci" / "home" / "evalgate.duckdb").exists()  # the CI machine wrote only to the server

    auditor = _machine(home / "auditor", postgres_url, "auditor", key)
    code, out, err = cli_parts("audit", "--json", env=auditor)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["splits"]["dev-a"]["by_actor"] == {"researcher": 2}  # one read per sweep unit
    assert summary["splits"]["dev-b"]["by_actor"] == {"ci-runner": 1, "researcher": 1}
    assert summary["chain"]["ok"] and summary["chain"]["rows"] == 4 and summary["chain"]["signature"]["ok"]
    code, out, err = cli_parts("audit", "log", "--json", env=auditor)
    rows: list[dict[str, Any]] = json.loads(out)
    assert [r["seq"] for r in rows] == [1, 2, 3, 4]  # one chain, no gap, whoever appended
    sweep_rows = [r for r in rows if r["split"] == "dev-a"]
    assert all(f"sent in memory to ray node {node}" in r["detail"] for r in sweep_rows)
    assert {r["run_id"] for r in sweep_rows} == {u.run_id for u in doc.units}
    assert [r["run_id"] for r in rows if r["actor"] == "ci-runner"] == [ci_run]
    code, out, err = cli_parts("runs", "--json", env=auditor)
    assert code == 0 and {r["run_id"] for r in json.loads(out)} == {ci_run, *(u.run_id for u in doc.units)}
