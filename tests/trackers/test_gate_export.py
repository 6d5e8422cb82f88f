"""What a private aggregate may reach a tracker (issue 46, item 8): the gate's verdict, reason and each rule's
pass/fail with gate-level aggregates (the difference and its CI over all seeds, counts of seeds); never a seed's
value on the decision split, nor the baseline's. Before, ``seeds_beat_baseline`` sent "2 of 2 seeds' best >=
baseline 0.4000 (seed 1: 0.6000, seed 2: 0.7000)" and the report files (each holding per-seed decision values)
were copied as artifacts. Read back from a real TensorBoard event file with TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.trackers import TrackerConfig, export_gate, open_trackers
from tests import gate_fixtures as fx
from tests.trackers.tracker_read import tb_scalars, tb_texts

pytestmark = pytest.mark.usefixtures("memory_store")

# the fixture's decision split (tests/gate_fixtures.py): baseline 4/10, seed 1's best 6/10, seed 2's 7/10; every
# run 20 completion tokens (1.00x), truncation 0
PER_RUN = [b"0.4000", b"0.6000", b"0.7000", b"0.400", b"0.600", b"0.700", b"1.00x", b"seed 1: 0.0", b"seed 2: 0.0"]


def test_rule_details_reach_the_tracker_as_counts_of_seeds(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(
        built["baseline"], reward_hacking=False, min_seeds=2, min_improvement=0.0, seeds_beat_baseline_share=1.0,
        max_truncation_rate=0.1, max_repetition=0.5, max_length_inflation=1.5)))
    v = run_gate(load_policy(p), built["store"], evaluate_decision=False)
    rules = {r.rule: r for r in v.rules}
    # the gate's own report keeps the per-seed values (it is the release report; trackers are not)
    assert "(seed 1: 0.6000, seed 2: 0.7000)" in rules["seeds_beat_baseline"].detail
    trk = tmp_path / "trk"
    export_gate(v.as_dict(), open_trackers(["tensorboard"], TrackerConfig(dir=trk, project="fx")), store=built["store"])
    logdir = trk / "tensorboard" / "gate" / "fx-gate"
    ((_, text),) = tb_texts(logdir)["gate/verdict"]
    assert "`seeds_beat_baseline`: 2 of 2 seeds' best >= the baseline on fx-private; required share >= 1" in text
    assert "`max_truncation_rate`: 2 of 2 seeds' best: truncation_rate on fx-private <= 0.1" in text
    assert "`max_length_inflation`: 2 of 2 seeds' best: mean completion tokens within 1.5x the baseline's" in text
    assert "`min_improvement`: pass@1 difference vs baseline +" in text  # the gate-level aggregate and its CI
    assert all(k.startswith("gate/") for k in tb_scalars(logdir))
    blob = b"".join(f.read_bytes() for f in trk.rglob("*") if f.is_file())
    assert [x for x in PER_RUN if x in blob] == []
    assert not (logdir / "artifacts").exists()  # no report file: each holds per-seed decision values
