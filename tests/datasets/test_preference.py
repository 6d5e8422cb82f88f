"""Preference pairs built from benchmarks (``evalgate.datasets.preference``): the rejected answer is wrong by
construction, checked on a hand-written GSM8K file and on the real files where they are present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.datasets.preference import gsm8k_pairs, humaneval_pairs
from tests.conftest import SHARED_DATA

GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
RECORDS = [{"question": "1+1?", "answer": "one and one\n#### 2"},
           {"question": "1+3?", "answer": "one and three\n#### 4"},
           {"question": "2+2?", "answer": "two and two\n#### 4"},
           {"question": "half of 5?", "answer": "five halves\n#### 2.5"}]


def test_gsm8k_pairs_by_hand(tmp_path: Path) -> None:
    f = tmp_path / "test.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    pairs = {p["id"]: p for p in gsm8k_pairs(f)[0]}
    assert len(pairs) == 8
    assert pairs["gsm8k/test/0/other"] == {"id": "gsm8k/test/0/other", "prompt": "1+1?",
                                           "chosen": "one and one\n#### 2", "rejected": "one and three\n#### 4",
                                           "category": "gsm8k-other-solution"}
    # record 1's next record has the same answer (4): the one after it is borrowed
    assert pairs["gsm8k/test/1/other"]["rejected"] == "five halves\n#### 2.5"
    assert pairs["gsm8k/test/3/other"]["rejected"] == "one and one\n#### 2"  # cyclic
    assert pairs["gsm8k/test/1/wrong-final"]["rejected"] == "one and three\n#### 5"
    assert pairs["gsm8k/test/3/wrong-final"]["rejected"] == "five halves\n#### 3.5"


def test_humaneval_pairs_from_the_wheel() -> None:
    from evalgate.datasets.humaneval import humaneval_path

    pairs = humaneval_pairs(humaneval_path())[0]
    assert len(pairs) == 2 * 164
    stub = pairs[0]
    assert stub["id"] == "HumanEval/0/stub" and stub["rejected"] == "    pass\n"
    assert stub["prompt"].startswith("from typing import List") and "def has_close_elements" in stub["prompt"]
    assert all(p["chosen"] != p["rejected"] for p in pairs)


@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K test set not found at {GSM8K} (shared data lives beside "
                    "the repository; see DESIGN.md 'Real inputs')")
@pytest.mark.usefixtures("memory_store")
@pytest.mark.real_data
def test_gsm8k_pref_imports_as_tiered_splits(home: Path) -> None:
    r = CliRunner().invoke(main, ["splits", "import", "gsm8k-pref", "--from", str(GSM8K)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for t in ("smoke", "dev", "public") for x in
            (home / "splits" / f"gsm8k-pref-{t}.jsonl").read_text().splitlines()]
    assert {p["category"] for p in rows} == {"gsm8k-other-solution", "gsm8k-wrong-final"}
    for p in rows:
        assert p["chosen"].rsplit("####", 1)[1].strip() != p["rejected"].rsplit("####", 1)[1].strip()
