"""Implicit (DPO) reward on preference pairs, the ``dpo_preference`` scorer (evalgate/rlhf/implicit_reward.py):
through ``evalgate run`` on the tiny checkpoint against a perturbed copy of it as the reference, and on the real
SmolLM2 against the tiny one, every reward recomputed by hand with bare transformers:
``beta * (sum log p_policy(answer tokens | prompt) - sum log p_reference(...))``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalgate.core.errors import BadInput
from evalgate.rlhf.implicit_reward import ImplicitRewardScorer, implicit_reward
from evalgate.rlhf.reward_options import ImplicitRewardOptions
from evalgate.scoring.base import SampleToScore
from tests.helpers.cli import cli

PAIRS = [{"id": "p1", "prompt": "What is 2+2?", "chosen": "2+2 is 4.", "rejected": "Bananas are purple on Mondays.",
          "category": "math-prm", "section": "Reasoning"},
         {"id": "p2", "prompt": "Say hello.", "chosen": "Hello! How can I help you today?", "rejected": "No.",
          "category": "alpacaeval-easy", "section": "Chat"},
         {"id": "p3", "prompt": "Name a colour.", "chosen": "Blue.", "rejected": "The the the the the.",
          "category": "alpacaeval-easy", "section": "Chat"}]
BETA = 0.1
_DETAIL = re.compile(r"log p policy (\S+) / (\S+), reference (\S+) / (\S+)\)")


def test_implicit_reward_and_margin_by_hand() -> None:
    # beta (log pi - log pi_ref): 0.1 * (-3 - -5) = 0.2 for chosen, 0.1 * (-4 - -3) = -0.1 for rejected
    assert implicit_reward(-3.0, -5.0, 0.1) == pytest.approx(0.2)
    opts = ImplicitRewardOptions(reference={"checkpoint": "x", "digest": "blake3:0"}, beta=0.1)
    assert opts.continuations(PAIRS[0]) == ["2+2 is 4.", "Bananas are purple on Mondays."]
    scorer = ImplicitRewardScorer(None, opts)
    scorer.plan, scorer._reference = object(), {"p1": (-5.0, -3.0), "p2": (-1.0, -1.0)}  # glue: no model
    samples = [SampleToScore(PAIRS[0], json.dumps({"logprobs": [-3.0, -4.0]}), "", "stop", ("p1", 0, 0)),
               SampleToScore(PAIRS[1], json.dumps({"logprobs": [-2.0, -2.0]}), "", "stop", ("p2", 0, 0))]
    first, tie = scorer.score(samples)
    assert (first.status, first.score) == ("correct", 1.0) and float(first.extracted) == pytest.approx(0.3)
    assert (tie.status, tie.score) == ("wrong", 0.0) and "a tie counts as wrong" in tie.detail
    with pytest.raises(BadInput, match="holds no log-likelihoods"):
        scorer.score([SampleToScore(PAIRS[0], "Sure!", "", "stop", ("p1", 0, 0))])
    with pytest.raises(BadInput, match="inside 'evalgate run'"):
        ImplicitRewardScorer(None, opts).score(samples)


def _by_hand(model_dir: Path, pairs: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per pair, the summed log-probabilities of the chosen and the rejected answer after the chat-templated prompt
    (SmolLM2's template, generation prompt on), with bare transformers; the answer's tokens are those of prompt +
    answer after the prompt's own tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    out = {}
    for p in pairs:
        context = tok.apply_chat_template([{"role": "user", "content": p["prompt"]}], tokenize=False,
                                          add_generation_prompt=True)
        ctx = tok(context, add_special_tokens=False).input_ids
        lls = []
        for answer in (p["chosen"], p["rejected"]):
            whole = tok(context + answer, add_special_tokens=False).input_ids
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), dim=-1)
            lls.append(sum(float(logp[i - 1, whole[i]]) for i in range(len(ctx), len(whole))))
        out[p["id"]] = (lls[0], lls[1])
    return out


def _perturbed(tiny: Path, dest: Path) -> Path:
    """A copy of the tiny checkpoint with every weight moved by seeded noise: another model, the same tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    shutil.copytree(tiny, dest)
    model = AutoModelForCausalLM.from_pretrained(str(tiny), dtype=torch.float32)
    torch.manual_seed(7)
    with torch.no_grad():
        for w in model.parameters():
            w.add_(0.5 * torch.randn_like(w))
    model.save_pretrained(str(dest), safe_serialization=True)
    return dest


