"""A run on a PostgreSQL store whose server goes away half-way (``pg_ctl stop -m fast``, a real server of its own):
the run stops with exit 2 naming the server (no traceback, no password), the generations it had stored are still
there when the server is back, and the rerun takes them from the cache and generates only the rest. The real SmolLM2
model in a subprocess, one sample per batch, as ``tests/runner/test_cache_resume.py`` stops a run on a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO
from tests.helpers.postgres import SUPERUSER, PostgresServer, find_bin_dir

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.server_only("a PostgreSQL server stopped and started again mid-run"),
              pytest.mark.timeout(900)]
PASSWORD = "pw-never-printed"
"""Written into the store's URL: the server trusts socket logins and never asks for it, so only a message that
printed the URL could show it."""


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own (the test stops it; the shared ``postgres_server`` serves other tests)."""
    pytest.importorskip("psycopg", reason="pip install 'evalgate[postgres]'")
    bin_dir, why = find_bin_dir()
    if bin_dir is None:
        pytest.skip(why)
    server = PostgresServer(bin_dir).start()
    yield server
    server.stop()


def _generations(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as con:
        return int(con.execute("SELECT count(*) FROM generations").fetchone()[0])  # type: ignore[index]


def test_a_run_survives_its_server_going_away(home: Path, own_server: PostgresServer, smollm2_dir: Path,
                                              humaneval_records: list[dict]) -> None:
    url = own_server.create_schema()
    env = {**os.environ, "EVALGATE_STORE": url.replace(f"{SUPERUSER}@", f"{SUPERUSER}:{PASSWORD}@")}
    write_split("he-four", "smoke", [{"id": r["task_id"], **r} for r in humaneval_records[:4]], {"source": "test"})
    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    proto.update(name="outage", version="1", pass_at_k=[1])
    proto["sampling"].update(temperature=1.0, top_p=1.0, max_tokens=8, n=1, stop=[])
    path = home / "outage.yaml"
    path.write_text(yaml.safe_dump(proto))
    from evalgate.protocol.freeze import freeze

    freeze(path, Store)
    args = [sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(path), "--checkpoint", str(smollm2_dir),
            "--split", "he-four", "--json", "--backend-option", "token_budget=1"]  # one sample per batch
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if _generations(url) >= 1:
                break
        except Exception:  # noqa: BLE001 - the table appears when the run has migrated the store
            pass
        time.sleep(0.1)
    assert proc.poll() is None, f"the run ended before the server could be stopped: {proc.stderr.read()[-500:]!r}"
    own_server.halt("fast")
    out, err = (b.decode() for b in proc.communicate(timeout=600))
    assert proc.returncode == 2, err[-1500:]
    assert "cannot use the store on the PostgreSQL server postgresql://evalgate_admin@" in err, err[-1500:]
    assert "Traceback" not in err and PASSWORD not in out + err
    assert json.loads(out)["exit_code"] == 2  # --json: one document on stdout, the error

    own_server.start()
    stored = _generations(url)
    assert 1 <= stored < 4, stored
    again = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
    assert again.returncode == 0, again.stderr[-1500:]
    doc = json.loads(again.stdout)
    assert doc["counts"]["cached"] == stored and doc["counts"]["generated"] == 4 - stored  # nothing generated twice
    assert "was left unfinished by a process that ended; marked interrupted" in again.stderr
    assert _generations(url) == 4
