"""A ``--json`` command that fails prints one JSON error document on stdout (issue 13 point 14c), with the same
exit code and the usual one line on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from evalgate.store import Store
from tests.conftest import REPO
from tests.helpers.cli import cli


def test_run_json_failure_prints_an_error_document(home: Path) -> None:
    from evalgate.datasets.humaneval import import_humaneval

    # the split exists (an unknown split is refused first, before the checkpoint is looked at)
    import_humaneval(store=Store())
    r = cli("run", "--protocol", str(REPO / "protocols" / "humaneval-smoke.yaml"), "--checkpoint",
                 str(home / "nope"), "--split", "humaneval-smoke", "--json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc == {"error": doc["error"], "exit_code": 2} and "not found" in doc["error"]
    assert r.stderr.startswith("error: ")


def test_every_json_command_fails_the_same_way(home: Path) -> None:
    r = cli("audit", "--since", "yesterday-ish", "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout) == {"error": "--since 'yesterday-ish' is not an ISO date (e.g. 2026-11-01)",
                                    "exit_code": 2}
    # without --json stdout stays empty
    plain = cli("audit", "--since", "yesterday-ish")
    assert plain.exit_code == 2 and plain.stdout == ""
