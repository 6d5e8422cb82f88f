"""The ``generate`` bar moves during an hf batch (issue 32: a new user's 32-sample smoke run showed 0/32 for 13
minutes, since the count moved only when a whole ``generate()`` batch returned), with real decoding (the tiny random
checkpoint) through ``evaluate``, as a CI log shows it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalgate.core import progress
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO


def test_the_generate_bar_shows_the_batch_before_it_returns(home: Path, tiny_checkpoint: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from evalgate.backends import hf  # torch comes with it: imported when this test runs, not at collection

    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)  # a line per report (stderr is no terminal here)
    monkeypatch.setattr(hf, "REPORT_INTERVAL_S", 0.0)
    items = [{"id": f"a{i}", "question": f"What is {10 + i} + {20 + i}?", "answer": str(30 + 2 * i)}
             for i in range(4)]
    write_split("add-four", "smoke", items, {"source": "test"})
    run = evaluate(REPO / "protocols" / "addition.yaml", tiny_checkpoint, "add-four", RunOptions(), Store())
    assert run["counts"]["generated"] == 4
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("generate:")]
    counts = [tuple(map(int, m.groups())) for ln in lines if (m := re.search(r" (\d+)/(\d+) \[", ln))]
    assert counts and all(total == 4 and 0 <= done <= 4 for done, total in counts)  # never past the samples
    assert [c[0] for c in counts] == sorted(c[0] for c in counts) and counts[-1] == (4, 4)
    during = [ln for ln in lines if "batch 1/1 at token" in ln and " 4/4 " not in ln]
    assert during, lines  # the bar moved while the one batch was decoding: the token it is at, out of 12
    tokens = [int(re.search(r"at token (\d+)/12", ln).group(1)) for ln in during]  # type: ignore[union-attr]
    assert tokens[0] == 1 and tokens == sorted(tokens)
