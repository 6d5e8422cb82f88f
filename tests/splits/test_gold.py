"""`evalgate splits add --gold gsm8k|boxed` takes each gold answer out of its worked solution by the dataset's own
convention (new-user finding: `splits add` of GSM8K's test.jsonl kept '... #### 18' as the gold, and the only way to
the number was `splits import gsm8k` with its fixed tiers). On the real files in ../shared/data (PROVENANCE.md):
GSM8K's answers end '#### N' (the dataset's convention, Cobbe et al. 2021), MATH-500's solutions box the answer its
own 'answer' field states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.core.errors import BadInput
from evalgate.protocol import load_protocol
from evalgate.runner.plan import check_items
from evalgate.scoring.base import get_scorer
from evalgate.splits import add_split, load_manifest
from evalgate.splits.data import read_items
from evalgate.splits.gold import boxed_gold, extract_gold, gsm8k_gold
from evalgate.store import Store
from tests.conftest import REPO, SHARED_DATA
from tests.helpers.cli import cli_parts

GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
MATH500 = SHARED_DATA / "math500" / "test.jsonl"
pytestmark = pytest.mark.usefixtures("memory_store")


def test_the_conventions_by_hand() -> None:
    assert gsm8k_gold("Janet sells 9 eggs.\n#### 18") == "18" and gsm8k_gold("...\n#### 2,125") == "2125"
    assert gsm8k_gold("... #### -3 ") == "-3"
    with pytest.raises(ValueError, match="no '#### <number>'"):
        gsm8k_gold("#### 18 and then more text")
    assert boxed_gold("so $x = \\boxed{\\frac{1}{2}}$.") == "\\frac{1}{2}"
    assert boxed_gold("first \\boxed{1}. No wait, \\boxed{2}") == "2"
    with pytest.raises(ValueError, match="no complete"):
        boxed_gold("cut off: \\boxed{\\frac{1}{2}")
    with pytest.raises(BadInput, match="item 'a' has a 'solution' field already"):
        extract_gold([{"id": "a", "answer": "x\n#### 1", "solution": "kept"}], "gsm8k", "f.jsonl")


@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K's test.jsonl not found at {GSM8K}")
@pytest.mark.real_data
def test_splits_add_gold_gsm8k_on_the_real_test_file(home: Path) -> None:
    code, out, err = cli_parts("splits", "add", "gsm-dev", "--tier", "dev", "--file", GSM8K, "--row-ids",
                               "--gold", "gsm8k")
    assert code == 0 and "1319 items" in out and "note:" not in err, (out, err)
    items = read_items(load_manifest("gsm-dev"))
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    assert len(items) == 1319
    # by hand from the file: Janet's ducks 18, the robe 3 bolts, Josh's house 70,000, Johnny's blocks '#### 2,125'
    assert [items[i]["answer"] for i in (0, 1, 2, 146)] == ["18", "3", "70000", "2125"]
    assert all(it["solution"] == r["answer"] and it["question"] == r["question"]
               for it, r in zip(items, rows, strict=True))
    assert not any("#" in it["answer"] or "," in it["answer"] for it in items)
    assert "GSM8K" in load_manifest("gsm-dev").provenance["gold"]
    # the math scorer's item check (which refuses a solution as gold) now takes every item
    check_items(items, get_scorer(load_protocol(REPO / "protocols" / "gsm8k-cot.yaml")), "gsm-dev")


@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K's test.jsonl not found at {GSM8K}")
@pytest.mark.real_data
def test_without_gold_a_gsm8k_file_is_kept_as_written_with_a_note(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "three.jsonl"
    data.write_text("\n".join(GSM8K.read_text().splitlines()[:3]) + "\n")
    code, out, err = cli_parts("splits", "add", "gsm-raw", "--tier", "dev", "--file", data, "--row-ids")
    assert code == 0, (out, err)
    assert err.count("note:") == 1 and "--replace --gold gsm8k" in err and "#### N" in err
    assert read_items(load_manifest("gsm-raw"))[0]["answer"].endswith("#### 18")
    # an answer not in the convention, with --gold: one error naming the item, nothing written or logged
    rows = GSM8K.read_text().splitlines()[:3]
    rows[1] = json.dumps({**json.loads(rows[1]), "answer": "three bolts"})
    data.write_text("\n".join(rows) + "\n")
    code, out, err = cli_parts("splits", "add", "gsm-bad", "--tier", "dev", "--file", data, "--row-ids",
                               "--gold", "gsm8k")
    assert code == 2 and err.count("error:") == 1 and "item '1': no '#### <number>'" in err, (out, err)
    assert not (home / "splits" / "gsm-bad.yaml").exists()
    assert [r.split for r in Store().access_rows()] == ["gsm-raw"]


@pytest.mark.skipif(not MATH500.is_file(), reason=f"MATH-500's test.jsonl not found at {MATH500}")
@pytest.mark.real_data
def test_gold_boxed_on_math500_gives_the_datasets_own_answers(home: Path) -> None:
    add_split("m500", "dev", MATH500, store=Store(), fmt="jsonl", gold="boxed",
              mapping=["id=unique_id", "question=problem", "solution=solution"])  # the answer column left out
    items = read_items(load_manifest("m500"))
    want = {r["unique_id"]: r["answer"] for r in map(json.loads, MATH500.read_text().splitlines())}
    assert len(items) == 500 and {it["id"]: it["answer"] for it in items} == want
    # a MATH-style item whose solution boxes nothing: refused, naming it
    with pytest.raises(BadInput, match=r"item 'x': no complete \\boxed"):
        extract_gold([{"id": "x", "solution": "the answer is 4"}], "boxed", "f.jsonl")
