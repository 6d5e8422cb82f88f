"""Reward models as frozen scorers: ``reward_model`` scores each completion, ``reward_preference`` evaluates a reward
model itself on (prompt, chosen, rejected) pairs.

A reward model (RM) is a sequence-classification checkpoint with one output (``num_labels: 1``,
``transformers.AutoModelForSequenceClassification``): the logit at the conversation's last non-padding token is the
reward, the Bradley-Terry reward of InstructGPT (Ouyang et al. 2022, sec. 3.5) and of RewardBench (Lambert et al.
2024). The conversation, user turn = the item's prompt field, assistant turn = the completion, goes through the RM's
own chat template where its tokenizer has one, else it is ``prompt + "\\n\\n" + completion``.

``reward_model`` pins the RM by its digest in the protocol's ``scorer.options`` (so the protocol's hash changes with
the RM) and keeps every reward in the store, keyed by (RM digest, engine, sha256 of the conversation the RM is
shown, ``rm_engine.conversation``): a rerun, or another run whose completions repeat, scores nothing twice, and a
change in how a conversation is rendered (evalgate's, or transformers' chat templating) scores it again. A sample's
score is ``sigmoid(reward)``, the Bradley-Terry probability that the completion is preferred over one of reward 0;
it orders samples as the reward does. ``reward_preference`` uses the run's checkpoint as the RM and generates
nothing: a pair is ``correct`` when ``reward(chosen) > reward(rejected)`` (a tie is ``wrong``, as RewardBench counts
it).

Engines: ``hf`` (transformers, CPU or GPU) and ``vllm`` (vLLM's pooling runner, ``scoring.reward_vllm``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.core.errors import BadInput
from evalgate.rlhf.reward_options import PreferenceOptions, RewardModelOptions, RewardModelRef
from evalgate.rlhf.rm_engine import RewardModel, conversation
from evalgate.scoring.base import SampleToScore, ScoreResult, require_one_sample

if TYPE_CHECKING:
    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.core.environment import Environment
    from evalgate.store import Store


def reward_key(conversation: str) -> str:
    """The reward cache's key of one scored text (with the RM digest and engine, the full key): the sha256 hex of
    the conversation the RM is shown (``rm_engine.conversation``), after a fixed prefix, so it never equals a key of
    before (the sha256 of the JSON ``[prompt, completion]``, which missed a change of rendering: commit c04436f made
    special tokens in a completion literal text, and a reward computed before it for such a completion was reused)."""
    return hashlib.sha256(_KEY_PREFIX + conversation.encode("utf-8")).hexdigest()


_KEY_PREFIX = b"evalgate reward conversation\x00"


def reward_keyer(tier: str | None, env: Environment) -> Callable[[str], str]:
    """The reward cache's key function for a run on ``tier``: ``reward_key`` (a bare sha256) on an open tier; on a
    sealed tier (private, human-audit) the keyed HMAC its prompts get (``sealing.Sealer.digest``, ``env``'s key) of
    the same prefixed text. A preference pair's conversation is its item's text, and a completion's is the item's
    prompt and what a public checkpoint writes: a bare hash of it in the store confirmed a guessed private item
    without the key (adversary, third pass; the judge's calls were keyed the same way before 4e2102d). A rerun still
    hits.

    Raises:
        RefusedByPolicy: a sealed tier and no private key.
    """
    from evalgate.keys.sealing import sealer_for

    seal = sealer_for(tier, env)
    if seal is None:
        return reward_key
    return lambda conversation: seal.digest(_KEY_PREFIX.decode("utf-8") + conversation)


def sigmoid(x: float) -> float:
    """The logistic function, 1 / (1 + e^-x), without overflow for large |x|."""
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def pinned_model_dir(checkpoint: str, digest: str, what: str, field: str, why: str = "", *,
                     env: Environment) -> Path:
    """The HF directory of a model a protocol pins by digest (a reward model, a DPO run's reference), its digest
    checked.

    Args:
        checkpoint: where it is. digest: the digest the protocol pins. what: its name in the message. field: the
            option holding the digest. why: said after the two digests.

    Raises:
        BadInput: the digest is not the pinned one (names both and says to update the protocol).
    """
    from evalgate.checkpoints.resolve import resolve_checkpoint

    ckpt = resolve_checkpoint(checkpoint, env=env)
    if ckpt.digest != digest:
        raise BadInput(f"{what} {checkpoint} has digest {ckpt.digest}, the protocol pins {digest}{why}: pin the new "
                       f"digest in {field} (a new protocol version)")
    return ckpt.model_dir


def reward_model_dir(ref: RewardModelRef, env: Environment) -> Path:
    """The pinned RM's HF directory, its digest checked (``pinned_model_dir``; ``env``: whose digest and models
    caches)."""
    return pinned_model_dir(ref.checkpoint, ref.digest, "reward model", "scorer.options.reward_model.digest",
                            "; a different reward model changes every score", env=env)


def load_reward_model(ref: RewardModelRef, env: Environment) -> RewardModel:
    """Resolve the pinned RM (``reward_model_dir``), check its digest and load it.

    Raises:
        BadInput: the digest is not the pinned one, or the checkpoint is not a reward model.
        MissingExtra: the engine is not installed.
    """
    return open_reward_model(reward_model_dir(ref, env), ref.engine)


def load_rm_conversations(ref: RewardModelRef, env: Environment) -> Callable[[str, str], str]:
    """``load_conversations`` of the pinned RM (its digest checked; the weights are not loaded).

    Raises:
        BadInput: the digest is not the pinned one. MissingExtra: transformers not installed.
    """
    return load_conversations(reward_model_dir(ref, env))


def load_conversations(model_dir: Path) -> Callable[[str, str], str]:
    """What the RM in ``model_dir`` is shown for a (prompt, completion) (``rm_engine.conversation`` with its
    tokenizer; the weights are not loaded): the reward cache's keys come from it.

    Raises:
        MissingExtra: transformers not installed.
    """
    from evalgate.checkpoints.model import load_tokenizer

    tokenizer = load_tokenizer(model_dir)
    return lambda prompt, completion: conversation(tokenizer, prompt, completion)


def open_reward_model(model_dir: Path, engine: str) -> RewardModel:
    """The reward model in ``model_dir`` on ``engine``: ``hf`` (``RewardModel.load``) or ``vllm`` (vLLM's pooling
    runner, ``scoring.reward_vllm``).

    Raises:
        BadInput: not a reward model. MissingExtra: the engine is not installed.
    """
    if engine == "vllm":
        from evalgate.rlhf.reward_vllm import VllmRewardModel

        return VllmRewardModel(model_dir)
    return RewardModel.load(model_dir)


def cached_rewards(shown: Callable[[], Callable[[str, str], str]], rm: Callable[[], RewardModel], digest: str,
                   engine: str, store: Store | None, pairs: Sequence[tuple[str, str]],
                   key: Callable[[str], str] = reward_key) -> list[float | str]:
    """Rewards of ``pairs`` through the store's reward cache (key: RM digest, engine, ``reward_key`` of the
    conversation the RM is shown, ``shown()(prompt, completion)``, e.g. ``load_conversations``); only missing
    conversations are scored, each once (``rm()`` gives the model, called only then), and stored at once.
    ``store`` None: no cache (``shown`` is not called). A conversation beyond the RM's context gives its message
    (str) and is not stored. ``key``: the run's tier's key function (``reward_keyer``)."""
    if store is None:
        return list(rm().rewards(pairs))
    render = shown()
    keys = [key(render(p, c)) for p, c in pairs]
    have: dict[str, float] = store.cached_rewards(digest, engine, sorted(set(keys)))
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)  # a pair repeated in the batch is scored once
    todo = [i for k, i in first.items() if k not in have]
    fresh = rm().rewards([pairs[i] for i in todo]) if todo else []
    new = {keys[i]: r for i, r in zip(todo, fresh, strict=True) if isinstance(r, float)}
    if new:
        store.put_rewards(digest, engine, new)
    got: dict[str, float | str] = {**have, **{keys[i]: r for i, r in zip(todo, fresh, strict=True)}}
    return [got[k] for k in keys]


class RewardModelScorer:
    """The ``reward_model`` scorer (see the module docstring). The run calls ``begin(plan, samples)`` before
    scoring, so rewards go through the run's store; the RM is loaded on first use."""

    name = "reward_model"

    def __init__(self, protocol: Any, options: RewardModelOptions) -> None:
        self.options = options
        self.store: Store | None = None
        self.key: Callable[[str], str] = reward_key  # the run's tier's (``begin``)
        self._rm: RewardModel | None = None
        self._render: Callable[[str, str], str] | None = None

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The prompt field."""
        return (self.options.prompt_field,)

    def begin(self, plan: Any, samples: Sequence[SampleToScore]) -> None:
        """Called by the run before scoring (``runner.score``): use the run's store for the reward cache (the run's
        checkpoint is the policy, not the RM)."""
        self.store = plan.store
        self.key = reward_keyer(plan.manifest.tier, plan.store.env)

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """``scored`` with score ``sigmoid(reward)`` and the reward in ``extracted``; ``error`` for a conversation
        beyond the RM's context. Truncated completions are scored too (the RM sees what the policy wrote)."""
        pairs = [(str(s.item[self.options.prompt_field]), s.response_prefix + s.text) for s in samples]
        rewards = cached_rewards(self._shown, self._model, self.options.reward_model.digest,
                                 self.options.reward_model.engine, self.store, pairs, self.key)
        return [ScoreResult(sigmoid(r), "scored", repr(r), f"reward {r:.4f}") if isinstance(r, float)
                else ScoreResult(0.0, "error", None, r) for r in rewards]

    def _model(self) -> RewardModel:
        if self._rm is None:
            assert self.store is not None  # begin() gave the run's store
            self._rm = load_reward_model(self.options.reward_model, self.store.env)
        return self._rm

    def _shown(self) -> Callable[[str, str], str]:
        if self._render is None:
            assert self.store is not None
            self._render = load_rm_conversations(self.options.reward_model, self.store.env)
        return self._render


