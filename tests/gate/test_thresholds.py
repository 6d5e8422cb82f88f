"""Thresholds that make no sense are refused at load, naming the file, the field and the allowed range (exit 2):
NaN or infinity anywhere in a user-written file (YAML's ``.nan``/``.inf``), and a gate threshold outside the range a
rate metric allows. Session 16's adversary found a suite target with a negative ``min_improvement`` accepted; the
suite's own cases are in test_suite.py (``test_a_bad_suite_is_one_clear_error_before_anything_is_read``), these are
its neighbours: the single gate, the training-log guards, a protocol's sampling, a split's access policy.

The ranges by hand: pass@k is a share in [0, 1] per item, so candidate - baseline lies in [-1, 1]; a lower CI end
>= -1 holds for every candidate (min_improvement -1 passes anything) and >= 1.5 for none."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.core.errors import BadInput
from evalgate.gate.policy import load_policy
from evalgate.protocol.spec import load_protocol
from evalgate.scoring import metrics

GATE = """name: g
protocol: addition@1
selection_split: a-dev
decision_split: a-private
metric: {metric}
baseline:
  value: 0.5
rules:
  confidence: 0.95
  min_improvement: {value}
"""


@pytest.mark.parametrize(("metric", "value", "message"), [
    ("pass@1", "-1.0", "g.yaml:10: rules.min_improvement: -1.0 is outside (-1, 1]"),
    ("pass@1", "-3", "g.yaml:10: rules.min_improvement: -3.0 is outside (-1, 1]"),
    ("pass@4", "1.5", "g.yaml:10: rules.min_improvement: 1.5 is outside (-1, 1]"),
    ("ifeval_prompt_strict", "2", "rules.min_improvement: 2.0 is outside (-1, 1]"),
    ("pass@1", ".nan", "g.yaml:10: rules.min_improvement: Input should be a finite number"),
    ("mean_score", "-.inf", "g.yaml:10: rules.min_improvement: Input should be a finite number"),
])
def test_a_single_gate_threshold_outside_its_range_is_refused_with_file_line_and_range(
        tmp_path: Path, metric: str, value: str, message: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(GATE.format(metric=metric, value=value))
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace("[", r"\[").replace("]", r"\]")) as e:
        load_policy(path)
    assert e.value.exit_code == 2


@pytest.mark.parametrize(("metric", "value"), [
    ("pass@1", "-0.05"),  # the shipped XSTest gates' non-inferiority margin
    ("pass@1", "1"), ("pass@1", "0"), ("pass@1", "-0.999"),
    ("mean_score", "3.5"),  # a reward model's mean score has the scorer's range, not [0, 1]
    ("mean_score", "-2"),
])
def test_a_threshold_inside_the_range_loads(tmp_path: Path, metric: str, value: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(GATE.format(metric=metric, value=value))
    assert load_policy(path).rules.min_improvement == float(value)


def test_the_rate_metrics_are_the_shares() -> None:
    assert [metrics.is_rate(m) for m in ("pass@1", "pass@10", "ifeval_prompt_loose", "mean_score", "nope@1")] == [
        True, True, True, False, False]


@pytest.mark.parametrize(("section", "message"), [
    ("selection:\n  collapse_drop: .nan\n", "g.yaml:12: selection.collapse_drop: Input should be a finite number"),
    ("guards:\n  kl_target: .inf\n", "g.yaml:12: guards.kl_target: Input should be a finite number"),
    ("reward_audit:\n  length_ratio: .nan\n", "g.yaml:12: reward_audit.length_ratio: Input should be a finite"),
    ("baseline2: 1\n", "baseline2"),  # (the file is checked as a whole: an unknown key is still named)
])
def test_nan_or_infinity_in_any_section_of_a_gate_is_refused(tmp_path: Path, section: str, message: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(GATE.format(metric="pass@1", value="0.0") + section)
    with pytest.raises(BadInput, match=message):
        load_policy(path)


def test_nan_in_a_protocol_is_refused_at_load(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "protocols" / "addition.yaml").read_text()
    path = tmp_path / "addition.yaml"
    path.write_text(text.replace("temperature: 0.0", "temperature: .nan"))
    with pytest.raises(BadInput, match=r"addition.yaml:\d+: sampling.temperature: Input should be a finite number"):
        load_protocol(path)


def test_nan_in_a_split_policy_is_refused(tmp_path: Path) -> None:
    from evalgate.splits.manifest import Policy

    with pytest.raises(ValueError, match="finite number"):
        Policy.model_validate({"max_reads": 4, "warn_at": float("nan")})
