"""``RunRecord.counts`` is a ``RunCounts`` (issue 43, typed results): typed reads, reads by name as the dict gave, and
the stored and printed documents unchanged, for a record of today's shape and for counts an older evalgate stored
(written by hand in the shape of the first ``counts``: the timings at the top, no ``timing``, ``samples_from`` nor
``reasoning``)."""

from __future__ import annotations

import json

import pytest

from evalgate.runner.record import RunCounts, RunRecord

# a run of 3 items x 2 samples, 4 of them from the cache of run r0, as the store holds its counts (by hand)
NOW = {"items": 3, "samples": 6, "generated": 2, "samples_from": {"r0": 4, "r1": 2}, "cached": 4,
       "by_status": {"correct": 5, "wrong": 1}, "timing": {"wall_s": 1.5, "tokens_per_s": None},
       "reasoning": {"strip": None, "with_reasoning": 0, "unclosed": 0}}
OLD = {"items": 3, "samples": 6, "generated": 6, "cached": 0, "generate_s": 7.5, "score_s": 0.5, "wall_s": 9.0,
       "new_completion_tokens": 120, "by_status": {"correct": 6}}

ROW = {"run_id": "r1", "status": "complete", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "h",
       "checkpoint_path": "/c", "checkpoint_digest": "ab", "train_run": None, "train_seed": None, "step": None,
       "split": "s", "tier": "dev", "split_sha256": "x", "backend": "hf", "backend_info": None,
       "effective_params": None, "sampling_seed": 0, "metrics": {"pass@1": 0.5}, "wall_s": 1.5,
       "actor": "a", "purpose": "evaluation", "error": None}


@pytest.mark.parametrize("stored", [NOW, OLD], ids=["now", "older"])
def test_counts_read_typed_and_by_name_and_store_as_they_were(stored: dict) -> None:
    record = RunRecord.from_row({**ROW, "counts": stored})
    c = record.counts
    assert isinstance(c, RunCounts)
    assert (c.items, c.samples, c.generated, c.cached) == (stored["items"], stored["samples"], stored["generated"],
                                                           stored["cached"])
    assert c["cached"] == stored["cached"] and c["by_status"] == stored["by_status"]
    assert c.as_dict() == stored and record.row()["counts"] == stored and record.as_dict()["counts"] == stored
    assert json.loads(json.dumps(record.as_dict()))["counts"] == stored
    assert RunRecord.from_row(record.row()) == record


def test_what_a_record_does_not_hold_is_none_typed_and_missing_by_name() -> None:
    c = RunRecord.from_row({**ROW, "counts": OLD}).counts
    assert c is not None and c.samples_from is None and c.reasoning is None and c.sandbox is None
    assert c.timing is None and (c.generate_s, c.new_completion_tokens) == (7.5, 120)
    with pytest.raises(KeyError):
        c["reasoning"]
    assert "sandbox" not in c.as_dict()
