"""A split whose gold answer is a whole GSM8K solution (``... #### 18``) is refused before generation: a new user
added GSM8K's own rows with ``splits add`` and every completion was scored wrong against the solution text (pass@1
0.000 with the right number extracted), with nothing said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.core.errors import BadInput
from evalgate.runner.plan import check_items
from evalgate.scoring.base import get_scorer
from evalgate.scoring.math import math_equal
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO, SHARED_DATA
from tests.helpers.cli import cli_parts
from tests.runner.test_record import addition_protocol

GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
# GSM8K test.jsonl's second record's answer, as the file holds it (a worked solution ending in '#### 3')
ROBE = ("It takes 2/2=<<2/2=1>>1 bolt of white fiber\nSo the total amount of fabric is 2+1=<<2+1=3>>3 bolts of "
        "fabric\n#### 3")


def test_the_fault_a_solution_as_gold_never_equals_the_right_answer() -> None:
    assert not math_equal("3", ROBE) and math_equal("3", "3")


@pytest.mark.parametrize("protocol", ["gsm8k-cot.yaml", "addition.yaml"], ids=["math", "exact"])
def test_a_gsm8k_solution_as_gold_is_refused_naming_item_and_fix(protocol: str) -> None:
    from evalgate.protocol import load_protocol

    scorer = get_scorer(load_protocol(REPO / "protocols" / protocol))
    items = [{"id": "a", "question": "q", "answer": "18"}, {"id": "b", "question": "q", "answer": ROBE}]
    with pytest.raises(BadInput, match=r"split s: item 'b' \(record 2\): its gold answer 'answer' is a worked "
                                       r"solution ending in '#### N'") as e:
        check_items(items, scorer, "s")
    assert "evalgate splits import gsm8k --from FILE" in e.value.message and e.value.exit_code == 2
    check_items(items[:1], scorer, "s")  # a bare answer passes
    check_items([{"id": "c", "answer": "\\frac{1}{2}"}], scorer, "s")


@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K's test.jsonl not found at {GSM8K}")
def test_splits_add_of_gsm8ks_own_rows_is_refused_at_run_before_generation(home: Path, tmp_path: Path,
                                                                           tiny_checkpoint: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.runner import generate as generate_mod

    rows = GSM8K.read_text().splitlines()[:3]
    data = tmp_path / "mine.jsonl"
    data.write_text("\n".join(rows) + "\n")
    assert cli_parts("splits", "add", "mine-dev", "--tier", "dev", "--file", data, "--row-ids")[0] == 0
    proto = tmp_path / "gsm8k-cot.yaml"
    proto.write_text((REPO / "protocols" / "gsm8k-cot.yaml").read_text())
    assert cli_parts("protocol", "freeze", proto)[0] == 0
    monkeypatch.setattr(generate_mod, "get_backend", lambda *a, **k: pytest.fail("generation must not start"))
    code, out, err = cli_parts("run", "--protocol", proto, "--checkpoint", tiny_checkpoint, "--split", "mine-dev")
    assert code == 2, out + err
    assert err.count("error:") == 1 and "item '0' (record 1)" in err and "#### 18" in err
    assert json.loads(rows[0])["answer"].endswith("#### 18")
    store = Store()
    assert store.runs() == [] and [r.outcome for r in store.access_rows()] == ["added"]  # nothing read


def test_the_item_check_leaves_gsm8k_imported_by_its_dataset_alone(home: Path, tiny_checkpoint: Path) -> None:
    """The import keeps the solution in its own field ('solution') and the number as 'answer': no refusal."""
    from evalgate.demo.train import addition_items
    from evalgate.runner.evaluate import RunOptions, evaluate

    items = addition_items("dev", 1)
    items[0]["solution"] = "1 + 1 = 2\n#### 2"
    write_split("add-sol", "dev", items, {"source": "test"})
    doc = evaluate(addition_protocol(home, max_tokens=2), tiny_checkpoint, "add-sol", RunOptions(progress=False),
                   Store())
    assert doc["status"] == "complete"
