"""The verdict's audit samples are typed rows (``AuditSample``), stored with the verdict and read back as such, also
from a document stored before the rows were typed.

Over the fixture runs of tests/gate_fixtures.py, seeds 1 and 2: their best checkpoints' dev runs are ``dev-1-30``
(dev pass@1 0.6: items q0-q5 right, q6-q9 wrong) and ``dev-2-20`` (0.7: q0-q6 right), one sample each, sampling
seed 1, no stored generation (so no text, token count or finish reason)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.gate.history import load_verdict
from evalgate.gate.results import AuditSample, AuditSamples
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")


def _row(seed: int, item: str, score: float) -> AuditSample:
    run, step = {1: ("dev-1-30", 30), 2: ("dev-2-20", 20)}[seed]
    return AuditSample(seed=seed, step=step, run_id=run, item_id=item, sample_index=0, sample_seed=1, score=score,
                       status="correct" if score else "incorrect", completion_tokens=None, finish_reason=None,
                       extracted="1", text="")


def test_audit_samples_are_typed_rows_and_survive_the_stored_document(tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    policy = tmp_path / "gate.yaml"
    policy.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2, reward_hacking=False)))
    v = run_gate(load_policy(policy), built["store"], evaluate_decision=False)
    # highest: every right sample scores 1; ties by item id, seed 1's rows before seed 2's
    # lowest: wrong ones (seed 1: q6-q9, seed 2: q7-q9) by item id; longest: no token counts, so by item id
    assert v.samples == AuditSamples(
        highest_scoring=[_row(1, "q0", 1.0), _row(2, "q0", 1.0), _row(1, "q1", 1.0)],
        lowest_scoring=[_row(1, "q6", 0.0), _row(1, "q7", 0.0), _row(2, "q7", 0.0)],
        longest=[_row(1, "q0", 1.0), _row(2, "q0", 1.0), _row(1, "q1", 1.0)],
    )
    (row,) = built["store"].gates()
    again = load_verdict(row.document)
    assert again.samples == v.samples and isinstance(again.samples.longest[0], AuditSample)
    with pytest.deprecated_call(match="read samples.rows"):  # read as the dict it was, for one release
        assert dict(v.samples.items()) == {"highest_scoring": v.samples.highest_scoring,
                                           "lowest_scoring": v.samples.lowest_scoring, "longest": v.samples.longest}
    # a document stored while the rows were plain dicts had no "trajectory" key on a run without tools
    doc = json.loads(json.dumps(row.document))
    for rows in doc["samples"].values():
        for r in rows:
            del r["trajectory"]
    assert load_verdict(doc).samples == v.samples
