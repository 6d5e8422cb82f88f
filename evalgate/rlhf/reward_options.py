"""The options of the reward-model scorers (``reward_model``, ``reward_preference``), light enough for ``base`` to
register them without importing the scorers (``scoring.reward``)."""

from __future__ import annotations

from typing import Literal

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
