"""`splits add` never replaces a split silently, never changes a tier, and refuses empty files (fresh-user
findings: a private split could be overwritten by dev data with exit 0 and nothing logged)."""

import json
from pathlib import Path

import pytest

from evalgate.errors import BadInput
from evalgate.splits import add_split, load_manifest
from evalgate.store import Store


def _jsonl(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "q": i}) + "\n" for i in ids))
    return path


def test_existing_split_needs_replace_and_keeps_its_tier(home: Path) -> None:
    a = _jsonl(home / "a.jsonl", ["x1", "x2"])
    b = _jsonl(home / "b.jsonl", ["y1"])
    add_split("secret", "private", a)
    with pytest.raises(BadInput, match="already exists .*pass --replace"):
        add_split("secret", "private", b)
    with pytest.raises(BadInput, match="tier private; a split's tier never changes"):
        add_split("secret", "dev", b, replace=True)
    assert load_manifest("secret").count == 2 and load_manifest("secret").tier == "private"
    add_split("secret", "private", b, replace=True, actor="carol")
    assert load_manifest("secret").count == 1
    rows = Store().access_rows("secret")
    assert [(r["outcome"], r["actor"], r["purpose"]) for r in rows] == [("replaced", "carol", "replace-data")]
    assert "(2 items) -> " in rows[0]["detail"] and "(1 items)" in rows[0]["detail"]


def test_empty_file_and_bad_policy_are_bad_input(home: Path) -> None:
    empty = home / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(BadInput, match="holds no records"):
        add_split("e", "dev", empty)
    with pytest.raises(BadInput, match="invalid policy option"):
        add_split("p", "public", _jsonl(home / "p.jsonl", ["a"]), policy={"max_reads": -3})
    assert not (home / "splits" / "e.yaml").exists() and not (home / "splits" / "p.yaml").exists()