class PreferenceScorer:
    """The ``reward_preference`` scorer (see the module docstring): the run's checkpoint is the RM, handed over by
    the run's ``begin(plan, samples)`` before scoring."""

    name = "reward_preference"

    def __init__(self, protocol: Any, options: PreferenceOptions) -> None:
        self.options = options
        self.store: Store | None = None
        self.checkpoint: Checkpoint | None = None
        self.tier: str | None = None  # the run's split's: its metrics withhold small groups on a sealed tier
        self.key: Callable[[str], str] = reward_key  # the run's tier's (``begin``)
        self._rm: RewardModel | None = None

    @staticmethod
    def check_protocol(spec: Any, options: PreferenceOptions) -> None:
        """One sample per item: a preference pair is scored, not generated."""
        require_one_sample(spec, "reward_preference", "generates nothing")

    @property
    def required_fields(self) -> tuple[str, ...]:
        """Prompt, chosen, rejected and category fields."""
        o = self.options
        return (o.prompt_field, o.chosen_field, o.rejected_field, o.category_field)

    def begin(self, plan: Any, samples: Sequence[SampleToScore]) -> None:
        """Called by the run before scoring (``runner.score``): score with the run's checkpoint as the RM, through
        the run's store's reward cache; the split's tier decides what the run metrics may show
        (``rlhf.preference.preference_metrics``)."""
        self.store, self.checkpoint, self.tier = plan.store, plan.checkpoint, plan.manifest.tier
        self.key = reward_keyer(self.tier, plan.store.env)

    def _model(self) -> RewardModel:
        if self._rm is None:
            assert self.checkpoint is not None
            self._rm = open_reward_model(self.checkpoint.model_dir, self.options.engine)
        return self._rm

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Per pair: ``correct`` when reward(chosen) > reward(rejected), else ``wrong``; ``extracted`` the margin;
        ``error`` when either side is beyond the RM's context.

        Raises:
            BadInput: not bound to a checkpoint (called outside a run).
        """
        if self.checkpoint is None:
            raise BadInput("the reward_preference scorer scores with the run's checkpoint: it runs inside 'evalgate "
                           "run' (begin() was not called)")
        o = self.options
        pairs = [(str(s.item[o.prompt_field]), str(s.item[f])) for s in samples for f in (o.chosen_field,
                                                                                        o.rejected_field)]
        checkpoint = self.checkpoint
        r = cached_rewards(lambda: load_conversations(checkpoint.model_dir), self._model, checkpoint.digest, o.engine,
                           self.store, pairs, self.key)
        out = []
        for chosen, rejected in zip(r[::2], r[1::2], strict=True):
            if not isinstance(chosen, float) or not isinstance(rejected, float):
                out.append(ScoreResult(0.0, "error", None, str(chosen if isinstance(chosen, str) else rejected)))
                continue
            margin = chosen - rejected
            out.append(ScoreResult(1.0 if margin > 0 else 0.0, "correct" if margin > 0 else "wrong", repr(margin),
                                   f"reward chosen {chosen:.4f}, rejected {rejected:.4f}"
                                   + (" (a tie counts as wrong)" if margin == 0 else "")))
        return out


def reward_metrics(per_item: dict[str, list[dict[str, Any]]], items: dict[str, dict[str, Any]],
                   options: Any, scorer: Any = None) -> dict[str, Any]:
    """The ``reward_model`` scorer's run metrics: ``reward_mean`` (mean over items of the item's mean raw reward)
    with its stderr (``stats.mean_stderr``, items as the unit), over the items with at least one ``scored``
    sample; ``reward_errors`` counts the samples that could not be scored. With no scored item, ``reward_mean`` and
    its stderr are None. ``items``, ``options`` and ``scorer`` are not read (``ScorerEntry.metrics``'s contract)."""
    from evalgate.core.stats import mean_stderr

    values = []
    for samples in per_item.values():
        got = [float(s["extracted"]) for s in samples if s["status"] == "scored"]
        if got:
            values.append(sum(got) / len(got))
    errors = sum(1 for ss in per_item.values() for s in ss if s["status"] == "error")
    mean, se = mean_stderr(values) if values else (None, None)
    return {"reward_mean": mean, "reward_mean_stderr": se, "reward_errors": errors}
