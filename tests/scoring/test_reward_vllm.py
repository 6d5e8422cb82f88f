"""The reward model on vLLM's pooling runner (``scoring.reward_vllm``) gives the rewards transformers gives, and a
``reward_preference`` run with ``engine: vllm`` goes through it. Runs in ``.venv-vllm`` (``make test-vllm``); skipped,
saying why, where vLLM's engine cannot be imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import REPO
from tests.helpers.vllm_lane import lane_marks

pytestmark = lane_marks(pytest.mark.slow)


def test_vllm_pooling_rewards_equal_transformers_and_drive_a_preference_run(tiny_rm: Path, home: Path) -> None:
    from evalgate.backends.vllm import close_engine
    from evalgate.cli import main
    from evalgate.rlhf.reward_vllm import VllmRewardModel
    from evalgate.rlhf.rm_engine import RewardModel

    pairs = [("What is 12 + 7?", "19"), ("What is 12 + 7?", "The answer is 9, because I say so."), ("Hi", "Hello!")]
    try:
        on_vllm = VllmRewardModel(tiny_rm).rewards(pairs)
        assert on_vllm == pytest.approx(RewardModel.load(tiny_rm).rewards(pairs), abs=2e-3)

        rows = [{"id": f"p{i}", "prompt": p, "chosen": a, "rejected": b, "category": "c"}
                for i, (p, a, b) in enumerate([(pairs[0][0], pairs[0][1], pairs[1][1]),
                                               (pairs[0][0], pairs[1][1], pairs[0][1])])]
        data = home / "pairs.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        runner = CliRunner()
        assert runner.invoke(main, ["splits", "add", "two", "--tier", "smoke", "--file", str(data)]).exit_code == 0
        proto = yaml.safe_load((REPO / "protocols" / "rm-preference.yaml").read_text())
        proto["scorer"]["options"]["engine"] = "vllm"
        path = home / "p.yaml"
        path.write_text(yaml.safe_dump(proto))
        assert runner.invoke(main, ["protocol", "freeze", str(path)]).exit_code == 0
        r = runner.invoke(main, ["run", "--protocol", str(path), "--checkpoint", str(tiny_rm), "--split", "two",
                                 "--json"])
        assert r.exit_code == 0, r.output
        # the two orders of one pair: exactly one is right (the rewards differ, as computed above)
        assert json.loads(r.stdout)["metrics"]["preference_accuracy"] == 0.5
    finally:
        close_engine()
