"""Metrics defined once (evalgate.scoring.metrics): values computed by hand."""

from __future__ import annotations

import math

import pytest

from evalgate.core.errors import BadInput
from evalgate.scoring import metrics


def _item(pattern: str) -> list[dict]:
    return [{"status": "correct" if ch == "c" else "wrong", "score": 1.0 if ch == "c" else 0.0} for ch in pattern]


def test_pass_at_2_per_item_and_aggregate_by_hand() -> None:
    per_item = {"A": _item("ccww"), "B": _item("cw")}
    # A: 1 - C(2,2)/C(4,2) = 1 - 1/6; B: 1 - C(1,2)/C(2,2) = 1 (fewer wrong than k)
    assert metrics.item_values(per_item, "pass@2") == pytest.approx({"A": 5 / 6, "B": 1.0})
    mean, se = metrics.aggregate(per_item, "pass@2")
    assert mean == pytest.approx(11 / 12)
    assert se == pytest.approx(1 / 12)  # two values: sd = |a-b|/sqrt(2), se = sd/sqrt(2) = |a-b|/2


def test_mean_score_and_greedy_reports_pass_at_1_only() -> None:
    per_item = {"A": _item("cw"), "B": _item("ww")}
    out = metrics.run_metrics(per_item, [1, 2], greedy=True)
    assert set(out) == {"pass@1", "pass@1_stderr", "mean_score", "mean_score_stderr"}
    assert out["mean_score"] == pytest.approx(0.25)
    sampled = metrics.run_metrics(per_item, [1, 2], greedy=False)
    assert sampled["pass@2"] == pytest.approx(0.5)  # A: 1 - C(1,2)/C(2,2) = 1, B: 0


def test_unknown_metric_and_too_few_samples_are_refused() -> None:
    with pytest.raises(BadInput, match="unknown metric"):
        metrics.get_metric("pass@0")
    with pytest.raises(BadInput, match="unknown metric"):
        metrics.get_metric("accuracy")
    with pytest.raises(BadInput, match="k=3"):
        metrics.item_values({"A": _item("cw")}, "pass@3")
    assert metrics.pass_at_k_of("pass@16") == 16 and metrics.pass_at_k_of("mean_score") is None
    assert not math.isnan(metrics.aggregate({"A": _item("c")}, "pass@1")[0])
