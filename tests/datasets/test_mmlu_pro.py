"""MMLU-Pro: the importer on the shipped test set (counts from ../shared/data/PROVENANCE.md), its refusals of bad
records, and the tiered import through the CLI."""

import collections
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput
from evalgate.datasets.mmlu_pro import mmlu_pro_items
from evalgate.splits import load_manifest, read_items
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("memory_store")

MMLU_PRO = SHARED_DATA / "mmlu-pro" / "test.jsonl"
MMLU_PRO_SHA256 = "de3e252c059914c90d06ceebad992cf4721de926a3d32ce2d4e00c24a972dd79"  # PROVENANCE.md
needs_mmlu_pro = pytest.mark.skipif(not MMLU_PRO.is_file(), reason=f"MMLU-Pro test set not found at {MMLU_PRO} "
                                    "(shared data lives beside the repository; see DESIGN.md 'Real inputs')")


@needs_mmlu_pro
@pytest.mark.real_data
def test_the_shipped_test_set_reads_as_12032_items() -> None:
    items, raw = mmlu_pro_items(MMLU_PRO)
    assert len(items) == 12032 and len({it["id"] for it in items}) == 12032
    # PROVENANCE.md: 10 options for 9,981 items, fewer for the rest; 14 categories
    sizes = collections.Counter(len(it["options"]) for it in items)
    assert sizes[10] == 9981 and sum(sizes.values()) == 12032 and max(sizes) == 10
    assert len({it["category"] for it in items}) == 14
    first = json.loads(raw.splitlines()[0])
    assert items[0]["id"] == f"mmlu-pro/test/{first['question_id']}"
    assert items[0]["options"] == first["options"] and items[0]["answer"] == first["answer"]
    assert all("ABCDEFGHIJ"[it["answer_index"]] == it["answer"] for it in items)


def _write(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "mmlu.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


GOOD = {"question_id": 1, "question": "2+2?", "options": ["3", "4"], "answer": "B", "answer_index": 1,
        "cot_content": "", "category": "math", "src": "hand"}


@pytest.mark.parametrize(("change", "says"), [
    ({"answer": "A"}, "answer 'A' is not the letter of answer_index 1"),
    ({"answer_index": 2}, "answer_index 2 does not name one of its 2 options"),
    ({"options": []}, "'options' must be a list of 1 to 10 strings"),
    ({"options": [str(i) for i in range(11)]}, "'options' must be a list of 1 to 10 strings"),
    ({"question": None, "options": ["3", 4]}, "'options' must be a list"),
])
def test_a_bad_record_is_refused_naming_its_line(tmp_path: Path, change: dict, says: str) -> None:
    path = _write(tmp_path, GOOD, {**GOOD, "question_id": 2, **change})
    with pytest.raises(BadInput, match=r"mmlu\.jsonl:2: not an MMLU-Pro record: " + says.replace("(", r"\(")):
        mmlu_pro_items(path)


def test_missing_fields_repeated_ids_and_padding(tmp_path: Path) -> None:
    no_answer = {k: v for k, v in GOOD.items() if k != "answer"}
    with pytest.raises(BadInput, match=r":1: not an MMLU-Pro record: no 'answer' field"):
        mmlu_pro_items(_write(tmp_path, no_answer))
    with pytest.raises(BadInput, match=r":2: question_id 1 appears twice"):
        mmlu_pro_items(_write(tmp_path, GOOD, GOOD))
    # the Hugging Face copy pads every question to ten options with "N/A"; MMLU-Pro's preprocess drops them
    items, _ = mmlu_pro_items(_write(tmp_path, {**GOOD, "options": ["3", "4", "N/A", "N/A"]}))
    assert items[0]["options"] == ["3", "4"]
    with pytest.raises(BadInput, match="not found"):
        mmlu_pro_items(tmp_path / "absent.jsonl")


@needs_mmlu_pro
@pytest.mark.real_data
def test_import_through_the_cli_writes_four_tiers(home: Path) -> None:
    r = CliRunner().invoke(main, ["splits", "import", "mmlu-pro", "--from", str(MMLU_PRO)])
    assert r.exit_code == 0, r.output
    counts = {t: load_manifest(f"mmlu-pro-{t}").count for t in ("smoke", "dev", "public", "private")}
    assert counts == {"smoke": 8, "dev": 4008, "public": 4008, "private": 4008}  # 8 + 12,024 dealt round-robin
    smoke = load_manifest("mmlu-pro-smoke")
    assert smoke.provenance["file_sha256"] == MMLU_PRO_SHA256
    assert all(it["id"].startswith("mmlu-pro/test/") for it in read_items(smoke))
