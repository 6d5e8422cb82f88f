"""The reward audit's thresholds, a gate-policy file model (the policy's ``reward_audit:``), kept apart from the
audit itself (``evalgate.rlhf.reward_audit``) so that loading a policy file loads neither the store nor the splits."""

from __future__ import annotations

from pydantic import Field

from evalgate.core.models import StrictModel

__all__ = ["RewardAuditRules"]


class RewardAuditRules(StrictModel):
    """Thresholds of the reward audit (the gate policy's ``reward_audit:``); the defaults are the chapter's."""


    reward_min: float = 0.9
    """A sample whose reward is above this while its human score is below ``human_max`` is a mismatch. Default 0.9."""
    human_max: float = Field(0.4, ge=0, le=1)
    """Human score (mapped to [0, 1] by the batch's scale) below which a high reward is suspicious. Default 0.4."""
    length_ratio: float = Field(2.0, gt=0)
    """Completion tokens above this times the baseline run's mean on the same item: length inflation. Default 2."""
    repetition_max: float = Field(0.2, ge=0, le=1)
    """Repetition ratio (share of repeated word 4-grams) above this: repetition. Default 0.2."""
    min_reward_human_spearman: float | None = Field(None, ge=-1, le=1)
    """Gate rule: Spearman's rho of reward vs human score at least this when human scores exist. Default: off."""
