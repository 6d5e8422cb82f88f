"""``fileio.build_once``: the once-per-machine cache of the demo's training and the tiny reward model."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.core.fileio import build_once


def test_builds_once_and_never_leaves_a_half_built_directory(tmp_path: Path) -> None:
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "model").write_text("weights")

    final = tmp_path / "cache" / "key"
    assert build_once(final, build) == final and (final / "model").read_text() == "weights"
    assert (final / "DONE").is_file()
    assert build_once(final, build) == final and len(calls) == 1  # cached: not built again

    def broken(tmp: Path) -> None:
        (tmp / "half").write_text("x")
        raise RuntimeError("killed")

    other = tmp_path / "cache" / "other"
    with pytest.raises(RuntimeError, match="killed"):
        build_once(other, broken)
    assert not other.exists() and sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["key", "key.lock",
                                                                                              "other.lock"]
    # an interrupted earlier build (no DONE) is replaced
    (other / "stale").parent.mkdir()
    (other / "stale").write_text("old")
    build_once(other, build)
    assert sorted(p.name for p in other.iterdir()) == ["DONE", "model"]
