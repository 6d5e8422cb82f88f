"""The diagnostics' thresholds: one pydantic model a gate policy embeds (``extra="forbid"``).

Every field says its default and where the number comes from. "evalgate default" marks a number no paper or
trainer documentation fixes; it is chosen to flag what a person reading the curve would flag, and a policy can
change it. None turns the signal off (it is then reported as ``off``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from evalgate.core.errors import BadInput
from evalgate.core.models import StrictModel


class Thresholds(StrictModel):
    """Thresholds of the training-log signals (docs/DIAGNOSTICS.md lists each signal with its threshold)."""


    window: int = Field(default=5, ge=1)
    """Consecutive logged steps for the level signals (clip fraction, truncation, pinned length, zero-variance
    groups). Default: 5 (the gate's clip-fraction window before this module)."""
    window_share: float = Field(default=0.25, gt=0, le=0.5)
    """Share of the logged values in the early and the late window of the trend signals (first and last quarter).
    Default: 0.25 (evalgate default)."""
    kl_target: float | None = Field(default=None, gt=0)
    """KL target; KL above 2x this fails (the chapter's PPO guardrail ``kl > 2 * target_kl``; cf. the adaptive KL
    penalty of Schulman et al. 2017, sec. 4, and Ziegler et al. 2019, sec. 2.2). Default: off (a target is the run's
    own choice)."""
    kl_rise_max: float | None = Field(default=5.0, gt=1)
    """KL late-window mean / early-window mean above this warns (the PPO-stability article: KL surging precedes the
    collapse; Zheng et al. 2023, "Secrets of RLHF in LLMs Part I: PPO", sec. 5.2). Default: 5 (evalgate default:
    KL starts at 0 and grows in every run with a penalty, so only a several-fold rise is flagged)."""
    kl_rise_floor: float = Field(default=1e-2, gt=0)
    """The early KL mean used in that ratio is at least this, so a run starting at KL = 0 does not give an infinite
    ratio, and KL growing from ~0 into the range PPO itself targets is no surge. Default: 0.01 nats per token, the
    middle of the KL targets the PPO paper tries for its adaptive penalty (d_targ 0.003, 0.01, 0.03; Schulman et al.
    2017, sec. 4 and Table 1). With 0.001 ordinary linear KL growth (0.0055 -> 0.0355, 6.5x) warned "a surge like
    this precedes collapse"; now it is 3.6x of the floor, while KL jumping from 0.01 to 0.1 is
    10x."""
    kl_negative_max: float | None = Field(default=-1.0, lt=0)
    """KL below this at every one of ``window`` consecutive logged steps warns: a true KL is never negative, the
    logged one is a sample estimate that may dip below 0 by noise (huggingface/trl#925), but one that stays below
    -1 is what TRL's PPO trainer warns of as "a precursor for failed training" (huggingface/trl PR 352 moved that
    warning from 0 to -1; hiyouga/LlamaFactory#664 shows -5.27). Default: -1 (TRL's bound)."""
    clip_fraction_max: float | None = Field(default=0.4, ge=0, le=1)
    """Clip fraction above this for ``window`` consecutive logged steps fails (the chapter's PPO guardrail
    ``clip_fraction > 0.4``: reduce the learning rate or PPO epochs). Default: 0.4."""
    entropy_floor: float | None = Field(default=None, ge=0)
    """Entropy (nats per token) below this fails. Default: off (the floor depends on the vocabulary and task)."""
    entropy_drop_max: float | None = Field(default=0.5, gt=0, lt=1)
    """Relative entropy drop (1 - late-window mean / early-window mean) above this warns (the chapter: entropy
    falling fast means premature convergence; Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs",
    show performance saturating as entropy is used up). Default: 0.5 (evalgate default: entropy halved)."""
    entropy_rise_max: float | None = Field(default=2.0, gt=1)
    """Entropy late-window mean / early-window mean above this warns while the training reward did not rise (info
    when it rose): entropy climbing while reward falls is the collapse verl users report (verl-project/verl#2738,
    #1066). Default: 2 (evalgate default: entropy doubled)."""
    truncation_max: float | None = Field(default=0.2, ge=0, le=1)
    """Mean share of completions cut at the maximum completion length (TRL ``completions/clipped_ratio``) over
    ``window`` consecutive logged steps above this fails: those completions are scored unfinished, which adds reward
    noise (Yu et al. 2025, DAPO, sec. 3.4 "Overlong Reward Shaping"). Default: 0.2 (evalgate default)."""
    max_completion_length: int | None = Field(default=None, ge=1)
    """The run's maximum completion length in tokens (TRL ``max_completion_length``). Default: inferred as the
    longest logged completion when some completions were truncated."""
    length_pinned_ratio: float | None = Field(default=0.95, gt=0, le=1)
    """Mean completion length at or above this share of the maximum over ``window`` consecutive logged steps warns:
    the length is pinned at the cap. Default: 0.95 (evalgate default)."""
    length_growth_max: float | None = Field(default=1.5, gt=1)
    """Completion length late-window mean / early-window mean above this warns (the PPO-stability article: response
    length surging is one of the signals that precede a collapse; Zheng et al. 2023, sec. 5.2). Default: 1.5
    (evalgate default)."""
    length_move: float = Field(default=0.1, gt=0)
    """A relative change of the mean completion length (late / early window) beyond this counts as "length moved"
    for the reward signals. Default: 0.1 (evalgate default)."""
    zero_std_max: float | None = Field(default=0.5, ge=0, le=1)
    """Mean share of prompts whose completions all got the same reward (TRL ``frac_reward_zero_std``) over
    ``window`` consecutive logged steps above this warns: those groups have zero advantage and give no gradient
    (Yu et al. 2025, DAPO, sec. 3.2 "Dynamic Sampling"; TRL GRPO docs). Default: 0.5 (evalgate default)."""
    zero_std_rise_max: float | None = Field(default=0.2, gt=0, le=1)
    """That share's late-window mean minus its early-window mean above this warns (the learning signal is drying
    up). Default: 0.2 (evalgate default)."""
    reward_effect: float = Field(default=0.2, gt=0)
    """Reward change (late-window mean - early-window mean) in units of the reward's standard deviation over the
    run below this in size counts as "flat", at or above as "rising" (Cohen 1988: d = 0.2 is a small effect).
    Default: 0.2."""
    reward_fall_effect: float | None = Field(default=0.5, gt=0)
    """A fall of the training reward (early-window mean - late-window mean) of at least this many standard
    deviations of the reward over the run warns (``reward_falling``; Cohen 1988: d = 0.5 is a medium effect, so
    window-to-window noise does not fire it). Default: 0.5."""
    reward_std_drop_max: float | None = Field(default=0.5, gt=0, lt=1)
    """Relative drop of the reward standard deviation (1 - late / early window mean) above this warns: GRPO
    normalises advantages by it, so a collapsing spread means vanishing advantages (Shao et al. 2024,
    DeepSeekMath, sec. 4.1.2). Default: 0.5 (evalgate default)."""
    value_loss: bool = True
    """Warn when the critic's value loss (PPO) does not decrease: late-window mean >= early-window mean (the
    chapter: "value loss not falling: fit the critic alone"). Default: true."""
    grad_norm_spike: float | None = Field(default=10.0, gt=1)
    """Grad norm above this times the median of the previous ``grad_norm_window`` logged values fails (the gate's
    guard before this module). Default: 10 (evalgate default)."""
    grad_norm_window: int = Field(default=10, ge=3)
    """Previous logged values for the grad-norm median. Default: 10."""
    trainer_kind: Literal["auto", "rl", "preference", "sft"] = "auto"
    """What kind of training wrote the log, for the signals that apply only to some kinds (docs/DIAGNOSTICS.md,
    "applies to"): ``auto`` reads it from the keys (``signals.trainer_kind``: TRL's SFTTrainer logs
    ``mean_token_accuracy`` and no RL key). On an SFT run ``entropy_drop`` is off: fitting the data lowers the
    entropy by design (and ``entropy_rising`` with it). Default: auto."""
    nonfinite: bool = True
    """Report NaN/inf per key: fail in ``loss`` or a key read by a signal that is on, warn in another key, info for
    a key that is NaN at every step (a metric that is off, e.g. ``kl`` with beta = 0). Default: true."""
    log_overrun_factor: float = Field(default=2.0, gt=1)
    """A training log whose last step is beyond this times a seed's last checkpoint step is probably another run's
    (``coverage``). Default: 2 (evalgate default)."""


def load_thresholds(path: str | Path) -> Thresholds:
    """Read a thresholds YAML file (the fields of ``Thresholds``).

    Raises:
        BadInput: unreadable or non-UTF-8 file, bad YAML (``file:line``, one line), a document that is not a
            mapping, or a field that is unknown or out of range (``file:line: field``). An empty file gives the
            defaults.
    """
    from evalgate.core.fileio import read_text
    from evalgate.core.userfiles import format_validation_error, load_yaml_mapping

    p = Path(path)
    try:
        text = read_text(p)
    except OSError as e:
        raise BadInput(f"{p}: cannot read thresholds ({e.strerror or e}); pass a YAML file of Thresholds fields") from e
    doc = load_yaml_mapping(p, text, "thresholds") if text.strip() else {}
    try:
        return Thresholds(**doc)
    except ValidationError as e:
        raise BadInput(format_validation_error(p, text, e, Thresholds, "thresholds")) from e
