"""The RLHF reward-hacking triad rule (``rules.reward_model_protocol``): RM score up, metric down, length up between
consecutive dev checkpoints; hand-made curves, and the gate on a real store."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.rlhf.triad import seed_triad, triad_rule
from evalgate.store import Store
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")


def test_seed_triad_by_hand() -> None:
    # (step, rm, metric, tokens): 10 -> 20 all three rise (no triad: the metric rose); 20 -> 30 the triad
    points = [(10, 0.1, 0.5, 20.0), (20, 0.2, 0.6, 25.0), (30, 0.3, 0.4, 30.0), (40, 0.5, 0.3, 31.0)]
    assert seed_triad(points) == ("steps 20 -> 30: reward-model score 0.2 -> 0.3 while the metric 0.6 -> 0.4 and "
                                  "completion tokens 25 -> 30")
    assert seed_triad([(10, 0.1, 0.5, 20.0), (20, 0.2, 0.4, 20.0)]) is None  # length flat: not the triad
    assert seed_triad([(10, 0.3, 0.5, 20.0), (20, 0.2, 0.4, 30.0)]) is None  # RM score fell
    assert seed_triad([(10, 0.1, 0.5, 20.0)]) is None


def _rm_run(store: Store, run_id: str, digest: str, reward_mean: float, split: str = "fx-dev") -> None:
    store.create_run({"run_id": run_id, "protocol_name": "rm", "protocol_version": "1", "protocol_hash": "hr",
                      "checkpoint_digest": digest, "checkpoint_path": "/x", "split": split, "tier": "dev",
                      "split_sha256": "x", "sampling_seed": 0, "backend": "hf"})
    store.finish_run({"run_id": run_id, "metrics": {"reward_mean": reward_mean}, "counts": {}, "wall_s": 1.0}, [])


def test_triad_rule_over_seeds_reads_rm_runs_from_the_store(home: Path) -> None:
    st = Store()
    for i, (digest, r) in enumerate([("a10", 0.1), ("a20", 0.2), ("a20", 0.25), ("a30", 0.3)]):
        _rm_run(st, f"rm{i}", digest, r)  # a20 twice: the newest run (0.25) counts
    _rm_run(st, "rm-other-split", "a30", -5.0, split="fx-public")

    def ck(step, digest, value, tokens):
        return SimpleNamespace(step=step, digest=digest, value=value, metrics={"mean_completion_tokens": tokens})

    seeds = [SimpleNamespace(train_seed=1, checkpoints=[ck(10, "a10", 0.5, 20.0), ck(20, "a20", 0.6, 22.0),
                                                        ck(30, "a30", 0.4, 30.0), ck(40, "no-rm-run", 0.1, 50.0)])]
    policy = SimpleNamespace(rules=SimpleNamespace(reward_model_protocol="rm@1"), selection_split="fx-dev")
    name, passed, detail = triad_rule(st, policy, seeds)
    assert (name, passed) == ("rlhf_reward_hacking", False)
    assert detail == ("seed 1: steps 20 -> 30: reward-model score 0.25 -> 0.3 while the metric 0.6 -> 0.4 and "
                      "completion tokens 22 -> 30")
    policy.rules.reward_model_protocol = None
    assert triad_rule(st, policy, seeds) is None


def test_the_gate_applies_the_rule(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    pol = fx.policy_dict(built["baseline"], min_improvement=0.0, confidence=0.9, reward_hacking=False,
                         reward_model_protocol="rm@1")
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(pol))
    rule = {r.rule: r for r in run_gate(load_policy(path), built["store"], evaluate_decision=False).rules}
    assert not rule["rlhf_reward_hacking"].passed and "not checkable" in rule["rlhf_reward_hacking"].detail
    # RM runs of every dev checkpoint, the score rising; the fixture's dev runs all have 20 completion tokens, so
    # length never rises: no triad over the 3 steps of each of the 2 seeds
    for seed in (1, 2):
        for j, step in enumerate(fx.STEPS):
            _rm_run(built["store"], f"rm-{seed}-{step}", f"d{seed}-{step}", 0.1 * (j + 1))
    rule = {r.rule: r for r in run_gate(load_policy(path), built["store"], evaluate_decision=False).rules}
    assert rule["rlhf_reward_hacking"].passed and rule["rlhf_reward_hacking"].detail.startswith("no triad over 6 ")
