"""GSM8K and MATH-500: gold answers parsed from every record (every tenth in the fast lane), tiered import through
the CLI.

The data files live outside the repository (``<repo>/../shared/data``, see its PROVENANCE.md); tests that need
them skip, saying so, where they are absent.
"""

import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.datasets.gsm8k import gsm8k_gold, gsm8k_items
from evalgate.datasets.math500 import math500_items
from evalgate.scoring import math_equal
from evalgate.scoring.extract import last_boxed
from evalgate.scoring.math import _parse, unwrap
from evalgate.splits import load_manifest, partition, read_items, splits_dir
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
MATH500 = SHARED_DATA / "math500" / "test.jsonl"
# sha256 values from ../shared/data/PROVENANCE.md
GSM8K_SHA256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"
MATH500_SHA256 = "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132"

needs_gsm8k = pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K test set not found at {GSM8K} "
                                 "(shared data lives beside the repository; see DESIGN.md 'Real inputs')")
needs_math500 = pytest.mark.skipif(not MATH500.is_file(), reason=f"MATH-500 not found at {MATH500} "
                                   "(shared data lives beside the repository; see DESIGN.md 'Real inputs')")


def test_gsm8k_gold_format() -> None:
    assert gsm8k_gold("Janet sells 9 eggs.\nShe makes 9 * 2 = $18 every day.\n#### 18") == "18"
    assert gsm8k_gold("...\n#### 1,018") == "1018"
    assert gsm8k_gold("...\n#### -3") == "-3"
    with pytest.raises(ValueError, match="####"):
        gsm8k_gold("the answer is 18")


# The gold-answer scans parse real records with math-verify (seconds for a whole set): the fast lane checks every
# tenth record, `make test` every record (the `integration` marker).
STRIDES = [pytest.param(1, marks=pytest.mark.integration, id="every-record"), pytest.param(10, id="every-10th")]


@needs_gsm8k
@pytest.mark.parametrize("stride", STRIDES)
@pytest.mark.real_data
def test_every_gsm8k_record_has_a_parseable_gold_answer(stride: int) -> None:
    items, _ = gsm8k_items(GSM8K)
    lines = [json.loads(x) for x in GSM8K.read_text().splitlines() if x.strip()]
    assert len(items) == len(lines) == 1319
    for it, rec in list(zip(items, lines, strict=True))[::stride]:
        tail = rec["answer"].rsplit("####", 1)[1].strip()  # e.g. "1,018", as the dataset writes it
        assert Decimal(it["answer"]) == Decimal(tail.replace(",", "")), it["id"]
        assert math_equal(tail, it["answer"]), it["id"]
    # the first test problem (Janet's ducks) is answered $18 in the dataset
    assert items[0]["id"] == "gsm8k/test/0" and items[0]["answer"] == "18"


@needs_math500
@pytest.mark.parametrize("stride", STRIDES)
@pytest.mark.real_data
def test_every_math500_gold_parses_and_matches_its_own_solution_box(stride: int) -> None:
    items, _ = math500_items(MATH500)
    assert len(items) == 500 and len({it["id"] for it in items}) == 500
    for it in items[::stride]:
        assert _parse(unwrap(it["answer"]), None), f"{it['id']}: math-verify cannot parse {it['answer']!r}"
        boxed = last_boxed(it["solution"])
        assert boxed is not None and math_equal(boxed, it["answer"]), (it["id"], boxed, it["answer"])


@needs_gsm8k
@pytest.mark.real_data
def test_gsm8k_import_tiers_manifests_and_encryption(home: Path) -> None:
    r = CliRunner().invoke(main, ["splits", "import", "gsm8k", "--from", str(GSM8K)])
    assert r.exit_code == 0, r.output
    counts = {t: load_manifest(f"gsm8k-{t}").count for t in ("smoke", "dev", "public", "private")}
    assert counts == {"smoke": 8, "dev": 437, "public": 437, "private": 437}  # 8 + 1311 dealt round-robin
    smoke = load_manifest("gsm8k-smoke")
    assert smoke.provenance["file_sha256"] == GSM8K_SHA256 and len(smoke.sha256) == 64
    expected = partition([f"gsm8k/test/{i}" for i in range(1319)])
    assert [it["id"] for it in read_items(smoke)] == expected["smoke"]
    priv = load_manifest("gsm8k-private")
    data = (splits_dir() / priv.data).read_bytes()
    assert priv.encrypted and b"gsm8k/test/" not in data and b"question" not in data


@needs_math500
@pytest.mark.real_data
def test_math500_import_uses_unique_ids(home: Path) -> None:
    r = CliRunner().invoke(main, ["splits", "import", "math500", "--from", str(MATH500)])
    assert r.exit_code == 0, r.output
    smoke = read_items(load_manifest("math500-smoke"))
    assert len(smoke) == 8
    assert all(it["id"].startswith("test/") and it["id"].endswith(".json") for it in smoke)
    assert load_manifest("math500-dev").provenance["file_sha256"] == MATH500_SHA256


def test_import_without_from_or_with_a_wrong_file_is_bad_input(home: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["splits", "import", "gsm8k"])
    assert r.exit_code == 2 and "--from" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    r = CliRunner().invoke(main, ["splits", "import", "gsm8k", "--from", str(bad)])
    assert r.exit_code == 2 and "bad.jsonl:1" in r.output


def test_unknown_dataset_lists_the_registered_ones(home: Path) -> None:
    r = CliRunner().invoke(main, ["splits", "import", "mmlu", "--from", "x.jsonl"])
    assert r.exit_code == 2
    assert ("unknown dataset 'mmlu'; did you mean 'mmlu-pro'? known datasets: gsm8k, gsm8k-pref, humaneval, "
            "humaneval-pref, ifeval, math500, math500-pref, mmlu-pro, rewardbench, xstest-safe, "
            "xstest-unsafe") in r.output


