"""One way of writing numbers for people (evalgate.core.formatting), and no command printing a float raw."""

from __future__ import annotations

import re

import pytest

from evalgate.core.formatting import num, pct, pm, table
from tests.conftest import REPO


def test_num_pm_pct() -> None:
    assert num(1 / 12) == "0.083" and num(2 / 3) == "0.667" and num(0.5, 1) == "0.5"
    assert num(float("nan")) == "n/a" and num(float("-inf")) == "n/a"
    assert num(None) == "-" and num(None, missing="") == "" and num(40) == "40" and num("x") == "x"
    # 1 of 12 correct: stderr of the mean of 12 Bernoulli outcomes = sqrt(1/12 * 11/12 / 11) = 0.0833
    assert pm(1 / 12, (1 / 12 * 11 / 12 / 11) ** 0.5) == "0.083 ± 0.083"
    assert pm(0.25, None) == "0.250" and pm(0.25, float("nan")) == "0.250" and pm(None, 0.1) == "-"
    assert pct(1 / 12) == "8.3%" and pct(0.5, 0) == "50%" and pct(None) == "-" and pct(float("nan")) == "n/a"


def test_table_aligns_columns() -> None:
    out = table(["run", "pass@1", "n"], [["a", "0.500", 4], ["longer", "0.25", 40]], right=[1, 2])
    assert out.splitlines() == ["run     pass@1   n",
                                "------  ------  --",
                                "a        0.500   4",
                                "longer    0.25  40"]
    with pytest.raises(ValueError, match="2 cells, the header 3"):
        table(["a", "b", "c"], [[1, 2]])


def test_no_command_formats_a_metric_by_hand() -> None:
    # the kind of fault behind `watch` printing 0.08333333333333333: a float put into a printed line without going
    # through evalgate.core.formatting. The command modules format numbers only there (durations, :.1f s, excepted).
    root = REPO / "evalgate" / "commands"
    hand = re.compile(r"\{[^{}]*:\.[0-9][fg%]\}")
    offenders = [f"{p.name}:{i}: {line.strip()}" for p in sorted(root.glob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if hand.search(line) and "_s'" not in line and "seconds" not in line and "mcnemar_p" not in line]
    assert offenders == []
