"""Where each trainer logs the values the diagnostics read: the key map.

Each canonical key (what a signal reads) lists the raw keys trainers log for it, in the order they are tried (the
first one a log holds wins). A ``train/`` prefix (HF's TensorBoard and W&B callbacks, OpenRLHF's loggers) is
stripped before matching. Read from each project's logging code (TRL ``main`` of 2026-07, ``trl/trainer/
grpo_trainer.py``, ``rloo_trainer.py``, ``dpo_trainer.py``, ``experimental/ppo/ppo_trainer.py`` and older
``ppo_trainer.py``/``rloo_trainer.py``; OpenRLHF ``openrlhf/trainer/ray/ppo_actor.py``, ``ppo_critic.py``,
``ppo_utils/experience_maker.py``; verl ``verl/trainer/ppo/metric_utils.py``, ``ray_trainer.py``,
``verl/workers/actor/dp_actor.py``, ``critic/dp_critic.py``, ``core_algos.py``). docs/DIAGNOSTICS.md shows this
table; a test keeps the two in step.
"""

from __future__ import annotations

# (canonical, raw key, who logs it and what it is)
KEY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("reward", "reward", "TRL GRPO, RLOO (mean total reward of the batch); OpenRLHF PPO"),
    ("reward", "objective/scores", "TRL PPO, RLOO before 0.20 (reward-model score)"),
    ("reward", "env/reward_mean", "TRL PPO before 0.12"),
    ("reward", "critic/score/mean", "verl (sequence score before the KL penalty)"),
    ("reward", "rewards/margins", "TRL DPO (implicit reward margin, chosen - rejected)"),
    ("reward_std", "reward_std", "TRL GRPO, RLOO (std of the rewards within groups, averaged)"),
    ("reward_std", "env/reward_std", "TRL PPO before 0.12"),
    ("kl", "kl", "TRL GRPO, RLOO (only when beta != 0); OpenRLHF"),
    ("kl", "objective/kl", "TRL PPO, RLOO before 0.20"),
    ("kl", "actor/kl_loss", "verl (use_kl_loss)"),
    ("kl", "actor/reward_kl_penalty", "verl (use_kl_in_reward)"),
    ("entropy", "entropy", "TRL GRPO, RLOO, DPO"),
    ("entropy", "objective/entropy", "TRL PPO, RLOO before 0.20"),
    ("entropy", "policy/entropy_avg", "TRL PPO"),
    ("entropy", "actor/entropy", "verl"),
    ("clip_fraction", "clip_ratio/region_mean", "TRL GRPO, RLOO (share of tokens outside the trust region)"),
    ("clip_fraction", "clip_ratio", "TRL GRPO before 0.18 and with the Liger loss"),
    ("clip_fraction", "policy/clipfrac_avg", "TRL PPO, RLOO before 0.20"),
    ("clip_fraction", "ppo/policy/clipfrac", "TRL PPO before 0.12"),
    ("clip_fraction", "actor/pg_clipfrac", "verl"),
    ("clip_fraction", "ppo_clip_ratio", "OpenRLHF"),
    ("completion_length", "completions/mean_length", "TRL GRPO, RLOO (tokens)"),
    ("completion_length", "completion_length", "TRL GRPO before 0.16"),
    ("completion_length", "response_length/mean", "verl"),
    ("completion_length", "response_length", "OpenRLHF"),
    ("completion_length", "tokens/responses_len_mean", "TRL PPO before 0.12"),
    ("completion_length_max", "completions/max_length", "TRL GRPO, RLOO (longest completion of the batch)"),
    ("completion_length_max", "response_length/max", "verl"),
    ("truncation", "completions/clipped_ratio", "TRL GRPO, RLOO (share of completions without EOS: cut at "
                                                "max_completion_length)"),
    ("truncation", "response_length/clip_ratio", "verl (share of responses at max_response_length)"),
    ("zero_std_frac", "frac_reward_zero_std", "TRL GRPO, RLOO (share of prompts whose completions all got the "
                                              "same reward)"),
    ("value_loss", "loss/value_avg", "TRL PPO"),
    ("value_loss", "ppo/loss/value", "TRL PPO before 0.12"),
    ("value_loss", "critic/vf_loss", "verl"),
    ("value_loss", "critic_loss", "OpenRLHF"),
    ("grad_norm", "grad_norm", "HF Trainer (every TRL trainer)"),
    ("grad_norm", "actor/grad_norm", "verl"),
    ("grad_norm", "actor_grad_norm", "OpenRLHF"),
    ("loss", "loss", "HF Trainer (every TRL trainer)"),
    ("loss", "actor/pg_loss", "verl"),
    ("loss", "policy_loss", "OpenRLHF"),
    ("learning_rate", "learning_rate", "HF Trainer (every TRL trainer)"),
    ("learning_rate", "lr", "TRL PPO"),
    ("learning_rate", "actor/lr", "verl"),
    ("learning_rate", "actor_lr", "OpenRLHF"),
)

KEY_MAP: dict[str, tuple[str, ...]] = {}
for _canon, _raw, _ in KEY_ROWS:
    KEY_MAP.setdefault(_canon, ())
    KEY_MAP[_canon] += (_raw,)


STRIP_PREFIX = "train/"
