"""The private split is unreadable without the key and never present in plain text in the repository."""

import subprocess
from pathlib import Path

import pytest

from evalgate.datasets.humaneval import import_humaneval
from evalgate.splits import load_manifest, partition, splits_dir
from tests.conftest import REPO


def private_texts(records: list[dict]) -> list[str]:
    """Distinctive lines (>= 40 characters) of the private HumanEval items' prompts and solutions that no other
    item shares."""
    private = set(partition([r["task_id"] for r in records])["private"])

    def lines(r: dict) -> set[str]:
        return {ln.strip() for ln in (r["prompt"] + r["canonical_solution"]).splitlines() if len(ln.strip()) >= 40}

    shared = set().union(*(lines(r) for r in records if r["task_id"] not in private))
    return sorted(set().union(*(lines(r) for r in records if r["task_id"] in private)) - shared)


def test_private_items_are_not_in_any_tracked_file(humaneval_records: list[dict]) -> None:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e}): the tracked files cannot be listed")
    texts = private_texts(humaneval_records)
    assert len(texts) > 52  # at least one distinctive line per private item on average
    leaks = []
    for name in filter(None, listed.decode().split("\0")):
        path = REPO / name
        if not path.is_file():
            continue
        content = path.read_bytes().decode("utf-8", errors="ignore")
        leaks += [f"{name}: {t[:60]}" for t in texts if t in content]
    assert leaks == []


def test_private_split_at_rest_has_no_plaintext_and_needs_the_key(home: Path, humaneval_records: list[dict],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.errors import RefusedByPolicy
    from evalgate.splits import read_items

    import_humaneval()
    m = load_manifest("humaneval-private")
    stored = b"".join(p.read_bytes() for p in splits_dir().iterdir())
    assert not [t for t in private_texts(humaneval_records) if t.encode() in stored]
    assert len(read_items(m)) == 52
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "no-key-here"))
    with pytest.raises(RefusedByPolicy, match="no key was found"):
        read_items(m)
