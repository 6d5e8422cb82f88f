"""Bradley-Terry ratings of three checkpoints judged by the real SmolLM2-135M-Instruct (issue 46), through the gate's
proxy section (``gate.proxies.proxy_section``: each checkpoint evaluated under the demo's pairwise judge protocol on
a dev split, the judge's baseline first) and the report's Markdown.

The checkpoints: the base model (the judge's baseline), the base model's weights under another identity (it writes
the baseline's completions, so every judge prompt is the same in both orders and SmolLM2's verdict names one position
whatever stands there: each parsed item a win one way and a loss the other, preference 0.5, rating 1000 by
construction), and the tiny random checkpoint (noise in place of answers). Each rating is checked against the
judge's own verdicts: with every checkpoint judged against one baseline, the maximum-likelihood rating puts the fitted
win rate at the checkpoint's observed share of its games, which ``rlhf.pairwise.win_rate`` computes on its own path.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.demo import rlhf as demo_rlhf
from evalgate.demo.train import addition_items
from evalgate.gate.policy import GatePolicy
from evalgate.gate.proxies import Target, check_proxies, proxy_section
from evalgate.gate.report.outputs import _proxy_lines
from evalgate.protocol.freeze import freeze
from evalgate.splits import SplitManager, write_split
from evalgate.store import Store
from tests.gate.test_real import _variant
from tests.helpers.protocols import addition_scoring_truncated

pytestmark = pytest.mark.slow
ITEMS = 3


@pytest.mark.timeout(900)
def test_three_checkpoints_judged_by_smollm2_get_ratings_that_match_their_win_rates(
        home: Path, smollm2_gguf: Path, smollm2_dir: Path, tiny_checkpoint: Path) -> None:
    store = Store()
    base = resolve_checkpoint(smollm2_gguf, recorded=store.recorded_checkpoint)
    write_split(demo_rlhf.PROXY_SPLIT, "dev", demo_rlhf.proxy_items(ITEMS)[:ITEMS], {"source": "test"})
    write_split("addition-dev", "dev", addition_items("dev", 2), {"source": "test"})
    addition = addition_scoring_truncated(home)
    judge = home / "protocols" / "addition-judge.yaml"
    judge.write_text(yaml.safe_dump(demo_rlhf.judge_protocol(addition, smollm2_gguf.resolve(), base.digest,
                                                             base.digest), sort_keys=False))
    freeze(judge, store)
    twin = resolve_checkpoint(_variant(smollm2_dir, home / "train" / "seed1" / "checkpoint-2", 1))
    noise = resolve_checkpoint(tiny_checkpoint)
    policy = GatePolicy.model_validate({
        "name": "bt", "protocol": "addition@1", "protocol_file": str(addition), "selection_split": "addition-dev",
        "decision_split": "addition-dev", "baseline": {"checkpoint": str(smollm2_gguf)},
        "proxy_protocols": [{"protocol": "addition-judge@1", "protocol_file": str(judge),
                             "split": demo_rlhf.PROXY_SPLIT}]})
    manager = SplitManager(store)
    targets = [Target("baseline", str(smollm2_gguf), base.digest),
               Target("seed", str(twin.path), twin.digest, "run", 1, 2),
               Target("seed", str(noise.path), noise.digest, "run", 2, 4)]
    (entry,) = proxy_section(policy, check_proxies(policy, manager), targets, store, manager, "test", evaluate=True)
    proxy = entry.as_dict()  # the document the reports render

    bt = proxy["bradley_terry"]
    assert bt["anchor"] == "baseline" and bt["games"] == 2 * 2 * ITEMS  # two seeds, both orders of each item
    by = {p["player"]: p for p in bt["players"]}
    assert set(by) == {"baseline", "seed 1 best (step 2)", "seed 2 best (step 4)"}
    assert (by["baseline"]["rating"], by["baseline"]["low"], by["baseline"]["high"]) == (1000.0, 1000.0, 1000.0)
    for row in proxy["checkpoints"][1:]:
        pw = row["judge"]["pairwise"]
        p = by[f"seed {row['train_seed']} best (step {row['step']})"]
        w = pw["win_rate"]
        assert p["games"] == 2 * pw["items"] and p["win_rate_vs_anchor"] == pytest.approx(w, abs=1e-9)
        if 0 < w < 1:
            assert p["rating"] == pytest.approx(1000 + 400 * math.log10(w / (1 - w)), abs=1e-6)
        else:  # every game won (lost): no finite rating
            assert p["rating"] is None and p["bound"] == ("above" if w == 1 else "below")
    twin_pw = proxy["checkpoints"][1]["judge"]["pairwise"]
    assert twin_pw["parsed_items"] == ITEMS and twin_pw["win_rate"] == 0.5  # SmolLM2 names a position: 0.5 each
    assert by["seed 1 best (step 2)"]["rating"] == pytest.approx(1000.0, abs=1e-6)
    md = "\n".join(_proxy_lines([proxy]))
    assert "addition-judge@1: Bradley-Terry ratings (Elo-like scale, baseline = 1000;" in md
    assert "| seed 1 best (step 2) | 1000.0 [" in md