def _run(home: Path, policy: Path, reference: Path, ok: bool = True) -> Any:
    from evalgate.checkpoints.resolve import resolve_checkpoint

    data = home / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    assert cli("splits", "add", "dpo-pairs", "--tier", "dev", "--file", data).exit_code == 0
    proto = home / "dpo.yaml"
    proto.write_text(f"""name: dpo-pairs
version: "1"
description: implicit DPO reward on preference pairs
prompt:
  template: "{{{{ prompt }}}}"
  chat_template: model
sampling:
  temperature: 0
  n: 1
  seed: 0
pass_at_k: [1]
scorer:
  name: dpo_preference
  options:
    reference:
      checkpoint: {reference}
      digest: {resolve_checkpoint(reference).digest}
    beta: {BETA}
""")
    assert cli("protocol", "freeze", proto).exit_code == 0
    r = cli("run", "--protocol", proto, "--checkpoint", policy, "--split", "dpo-pairs", "--backend", "hf", "--json")
    if not ok:
        return r
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    shown = json.loads(cli("samples", doc["run_id"], "--json").stdout)
    return doc, {s["item_id"]: s for s in shown["samples"]}


def _check(doc: dict[str, Any], samples: dict[str, dict[str, Any]], policy: Path, reference: Path) -> list[bool]:
    pol, ref = _by_hand(policy, PAIRS), _by_hand(reference, PAIRS)
    right = []
    for p in PAIRS:
        s = samples[p["id"]]
        got = [float(x) for x in _DETAIL.search(s["detail"]).groups()]
        # the run's log-likelihoods are bare transformers' (float32 on CPU: batching and padding differ)
        assert got == pytest.approx([pol[p["id"]][0], pol[p["id"]][1], ref[p["id"]][0], ref[p["id"]][1]],
                                    rel=1e-4, abs=1e-3)
        chosen = BETA * (pol[p["id"]][0] - ref[p["id"]][0])
        rejected = BETA * (pol[p["id"]][1] - ref[p["id"]][1])
        assert float(s["extracted"]) == pytest.approx(chosen - rejected, abs=1e-3)
        assert s["status"] == ("correct" if chosen > rejected else "wrong")
        right.append(chosen > rejected)
    metrics = doc["metrics"]
    assert metrics["preference_accuracy"] == pytest.approx(sum(right) / 3)
    return right


@pytest.mark.integration
def test_dpo_preference_on_the_tiny_checkpoint_by_hand(home: Path, tmp_path: Path, tiny_checkpoint: Path) -> None:
    reference = _perturbed(tiny_checkpoint, tmp_path / "reference")
    doc, samples = _run(home, tiny_checkpoint, reference)
    _check(doc, samples, tiny_checkpoint, reference)


@pytest.mark.slow
def test_dpo_preference_on_the_real_model(home: Path, smollm2_dir: Path, tiny_checkpoint: Path) -> None:
    """SmolLM2-135M-Instruct as the policy, the tiny random model (same tokenizer) as the reference. The policy
    alone prefers every chosen answer (higher log p); the implicit reward, a log-ratio against the reference, does
    not for pair 3: noise gives each token about the same low log p, so the longer nonsense "The the the the the."
    gains more from subtracting the reference than "Blue." does. That is the length effect of a DPO
    reward measured against a poor reference, and why the reference must be the DPO run's real starting point."""
    doc, samples = _run(home, smollm2_dir, tiny_checkpoint)
    right = _check(doc, samples, smollm2_dir, tiny_checkpoint)
    logps = {k: [float(x) for x in _DETAIL.search(s["detail"]).groups()] for k, s in samples.items()}
    assert all(lp[0] > lp[1] for lp in logps.values())  # the policy's own log p: chosen first everywhere
    assert right == [True, True, False] and doc["metrics"]["preference_accuracy"] == pytest.approx(2 / 3)
    p3 = logps["p3"]  # the reference's gap (-21.6 vs -63.7) outweighs the policy's (-9.8 vs -24.3)
    assert p3[2] - p3[3] > p3[0] - p3[1] > 0


@pytest.mark.integration
def test_a_reference_with_another_tokenizer_is_refused(home: Path, tmp_path: Path, tiny_checkpoint: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tiny_checkpoint, other)
    vocab = json.loads((other / "tokenizer.json").read_text())
    first = next(iter(vocab["model"]["vocab"]))
    vocab["model"]["vocab"]["zz-not-in-smollm"] = vocab["model"]["vocab"].pop(first)
    (other / "tokenizer.json").write_text(json.dumps(vocab))
    r = _run(home, tiny_checkpoint, other, ok=False)
    assert r.exit_code == 2 and "does not share the policy's tokenizer" in r.output
