"""Reward models on vLLM's pooling runner: ``LLM(model, runner="pooling")`` and ``LLM.encode(...,
pooling_task="classify")`` with the activation off, so the pooled value is the raw logit at the last token, the same
reward transformers' ``*ForSequenceClassification`` gives (vLLM docs, "Pooling models" / "Reward usages": a sequence
classifier is a sequence reward model; by default vLLM applies a sigmoid or softmax, which ``use_activation=False``
turns off). Checked against the hf engine on the tiny reward model in ``tests/test_vllm_engine.py``.

The engine is the process's one vLLM engine (``backends.vllm.shared_engine``), float32, eager, with the RM's
context as ``max_model_len``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.core.errors import MissingExtra
from evalgate.core.version import install_hint
from evalgate.rlhf.rm_engine import RewardModel


class VllmRewardModel(RewardModel):
    """A reward model on vLLM's pooling runner; ``conversation`` and the context check are ``RewardModel``'s.

    Args:
        model_dir: the RM's HF directory.

    Raises:
        MissingExtra: vLLM is not installed (names the extra).
    """

    def __init__(self, model_dir: Path) -> None:  # noqa: D107 - documented on the class
        try:
            from evalgate.backends.vllm import shared_engine
        except ImportError as e:
            raise MissingExtra(f"reward_model engine vllm needs vLLM: {install_hint('vllm')} ({e})") from e
        from evalgate.checkpoints.model import context_length, load_tokenizer

        found = context_length(model_dir)
        self.tokenizer, self.context = load_tokenizer(model_dir), found[0] if found else None
        kwargs: dict[str, Any] = {"model": str(model_dir), "runner": "pooling", "dtype": "float32",
                                  "enforce_eager": True}
        if self.context:
            kwargs["max_model_len"] = self.context
        self.llm, _ = shared_engine(kwargs)

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[list[float] | str]:
        """The pooled logits of each (prompt, completion), one engine call for all; a conversation beyond the
        context gets its message (str) instead."""
        from vllm.inputs import TokensPrompt
        from vllm.pooling_params import PoolingParams

        ids = [self.tokenizer(self.conversation(p, c), add_special_tokens=False)["input_ids"] for p, c in pairs]
        out: list[list[float] | str] = [f"{len(x)} tokens exceed the reward model's context of {self.context}"
                                        if self.context and len(x) > self.context else [] for x in ids]
        todo = [i for i, o in enumerate(out) if not isinstance(o, str)]
        if todo:
            results = self.llm.encode([TokensPrompt(prompt_token_ids=ids[i]) for i in todo], pooling_task="classify",
                                      pooling_params=PoolingParams(use_activation=False), use_tqdm=False)
            for i, r in zip(todo, results, strict=True):
                out[i] = [float(v) for v in r.outputs.data.reshape(-1)]
        return out
