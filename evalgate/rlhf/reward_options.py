"""The options of the reward-model scorers (``reward_model``, ``reward_preference``, ``dpo_preference``), light
enough for ``base`` to register them without importing the scorers (``rlhf.reward``, ``rlhf.implicit_reward``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from evalgate.scoring.options import ScorerOptions


class RewardModelRef(ScorerOptions):
    """Which reward model scores: a local sequence-classification checkpoint pinned by digest."""

    checkpoint: str
    """The RM's HF directory (``AutoModelForSequenceClassification``, ``num_labels: 1``). Default: none,
    required."""
    digest: str
    """The RM's digest as ``evalgate`` computes it (``blake3:<hex>``); an RM whose files hash otherwise is refused,
    and a new RM means a new digest, so a new protocol hash. Default: none, required."""
    engine: Literal["hf", "vllm"] = "hf"
    """Engine computing the rewards: ``hf`` (transformers) or ``vllm`` (vLLM's pooling runner, the ``vllm`` extra).
    Part of the hash: engines agree only to float tolerance. Default: hf."""


class RewardModelOptions(ScorerOptions):
    """Options of the ``reward_model`` scorer: a reward model scores each (prompt, completion)."""

    reward_model: RewardModelRef
    """The reward model. Default: none, required."""
    prompt_field: str = Field(min_length=1)
    """Item field holding the user turn the RM sees before the completion. Default: none, required."""


class PreferenceOptions(ScorerOptions):
    """Options of the ``reward_preference`` scorer: the run's checkpoint is a reward model, each item a preference
    pair; nothing is generated (``sampling.n`` must be 1)."""

    prompt_field: str = "prompt"
    """Item field holding the user turn. Default: ``prompt``."""
    chosen_field: str = "chosen"
    """Item field holding the preferred answer. Default: ``chosen``."""
    rejected_field: str = "rejected"
    """Item field holding the dispreferred answer. Default: ``rejected``."""
    category_field: str = "category"
    """Item field naming the pair's category (accuracy is reported per category). Default: ``category``."""
    engine: Literal["hf", "vllm"] = "hf"
    """Engine computing the run checkpoint's rewards: ``hf`` (transformers) or ``vllm`` (vLLM's pooling runner).
    Default: hf."""


class ReferenceRef(ScorerOptions):
    """The reference model of an implicit (DPO) reward: a local causal-LM checkpoint pinned by digest."""

    checkpoint: str
    """The reference's HF directory (``AutoModelForCausalLM``; its tokenizer must be the policy's). Default: none,
    required."""
    digest: str
    """The reference's digest as ``evalgate`` computes it (``blake3:<hex>``); a reference whose files hash otherwise
    is refused. Default: none, required."""


class ImplicitRewardOptions(ScorerOptions):
    """Options of the ``dpo_preference`` scorer: the run's checkpoint is a DPO-trained policy whose implicit reward
    ``beta * (log pi(y|x) - log pi_ref(y|x))`` (Rafailov et al. 2023, eq. 5) is evaluated on preference pairs;
    nothing is generated (``sampling.n`` must be 1)."""

    reference: ReferenceRef
    """The reference policy (the DPO run's starting checkpoint). Default: none, required."""
    beta: float = Field(gt=0)
    """DPO's beta, the scale of the implicit reward: it changes the margins, not which answer wins. Default: none,
    required."""
    prompt_field: str = "prompt"
    """Item field holding the user turn (the protocol's prompt template renders it). Default: ``prompt``."""
    chosen_field: str = "chosen"
    """Item field holding the preferred answer. Default: ``chosen``."""
    rejected_field: str = "rejected"
    """Item field holding the dispreferred answer. Default: ``rejected``."""
    category_field: str = "category"
    """Item field naming the pair's category (its RewardBench subset). Default: ``category``."""
    target_delimiter: str = ""
    """Text put between the rendered prompt and each answer; empty for a chat template, whose generation prompt
    ends where the answer begins. Default: empty."""
    move_trailing_space: ClassVar[bool] = False
    """The prompt's trailing white space (a chat template's newline after the assistant header) stays in the
    context: the log-likelihood is of the answer's own tokens, as TRL and RewardBench tokenize DPO pairs."""

    def continuations(self, item: dict[str, Any]) -> list[str]:
        """The two continuations scored after the prompt: the chosen answer, then the rejected one."""
        return [self.target_delimiter + str(item[self.chosen_field]),
                self.target_delimiter + str(item[self.rejected_field])]
