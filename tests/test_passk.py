"""pass@k against hand-computed values (Chen et al. 2021, eq. 1: 1 - C(n-c, k) / C(n, k))."""

import pytest

from evalgate.errors import BadInput
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
