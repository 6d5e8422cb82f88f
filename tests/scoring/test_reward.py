"""Reward-model scorers without a model: options in the protocol hash, the reward cache in a real DuckDB store,
the run metrics of reward and preference scoring against hand-computed values (and scipy's bootstrap)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evalgate.core.errors import BadInput
from evalgate.protocol.spec import load_protocol
from evalgate.rlhf.preference import accuracy_ci, preference_metrics
from evalgate.rlhf.reward import cached_rewards, reward_key, reward_metrics, sigmoid
from evalgate.rlhf.reward_options import PreferenceOptions
from evalgate.scoring.base import SCORERS
from evalgate.store import Store

RM_PROTOCOL = """\
name: rm-scored
version: "1"
prompt:
  template: "{{{{ question }}}}"
scorer:
  name: reward_model
  options:
    reward_model: {{checkpoint: /models/rm, digest: "{digest}"}}
    prompt_field: question
"""
PREF_PROTOCOL = """\
name: rm-pref
version: "1"
prompt:
  template: "{{ prompt }}"
sampling: {n: 2, temperature: 1.0}
pass_at_k: [1]
scorer:
  name: reward_preference
"""


def test_the_reward_models_digest_is_in_the_protocol_hash(tmp_path: Path) -> None:
    hashes = []
    for i, digest in enumerate(("blake3:" + "a" * 64, "blake3:" + "b" * 64)):
        p = tmp_path / f"p{i}.yaml"
        p.write_text(RM_PROTOCOL.format(digest=digest))
        loaded = load_protocol(p)
        assert loaded.scorer_options.reward_model.digest == digest
        hashes.append(loaded.sha256)
    assert hashes[0] != hashes[1]


def test_protocol_refuses_a_reward_model_without_digest_and_a_sampled_preference_run(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(RM_PROTOCOL.format(digest="x").replace('digest: "x"', "engine: hf"))
    with pytest.raises(BadInput, match="digest"):
        load_protocol(p)
    p.write_text(PREF_PROTOCOL)
    with pytest.raises(BadInput, match=r"sampling.n: the reward_preference scorer generates nothing"):
        load_protocol(p)


def test_registry_capabilities() -> None:
    assert SCORERS["reward_preference"].generates is False and not SCORERS["reward_preference"].proxy
    rm = SCORERS["reward_model"]
    assert rm.pass_at_k is False and rm.generates and rm.proxy
    assert "scored" in SCORERS["reward_model"].statuses


def test_sigmoid_by_hand() -> None:
    assert sigmoid(0.0) == 0.5
    assert sigmoid(math.log(3)) == pytest.approx(0.75)  # 1 / (1 + 1/3)
    assert sigmoid(-1000.0) == 0.0 and sigmoid(1000.0) == 1.0  # no OverflowError


def test_reward_key_is_the_sha256_of_the_conversation_shown() -> None:
    """Keyed by what the RM is shown (rm_engine.conversation), after a prefix: never a key of before, the sha256 of
    the JSON [prompt, completion], under which a reward computed before commit c04436f changed the rendering (special
    tokens in a completion made literal) was reused."""
    assert reward_key("a\n\nb") == hashlib.sha256(b"evalgate reward conversation\x00a\n\nb").hexdigest()
    assert reward_key("a\n\nb") != hashlib.sha256(b'["a", "b"]').hexdigest()
    assert reward_key("ab") != reward_key("a\n\nb")


class _CountingRM:  # glue: stands for the model; the real one is tested in test_reward_real.py
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def rewards(self, pairs):
        self.seen += list(pairs)
        return [float(len(c)) if c != "long" else "too long" for _, c in pairs]


def _plain(p: str, c: str) -> str:  # glue: a conversation as an RM without a chat template is shown it
    return f"{p}\n\n{c}"


def test_reward_cache_in_a_real_store_scores_each_conversation_once(home: Path) -> None:
    store, rm = Store(), _CountingRM()
    first = cached_rewards(lambda: _plain, lambda: rm, "blake3:rm1", "hf", store, [("q", "ab"), ("q", "abc"),
                                                                                   ("q", "long")])
    assert first == [2.0, 3.0, "too long"]
    second = cached_rewards(lambda: _plain, lambda: rm, "blake3:rm1", "hf", store,
                            [("q", "abc"), ("q", "long"), ("q", "x"), ("q", "x")])
    assert second == [3.0, "too long", 1.0, 1.0]
    # only pairs never stored reach the model (the too-long one again, and the new one once)
    assert rm.seen == [("q", "ab"), ("q", "abc"), ("q", "long"), ("q", "long"), ("q", "x")]
    # another reward model (digest), or another engine, shares nothing
    key = reward_key("q\n\nab")
    assert store.cached_rewards("blake3:rm2", "hf", [key]) == {}
    assert store.cached_rewards("blake3:rm1", "vllm", [key]) == {}
    assert store.cached_rewards("blake3:rm1", "hf", [key]) == {key: 2.0}

    def no_model():
        raise AssertionError("a fully cached call must not load the model")

    assert cached_rewards(lambda: _plain, no_model, "blake3:rm1", "hf", store, [("q", "ab")]) == [2.0]
    # the same pair shown otherwise (a new rendering) is scored again; another pair shown the same text is not
    assert cached_rewards(lambda: lambda p, c: f"<user>{p}</user>{c}", lambda: rm, "blake3:rm1", "hf", store,
                          [("q", "ab")]) == [2.0] and rm.seen[-1] == ("q", "ab") and len(rm.seen) == 6
    assert cached_rewards(lambda: _plain, lambda: rm, "blake3:rm1", "hf", store, [("q", "a\n\nb")]) == [4.0]
    assert cached_rewards(lambda: _plain, no_model, "blake3:rm1", "hf", store, [("q\n\na", "b")]) == [4.0]


def test_reward_metrics_by_hand() -> None:
    per_item = {"a": [{"status": "scored", "extracted": "1.0"}, {"status": "scored", "extracted": "3.0"}],
                "b": [{"status": "scored", "extracted": "-1.0"}, {"status": "error", "extracted": None}]}
    m = reward_metrics(per_item, {}, None)
    # item means 2.0 and -1.0: mean 0.5, stderr sd([2, -1]) / sqrt(2) = (3 / sqrt(2)) / sqrt(2) = 1.5
    assert m == {"reward_mean": 0.5, "reward_mean_stderr": pytest.approx(1.5), "reward_errors": 1}


def _pair(iid: str, cat: str, chosen: str, rejected: str, score: float, status: str | None = None):
    return iid, {"id": iid, "category": cat, "chosen": chosen, "rejected": rejected}, [
        {"score": score, "status": status or ("correct" if score else "wrong")}]


def test_preference_metrics_by_hand() -> None:
    rows = [_pair("1", "chat", "ok", "a longer answer", 1.0),   # chosen shorter, right
            _pair("2", "chat", "a much longer answer", "no", 1.0),  # chosen longer, right
            _pair("3", "math", "x", "yyyy", 0.0),              # chosen shorter, wrong
            _pair("4", "math", "same", "size", 0.0),           # equal length, wrong (a tie, say)
            _pair("5", "math", "longer one", "short", 1.0),    # chosen longer, right
            _pair("6", "math", "p", "q", 0.0, "error")]        # beyond the context: left out, counted
    items = {iid: it for iid, it, _ in rows}
    per_item = {iid: ss for iid, _, ss in rows}
    m = preference_metrics(per_item, items, PreferenceOptions(), SimpleNamespace(tier="dev"))
    assert m["preference_pairs"] == 5 and m["preference_errors"] == 1
    assert m["preference_accuracy"] == pytest.approx(3 / 5)
    assert m["preference_by_category"]["chat"]["accuracy"] == 1.0
    assert m["preference_by_category"]["math"]["accuracy"] == pytest.approx(1 / 3)
    lb = m["length_bias"]
    assert (lb["chosen_shorter"]["n"], lb["chosen_shorter"]["accuracy"]) == (2, 0.5)
    assert (lb["chosen_longer"]["n"], lb["chosen_longer"]["accuracy"]) == (2, 1.0)
    assert lb["equal_length"] == 1 and lb["gap"] == 0.5
    # every resample of an all-correct group has mean 1: the percentile CI is exactly [1, 1]
    assert (m["preference_by_category"]["chat"]["low"], m["preference_by_category"]["chat"]["high"]) == (1.0, 1.0)
    assert m["preference_categories_withheld"] == {"categories": 0, "pairs": 0}


@pytest.mark.parametrize("scorer", [SimpleNamespace(tier="private"), SimpleNamespace(tier="human-audit"), None])
def test_a_sealed_splits_metrics_name_no_category_of_fewer_than_ten_pairs(scorer: object) -> None:
    """Adversary (second pass): preference_by_category put every category value in clear in the run metrics, also
    for a private split, and a category that one pair holds (its own question, say) is that pair's text and
    outcome. On a sealed tier (or an unknown one) a category under 10 pairs is neither named nor scored, a length
    group under 10 pairs keeps only its count; the pairs still count in the overall accuracy."""
    secret = "What is the launch code of reactor 7?"
    rows = [_pair(f"c{i}", "common", "a longer chosen answer", "short", float(i % 4 != 0)) for i in range(12)]
    rows += [_pair("s", secret, "x", "yy", 1.0), *(_pair(f"t{i}", "tools", "b", "cc", 0.0) for i in range(3))]
    items = {iid: it for iid, it, _ in rows}
    m = preference_metrics({iid: ss for iid, _, ss in rows}, items, PreferenceOptions(), scorer)
    # 12 "common" pairs, 9 right (i = 0, 4, 8 wrong); the 4 others (1 right) only in the overall accuracy
    assert list(m["preference_by_category"]) == ["common"]
    assert m["preference_by_category"]["common"]["accuracy"] == pytest.approx(9 / 12)
    assert m["preference_categories_withheld"] == {"categories": 2, "pairs": 4}
    assert m["preference_pairs"] == 16 and m["preference_accuracy"] == pytest.approx(10 / 16)
    lb = m["length_bias"]  # chosen longer: the 12 common pairs; chosen shorter: the other 4, withheld
    assert (lb["chosen_longer"]["n"], lb["chosen_longer"]["accuracy"]) == (12, pytest.approx(9 / 12))
    assert lb["chosen_shorter"] == {"n": 4, "accuracy": None, "low": None, "high": None} and lb["gap"] is None
    assert secret not in json.dumps(m) and "tools" not in json.dumps(m)


def test_accuracy_ci_agrees_with_scipys_percentile_bootstrap() -> None:
    from scipy import stats

    outcomes = [1.0] * 14 + [0.0] * 6
    ours = accuracy_ci(outcomes)
    ref = stats.bootstrap((np.array(outcomes),), np.mean, n_resamples=10_000, method="percentile",
                          random_state=np.random.default_rng(1)).confidence_interval
    assert ours["accuracy"] == 0.7
    assert ours["low"] == pytest.approx(ref.low, abs=0.03) and ours["high"] == pytest.approx(ref.high, abs=0.03)
    assert accuracy_ci([]) == {"n": 0, "accuracy": None, "low": None, "high": None}


@pytest.mark.parametrize("tier", ["private", "human-audit"])
def test_a_sealed_runs_rewards_are_keyed_by_the_keyed_hmac_not_a_bare_sha256(home: Path, tier: str) -> None:
    """Adversary, third pass: the reward cache's key was the bare sha256 of the conversation the RM is shown, on every
    tier; a preference pair's conversation is its item's text (prompt and chosen or rejected answer), so the sha256
    of a guessed private pair, looked up in reward_scores, confirmed it without the key (a judge call's key was
    made a keyed HMAC for the same reason, 4e2102d). Both scorers' ``begin`` now take the run's tier's key
    function: the HMAC a sealed run's prompts get, of the same prefixed text; an open tier keeps reward_key. A
    rerun on the sealed tier still hits its cache."""
    import hashlib
    import hmac
    from types import SimpleNamespace

    from evalgate.keys.sealing import sealer
    from evalgate.rlhf.reward import PreferenceScorer, RewardModelScorer
    from evalgate.splits import write_split

    write_split("sealed-pairs", tier, [{"id": "q1", "prompt": "q", "chosen": "a", "rejected": "b"}],
                {"source": "test"})  # makes the private key
    store = Store()
    plan = SimpleNamespace(store=store, checkpoint=None, manifest=SimpleNamespace(tier=tier))
    guess = "secret prompt\n\nsecret answer"
    by_hand = hmac.new(sealer()._digest_key, b"evalgate reward conversation\x00" + guess.encode(),
                       hashlib.sha256).hexdigest()
    for cls in (RewardModelScorer, PreferenceScorer):
        scorer = cls.__new__(cls)
        cls.begin(scorer, plan, [])
        assert scorer.key(guess) == by_hand != reward_key(guess)
    rm = _CountingRM()
    got = cached_rewards(lambda: _plain, lambda: rm, "blake3:rm1", "hf", store, [("secret prompt", "secret answer")],
                         scorer.key)
    assert got == [13.0]
    assert store.cached_rewards("blake3:rm1", "hf", [reward_key(guess)]) == {}  # the guess confirms nothing
    assert cached_rewards(lambda: _plain, lambda: rm, "blake3:rm1", "hf", store,
                          [("secret prompt", "secret answer")], scorer.key) == [13.0] and len(rm.seen) == 1
    open_plan = SimpleNamespace(store=store, checkpoint=None, manifest=SimpleNamespace(tier="dev"))
    scorer = RewardModelScorer.__new__(RewardModelScorer)
    RewardModelScorer.begin(scorer, open_plan, [])
    assert scorer.key(guess) == reward_key(guess)
