"""The demo's guard split (``evalgate.demo.guard``): real XSTest safe prompts, found beside the checkout, the head of
the private tier ``evalgate splits import xstest-safe`` writes; a missing file is one clear error."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.demo.guard import GUARD_ITEMS, GUARD_SPLIT, XSTEST_CSV, find_data, guard_split
from evalgate.splits import load_manifest
from evalgate.splits.data import read_unlogged  # the public reader refuses the private tier
from tests.conftest import SHARED_DATA

pytestmark = [pytest.mark.usefixtures("memory_store"), pytest.mark.real_data]

needs_xstest = pytest.mark.skipif(not (SHARED_DATA / XSTEST_CSV).is_file(),
                                  reason=f"XSTest not found at {SHARED_DATA} (see ../shared/data/PROVENANCE.md)")


@needs_xstest
def test_guard_split_is_the_head_of_xstest_safe_private_with_the_csv_rows() -> None:
    r = CliRunner().invoke(main, ["splits", "import", "xstest-safe", "--from", str(SHARED_DATA / XSTEST_CSV)])
    assert r.exit_code == 0, r.output
    private = read_unlogged(load_manifest("xstest-safe-private"))
    assert len(private) in (80, 81)  # (250 - 8 smoke) dealt round-robin over dev, public, private
    path = guard_split(SHARED_DATA)
    m = load_manifest(GUARD_SPLIT)
    assert path.name == f"{GUARD_SPLIT}.yaml" and m.tier == "private" and m.encrypted and m.count == GUARD_ITEMS == 20
    assert m.provenance["file_sha256"] == "11783fb294ed017473ee53c207d71f2161c7672c8d0b037501e78387f801cb5a"
    items = read_unlogged(m)
    with (SHARED_DATA / XSTEST_CSV).open(newline="", encoding="utf-8") as f:
        rows = {f"xstest/{r['id']}": r for r in csv.DictReader(f)}
    for it in items:  # each item is the CSV's row: a safe prompt, word for word
        row = rows[it["id"]]
        assert (it["prompt"], it["label"], it["type"]) == (row["prompt"], "safe", row["type"])
    assert items == private[:GUARD_ITEMS]


def test_find_data_looks_above_the_working_directory_and_names_where_it_looked(tmp_path: Path) -> None:
    data = tmp_path / "shared" / "data"
    (data / XSTEST_CSV).parent.mkdir(parents=True)
    (data / XSTEST_CSV).write_text("id,prompt,type,label,focus,note\n")
    clone = tmp_path / "wt" / "evalgate"  # a worktree one level further down
    clone.mkdir(parents=True)
    assert find_data(start=clone) == data
    assert find_data(data) == data
    with pytest.raises(BadInput, match=r"needs XSTest's prompts \(xstest/xstest_prompts.csv\) and found none in "
                                       f"{tmp_path / 'nowhere'}; pass --data DIR"):
        find_data(tmp_path / "nowhere")
    (data / XSTEST_CSV).unlink()
    with pytest.raises(BadInput, match=f"found none in shared/data in {clone} or a folder above it"):
        find_data(start=clone)
