"""``Metrics``: a run's metrics typed (``pass_at[k]``, ``mean_score``) and still read by name (issue 43)."""

from __future__ import annotations

import json

import pytest

from evalgate.core.results import Estimate, Metrics

# the metrics of a run of 4 items x 4 samples, as the store holds them (figures chosen by hand)
STORED = {"pass@1": 0.5, "pass@1_stderr": 0.2, "pass@4": 0.75, "pass@4_stderr": 0.25, "mean_score": 0.5,
          "mean_score_stderr": 0.2, "truncation_rate": 0.0, "judge": {"mode": "pointwise", "items": 4}}


def test_typed_reads() -> None:
    m = Metrics(STORED)
    assert m.pass_at == {1: Estimate(0.5, 0.2), 4: Estimate(0.75, 0.25)}
    assert m.pass_at[4].value == 0.75 and m.pass_at[4].stderr == 0.25
    assert m.mean_score == Estimate(0.5, 0.2)
    assert m.estimate("truncation_rate") == Estimate(0.0, None)
    with pytest.raises(KeyError):
        m.estimate("pass@2")
    assert Metrics({"pass@1": 1.0}).mean_score is None


def test_reads_by_name_as_the_dict_did() -> None:
    m = Metrics(STORED)
    assert m["pass@1"] == 0.5 and m.get("pass@8") is None and "judge" in m and len(m) == 8
    assert m == STORED and {**m} == STORED and dict(m) == STORED and list(m) == list(STORED)
    with pytest.raises(TypeError):
        m["pass@1"] = 1.0  # type: ignore[index]
    copy = m.as_dict()
    copy["pass@1"] = 0.0
    assert m["pass@1"] == 0.5


def test_a_run_record_holds_metrics_and_stores_plain_json() -> None:
    from evalgate.runner.record import CheckpointRef, ProtocolRef, RunRecord, SplitRef

    rec = RunRecord(run_id="r1", status="complete", protocol=ProtocolRef(name="p", version="1", sha256="h"),
                    checkpoint=CheckpointRef(path="/ck", digest="ck"), split=SplitRef(name="s", tier="dev", sha256="x"),
                    backend={"name": "hf"}, versions={}, effective_params={"seed": 0}, metrics=STORED)
    assert isinstance(rec.metrics, Metrics) and rec.metrics.pass_at[1] == Estimate(0.5, 0.2)
    doc, row = rec.as_dict(), rec.row()
    assert type(doc["metrics"]) is dict and doc["metrics"] == STORED
    assert type(row["metrics"]) is dict and json.loads(json.dumps(row["metrics"])) == STORED
    assert json.loads(rec.model_dump_json())["metrics"] == STORED
    again = RunRecord.from_row(row)
    assert again == rec and isinstance(again.metrics, Metrics)
    assert RunRecord.model_validate({**doc, "metrics": rec.metrics}).metrics == STORED  # a Metrics validates too
    with pytest.raises(ValueError, match="metrics"):
        RunRecord.model_validate({**doc, "metrics": [0.5]})
