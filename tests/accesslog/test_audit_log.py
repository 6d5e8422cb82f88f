"""``evalgate audit log``: access-log rows (who, when, purpose, outcome, run) from the command line, filtered."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import SplitManager, write_split
from evalgate.store import Store
from tests.helpers.cli import cli_out

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

ITEMS = [{"id": "a", "question": "1+1", "answer": "2"}]


def test_audit_log_lists_rows_and_filters_by_split_date_and_refusal(home: Path) -> None:
    write_split("l-dev", "dev", ITEMS, {"source": "test"})
    write_split("l-private", "private", ITEMS, {"source": "test"})
    manager = SplitManager(Store())
    manager.open("l-dev", "tuning", "alice")
    with pytest.raises(RefusedByPolicy):
        manager.open("l-private", "peek", "bob")

    code, out = cli_out("audit", "log", "--json")
    assert code == 0, out
    rows = json.loads(out)
    # write_split logs no row; the read and the refusal do
    assert [(r["actor"], r["split"], r["tier"], r["purpose"], r["outcome"]) for r in rows] == [
        ("alice", "l-dev", "dev", "tuning", "read"), ("bob", "l-private", "private", "peek", "refused")]
    assert abs(datetime.fromisoformat(rows[0]["ts"]) - datetime.now(UTC)) < timedelta(minutes=5)
    assert "release-gate" in rows[1]["detail"]

    code, out = cli_out("audit", "log", "--refused")
    assert code == 0 and len(out.splitlines()) == 1
    assert "bob" in out and "l-private (private)" in out and "peek" in out and "refused" in out
    assert "may be read only for purpose release-gate" in out  # why, for a refusal
    code, out = cli_out("audit", "log", "--split", "l-dev", "--json")
    assert [r["actor"] for r in json.loads(out)] == ["alice"]
    tomorrow = (date.today() + timedelta(days=2)).isoformat()
    assert cli_out("audit", "log", "--since", tomorrow) == (0, "no access-log rows matching the filters\n")
    code, out = cli_out("audit", "log", "--since", "yesterday")
    assert code == 2 and "not an ISO date" in out


def test_audit_log_of_an_unknown_split_is_refused_like_audit(home: Path) -> None:
    """A typo in --split listed 'no access-log rows matching the filters' (exit 0), as if nobody had read it;
    'evalgate audit --split' refused the same name (exit 2)."""
    write_split("l-dev", "dev", ITEMS, {"source": "test"})
    for args in (("audit", "--split", "l-dve"), ("audit", "log", "--split", "l-dve")):
        code, out = cli_out(*args)
        assert (code, out) == (2, "error: unknown split 'l-dve': no manifest and no access-log rows; known splits: "
                                  "l-dev\n"), args
    # a split that exists but was never read: no rows, not an error
    assert cli_out("audit", "log", "--split", "l-dev") == (0, "no access-log rows matching the filters\n")
