"""The demo's RLHF leg on the real model, at tiny size: ``demo.rlhf.prepare`` (the tiny reward model from the
session's cache, the proxy split, both proxy protocols written and frozen) and a real gate whose ``proxy_protocols``
are those, with SmolLM2-135M judging and the trained reward model scoring, through the hf backend.

The seed's checkpoint is the base model's weights under another identity (a config key added), so both write the
same completions and every judge prompt is the same in both orders: whatever SmolLM2 writes, a parsed item is then a
win in one order and a loss in the other (the verdicts offer no tie), preference 0.5 and a position flip, so the win
rate is 0.5 with the CI [0.5, 0.5] and the flip rate 1.0 by construction; and the reward model scores the two
checkpoints alike. The rewards themselves are checked against the head applied by hand to the base model's pooled
features (``demo.reward_model.features``), an independent path to the same number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalgate.demo import rlhf as demo_rlhf
from evalgate.demo.train import addition_items
from evalgate.gate import load_policy, run_gate
from evalgate.gate.report.outputs import markdown_summary, render_html
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO
from tests.gate.test_real import _variant
from tests.helpers.protocols import addition_scoring_truncated

pytestmark = pytest.mark.slow
ITEMS = 3


@pytest.mark.timeout(900)
def test_the_demos_rlhf_leg_judges_and_scores_the_seeds_best_against_the_base_model(
        home: Path, smollm2_gguf: Path, smollm2_dir: Path, tiny_rm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from safetensors.numpy import load_file

    from evalgate.demo.reward_model import features

    monkeypatch.setattr(demo_rlhf, "PROXY_ITEMS", ITEMS)
    write_split("addition-dev", "dev", addition_items("dev", 2), {"source": "test"})
    write_split("addition-private", "private", addition_items("private", 2), {"source": "test"})
    addition = addition_scoring_truncated(home)
    store = Store()
    freeze(addition, store)
    seed = _variant(smollm2_dir, home / "train" / "seed1" / "checkpoint-2", 2)
    (seed / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": [
        {"step": s, "loss": 1.0, "grad_norm": 1.0, "learning_rate": 1e-4} for s in (1, 2)]}))
    evaluate(addition, smollm2_gguf, "addition-dev", RunOptions(progress=False), store)
    evaluate(addition, seed, "addition-dev", RunOptions(train_seed=1, progress=False), store)

    proxies = demo_rlhf.prepare(home / "demo", addition, smollm2_gguf, store, dev_items=2)
    policy = yaml.safe_load((REPO / "gates" / "demo.yaml").read_text())
    policy.update(protocol_file=str(addition), rules={"min_seeds": 1, "training_guards": False,
                                                             "reward_hacking": False})
    (home / "gates").mkdir()
    path = home / "gates" / "demo.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    verdict = run_gate(load_policy(path, {"EVALGATE_DEMO_BASE": str(smollm2_gguf),
                                          "EVALGATE_DEMO_PROXIES": str(proxies)}), store)

    judge, rm = (p.as_dict() for p in verdict.proxies)  # the document every report format renders
    assert (judge["protocol"], judge["split"], rm["protocol"]) == ("addition-judge@1", "addition-proxy",
                                                                   "addition-rm@1")
    assert [(r["role"], r["train_seed"]) for r in judge["checkpoints"]] == [("baseline", None), ("seed", 1)]
    for row in judge["checkpoints"]:
        j, pw = row["judge"], row["judge"]["pairwise"]
        assert j["judged"] == pw["items"] == ITEMS and pw["parsed_items"] + pw["unparseable_items"] == ITEMS
        assert pw["parsed_items"] >= 1, j  # SmolLM2 writes [A] here (read off its output): parsed
        assert (pw["win_rate"], pw["low"], pw["high"], pw["position_flip_rate"]) == (0.5, 0.5, 0.5, 1.0)
    # the seed's judge prompts are the baseline's own (same texts in both places): all from the cache
    calls = [store.runs(run_id=r["run_id"])[0].metrics["judge"]["calls"] for r in judge["checkpoints"]]
    assert calls[0]["asked"] == ITEMS and (calls[1]["asked"], calls[1]["cached"]) == (0, ITEMS)

    base_rm, seed_rm = rm["checkpoints"]
    assert seed_rm["reward_mean"] == base_rm["reward_mean"] and seed_rm["mean_score"] == base_rm["mean_score"]
    shown = store.samples(base_rm["run_id"])
    items = {it["id"]: it for it in demo_rlhf.proxy_items(2)}
    w = load_file(str(tiny_rm / "model.safetensors"))["score.weight"][0].astype(np.float64)
    by_hand = features(smollm2_dir, [(items[s.item_id]["question"], s.text) for s in shown]) @ w
    assert base_rm["reward_mean"] == pytest.approx(float(np.mean(by_hand)), abs=1e-4)

    # no rule reads them; the report shows both as proxies
    assert not any("proxy" in r.rule or "judge" in r.rule for r in verdict.rules)
    assert "Proxy scores (informational" in render_html(verdict)
    assert "| addition-judge@1 (judge) | addition-proxy | seed 1 best (step 2) |" in markdown_summary(verdict)
    # the proxies read the dev split only: logged reads there (purpose gate-proxy, and the judge's rows); the private
    # split was read by the gate's two decision runs
    proxy_rows = store.access_rows("addition-proxy")
    assert {r.purpose for r in proxy_rows if r.outcome != "added"} == {"gate-proxy"}
    assert sum(r.outcome == "judge-read" for r in proxy_rows) == 2
    private = [r for r in store.access_rows("addition-private") if r.outcome == "read"]
    assert len(private) == 2 and {r.purpose for r in private} == {"release-gate"}
