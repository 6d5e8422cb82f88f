"""Implicit (DPO) reward on preference pairs, the ``dpo_preference`` scorer: a DPO-trained policy is its own reward
model, ``r(x, y) = beta * (log pi(y|x) - log pi_ref(y|x))`` (Rafailov et al. 2023, "Direct Preference Optimization",
eq. 5), and a pair is ``correct`` when ``r(x, chosen) > r(x, rejected)`` (a tie is ``wrong``), as RewardBench scores
DPO models (allenai/reward-bench ``rewardbench/dpo.py``: summed log-probabilities of the answer's tokens, policy minus
reference).

``log pi(y|x)`` is the log-likelihood of the answer as a continuation of the rendered prompt, from the run's backend
like the ``multiple_choice`` scorer's (``scoring.loglikelihood``: lm-evaluation-harness's ``_encode_pair``
tokenization, summed natural-log probabilities); ``log pi_ref(y|x)`` the same token ids scored by the pinned reference
checkpoint with the hf backend, so the two models must share a tokenizer (refused otherwise). The metrics are the
``reward_preference`` scorer's (``rlhf.preference``: accuracy, per category, length bias, RewardBench's score).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput
from evalgate.rlhf.reward import pinned_model_dir
from evalgate.rlhf.reward_options import ImplicitRewardOptions, ReferenceRef
from evalgate.scoring.base import SampleToScore, ScoreResult, require_one_sample


def implicit_reward(policy_logprob: float, reference_logprob: float, beta: float) -> float:
    """DPO's implicit reward of one answer: ``beta * (log pi(y|x) - log pi_ref(y|x))`` (natural logs, summed over
    the answer's tokens)."""
    return beta * (policy_logprob - reference_logprob)


def reference_dir(ref: ReferenceRef, env: Environment) -> Path:
    """The pinned reference's HF directory, its digest checked (``rlhf.reward.pinned_model_dir``; ``env``: whose
    digest and models caches)."""
    return pinned_model_dir(ref.checkpoint, ref.digest, "reference model", "scorer.options.reference.digest", env=env)


class ImplicitRewardScorer:
    """The ``dpo_preference`` scorer (see the module docstring). The run hands it the plan (``begin``) before
    scoring: the reference scores the same (context, answer) token ids the run's backend scored for the policy."""

    name = "dpo_preference"

    def __init__(self, protocol: Any, options: ImplicitRewardOptions) -> None:
        self.options = options
        self.plan: Any = None
        self.tier: str | None = None  # the run's split's: its metrics withhold small groups on a sealed tier
        self._keys: list[tuple[str, int, int]] = []
        self._reference: dict[str, tuple[float, ...]] | None = None

    @staticmethod
    def check_protocol(spec: Any, options: ImplicitRewardOptions) -> None:
        """One sample per item (the log-likelihoods are not sampled); no stop sequences."""
        require_one_sample(spec, "dpo_preference", "samples nothing (it scores both answers' log-likelihoods once)",
                           no_stop=True)

    @property
    def required_fields(self) -> tuple[str, ...]:
        """Prompt, chosen, rejected and category fields."""
        o = self.options
        return (o.prompt_field, o.chosen_field, o.rejected_field, o.category_field)

    def begin(self, plan: Any, samples: Sequence[SampleToScore]) -> None:
        """Called by the run before scoring (``runner.score``): the plan whose prompts and tokenizer made the
        policy's requests, and the samples to score (their reference log-likelihoods are computed at once)."""
        self.plan, self.tier = plan, plan.manifest.tier
        self._keys = [s.key for s in samples if s.key is not None]
        self._reference = None

    def reference_logprobs(self) -> dict[str, tuple[float, ...]]:
        """Per item id: the reference's log-likelihood of the chosen and of the rejected answer.

        Raises:
            BadInput: not bound to a run; the reference's digest or tokenizer differs; a row beyond its context.
        """
        if self._reference is not None:
            return self._reference
        if self.plan is None:
            raise BadInput("the dpo_preference scorer scores inside 'evalgate run' (begin() was not called)")
        from evalgate.backends.base import HFOptions
        from evalgate.backends.hf import HFBackend
        from evalgate.checkpoints.model import load_tokenizer
        from evalgate.runner.generate import loglikelihood_requests

        model_dir = reference_dir(self.options.reference, self.plan.store.env)
        tokenizer = load_tokenizer(model_dir)
        policy_tok = self.plan.prompts.tokenizer
        if policy_tok is None or tokenizer.get_vocab() != policy_tok.get_vocab():
            raise BadInput(f"reference model {self.options.reference.checkpoint} does not share the policy's "
                           "tokenizer: its log-likelihoods would be of other tokens; the reference of a DPO run is "
                           "the checkpoint it started from")
        options = self.plan.backend_options if isinstance(self.plan.backend_options, HFOptions) else HFOptions()
        backend = HFBackend(str(model_dir), options, tokenizer)
        results = backend.loglikelihood(loglikelihood_requests(self.plan, self._keys))
        self._reference = {r.request.key: r.logprobs for r in results}
        return self._reference

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Per pair: ``correct`` when the chosen answer's implicit reward exceeds the rejected one's, else
        ``wrong``; ``extracted`` the reward margin, ``detail`` both rewards and the four log-likelihoods.

        Raises:
            BadInput: a sample whose text is not the run's log-likelihoods of the two answers; not bound to a run.
        """
        reference = self.reference_logprobs()
        beta = self.options.beta
        out = []
        for s in samples:
            iid = s.key[0] if s.key is not None else str(s.item.get("id"))
            try:
                pol = [float(x) for x in json.loads(s.text)["logprobs"]]
            except (ValueError, KeyError, TypeError) as e:
                raise BadInput(f"item {iid!r}: the sample holds no log-likelihoods of the two answers (was it "
                               "scored by another protocol?)") from e
            ref = reference.get(iid)
            if len(pol) != 2 or ref is None or len(ref) != 2:
                raise BadInput(f"item {iid!r}: expected the chosen and rejected answers' log-likelihoods")
            chosen, rejected = implicit_reward(pol[0], ref[0], beta), implicit_reward(pol[1], ref[1], beta)
            margin = chosen - rejected
            out.append(ScoreResult(1.0 if margin > 0 else 0.0, "correct" if margin > 0 else "wrong", repr(margin),
                                   f"implicit reward chosen {chosen:.6g}, rejected {rejected:.6g} (beta {beta:g}; "
                                   f"log p policy {pol[0]:.6g} / {pol[1]:.6g}, reference {ref[0]:.6g} / "
                                   f"{ref[1]:.6g})" + (" (a tie counts as wrong)" if margin == 0 else "")))
        return out
