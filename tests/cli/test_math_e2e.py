"""GSM8K end to end with the real SmolLM2-135M-Instruct model on two smoke items, through the CLI in this process
(``tests/helpers/cli.py``: the commands' behaviour, not a fresh interpreter's, is what is tested here)."""

import json
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import REPO, SHARED_DATA
from tests.helpers.cli import cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # model runs: 15 minutes, not the default 5
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"


@pytest.mark.skipif(not GSM8K.is_file(), reason=f"GSM8K test set not found at {GSM8K} (shared data lives "
                    "beside the repository; see DESIGN.md 'Real inputs')")
def test_gsm8k_run_on_two_smoke_items_records_answers_and_failure_reasons(home: Path, smollm2_gguf: Path,
                                                                          smollm2_dir: Path) -> None:
    assert cli("splits", "import", "gsm8k", "--from", GSM8K).exit_code == 0
    smoke = [json.loads(x) for x in (home / "splits" / "gsm8k-smoke.jsonl").read_text().splitlines()]
    two = home / "two.jsonl"
    two.write_text("".join(json.dumps(it) + "\n" for it in smoke[:2]))
    assert cli("splits", "add", "gsm8k-two", "--tier", "smoke", "--file", two).exit_code == 0

    # the shipped zero-shot protocol with a tiny max_tokens (CPU time), and a variant whose response prefix
    # starts the final answer so that short completions end with one (finish_reason stop, scored)
    for name, max_tokens, prefix in (("gsm8k-e2e", 12, None), ("gsm8k-e2e-prefix", 6, "The answer is")):
        proto = yaml.safe_load((REPO / "protocols" / "gsm8k-cot.yaml").read_text())
        proto.update(name=name, version="1")
        proto["sampling"]["max_tokens"] = max_tokens
        if prefix:
            proto["prompt"]["response_prefix"] = prefix
            proto["sampling"]["stop"] = ["\n"]
        (home / f"{name}.yaml").write_text(yaml.safe_dump(proto))
        assert cli("protocol", "freeze", home / f"{name}.yaml").exit_code == 0

    docs = []
    for name in ("gsm8k-e2e", "gsm8k-e2e-prefix"):
        r = cli("run", "--protocol", home / f"{name}.yaml", "--checkpoint", smollm2_gguf, "--split", "gsm8k-two",
                "--json")
        assert r.exit_code == 0, r.stderr
        docs.append(json.loads(r.stdout))
    for doc in docs:
        assert doc["counts"]["samples"] == 2 and sum(doc["counts"]["by_status"].values()) == 2
        assert set(doc["counts"]["by_status"]) <= {"correct", "wrong", "no_answer", "truncated"}
        assert 0.0 <= doc["metrics"]["pass@1"] <= 1.0 and doc["metrics"]["pass@1_stderr"] >= 0.0
        assert doc["counts"]["timing"]["new_completion_tokens"] > 0
    assert docs[0]["effective_params"]["max_tokens"] == 12

    con = duckdb.connect(str(home / "home" / "evalgate.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT s.run_id, s.status, s.extracted, s.detail, g.finish_reason FROM samples s "
        "JOIN runs r USING (run_id) JOIN generations g ON g.checkpoint_digest = r.checkpoint_digest "
        "AND g.protocol_hash = r.protocol_hash AND g.item_id = s.item_id AND g.sample_index = s.sample_index"
    ).fetchall()
    con.close()
    assert len(rows) == 4
    for _run, status, extracted, detail, finish in rows:
        if finish == "length":  # cut off: never scored from partial reasoning
            assert status == "truncated" and extracted is None
        elif status == "no_answer":
            assert extracted is None and "found no answer" in detail
        else:
            assert status in ("correct", "wrong") and extracted is not None
            assert status == "correct" or detail.startswith("expected ")
