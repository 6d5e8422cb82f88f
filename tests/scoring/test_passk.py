"""pass@k against hand-computed values (Chen et al. 2021, eq. 1: 1 - C(n-c, k) / C(n, k))."""

import pytest

from evalgate.core.errors import BadInput
from evalgate.scoring import mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 3, 5, 1 - 21 / 252),  # C(7,5)=21, C(10,5)=252 -> 0.916667
        (10, 3, 1, 0.3),  # pass@1 is c/n
        (5, 0, 3, 0.0),  # no correct sample
        (5, 5, 1, 1.0),
        (4, 1, 2, 1 - 3 / 6),  # C(3,2)=3, C(4,2)=6
        (10, 8, 3, 1.0),  # n - c = 2 < k: every draw of 3 holds a correct one
        (20, 1, 10, 0.5),  # C(19,10)/C(20,10) = 10/20
    ],
)
def test_pass_at_k_hand_computed(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_issue_value() -> None:
    assert round(pass_at_k(10, 3, 5), 6) == 0.916667


def test_k_greater_than_n_is_refused_not_one() -> None:
    with pytest.raises(BadInput, match="pass@5 needs at least k=5 samples"):
        pass_at_k(3, 1, 5)
    with pytest.raises(BadInput):
        pass_at_k(3, 3, 4)  # a naive "n - c < k -> 1.0" would return 1.0 here


def test_mean_over_problems_each_with_own_n() -> None:
    # problem A: n=4, c=2, pass@2 = 1 - C(2,2)/C(4,2) = 1 - 1/6; problem B: n=2, c=0 -> 0
    assert mean_pass_at_k([(4, 2), (2, 0)], 2) == pytest.approx((1 - 1 / 6) / 2)


def _protocol(tmp_path, sampling: dict, pass_at_k: list[int]):
    import yaml

    from evalgate.protocol.spec import load_protocol

    doc = {"name": "t", "version": "1", "prompt": {"template": "{{ prompt }}", "chat_template": "none"},
           "sampling": sampling, "pass_at_k": pass_at_k, "scorer": {"name": "humaneval"}}
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(doc))
    return load_protocol(p)


def _samples(statuses: str) -> list[dict]:
    """'cw' -> a correct and a wrong sample, with the behaviour fields compute_metrics aggregates."""
    beh = {"completion_tokens": 1, "truncated": False, "repetition": 0.0, "empty": False}
    return [{"status": "correct" if ch == "c" else "wrong", "score": float(ch == "c"), "behavior": beh}
            for ch in statuses]


def test_run_metrics_average_per_problem_values_each_with_own_n(tmp_path) -> None:
    from evalgate.runner.evaluate import compute_metrics

    proto = _protocol(tmp_path, {"temperature": 0.8, "n": 4}, [1, 2])
    # problem A: n=4, c=2 -> pass@1 = 1/2, pass@2 = 1 - C(2,2)/C(4,2) = 5/6
    # problem B: n=2, c=1 (two samples lost) -> pass@1 = 1/2, pass@2 = 1 - C(1,2)/C(2,2) = 1
    # pooling the samples instead would give pass@1 = 3/6 and pass@2 = 1 - C(3,2)/C(6,2) = 0.8
    m = compute_metrics(proto, {"A": _samples("ccww"), "B": _samples("cw")})
    assert m["pass@1"] == pytest.approx(0.5)
    assert m["pass@2"] == pytest.approx((5 / 6 + 1) / 2)


def test_greedy_single_sample_protocol_reports_pass_at_1_only(tmp_path) -> None:
    from evalgate.runner.evaluate import compute_metrics

    with pytest.raises(BadInput, match="pass_at_k"):  # greedy n=1 cannot ask for pass@2
        _protocol(tmp_path, {"temperature": 0.0, "n": 1}, [1, 2])
    single = compute_metrics(_protocol(tmp_path, {"temperature": 0.0, "n": 1}, [1]),
                             {"A": _samples("c"), "B": _samples("w")})
    assert sorted(k for k in single if k.startswith("pass@")) == ["pass@1", "pass@1_stderr"]
    assert single["pass@1"] == 0.5
    # n copies of one greedy decode (allow_greedy_n) still report pass@1 only: pass@3 would be pass@1 renamed
    copies = _protocol(tmp_path, {"temperature": 0.0, "n": 3, "allow_greedy_n": True}, [1, 3])
    m = compute_metrics(copies, {"A": _samples("ccc"), "B": _samples("www")})
    assert sorted(k for k in m if k.startswith("pass@")) == ["pass@1", "pass@1_stderr"]
    assert m["pass@1"] == 0.5
