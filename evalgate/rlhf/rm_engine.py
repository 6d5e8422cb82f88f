"""The hf engine of reward models: a transformers sequence classifier and its tokenizer scoring conversations
(``scoring.reward`` uses it; ``scoring.reward_vllm`` shares its conversation rendering and context check)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput

BATCH = 8  # sequences per forward pass; sorted by length so a batch pads little


def conversation(tokenizer: Any, prompt: str, completion: str) -> str:
    """The text a reward model with ``tokenizer`` scores: its chat template over [user: prompt, assistant:
    completion], or ``prompt + "\\n\\n" + completion`` when it has none; both as text only
    (``prompts.literal_text``: a completion cannot end its turn and append a forged conversation for the RM to
    score). The reward cache is keyed by this text (``rlhf.reward.reward_key``)."""
    from evalgate.protocol.prompts import literal_text

    prompt, completion = literal_text(tokenizer, prompt), literal_text(tokenizer, completion)
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}], tokenize=False))
    return f"{prompt}\n\n{completion}"


class RewardModel:
    """A sequence-classification model with its tokenizer, scoring conversations (transformers).

    Args:
        tokenizer: the model's tokenizer (its chat template renders the conversation).
        model: a transformers sequence classifier in eval mode, ``config.pad_token_id`` set.

    ``RewardModel.load(model_dir)`` loads and checks a reward model checkpoint.
    """

    def __init__(self, tokenizer: Any, model: Any) -> None:
        import torch

        self.torch, self.tokenizer, self.model = torch, tokenizer, model
        self.context = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None

    @classmethod
    def load(cls, model_dir: Path) -> RewardModel:
        """Load the reward model in ``model_dir`` (float32).

        Raises:
            BadInput: not a sequence classifier, not one output, or no ``pad_token_id`` for batching.
            MissingExtra: transformers/torch not installed.
        """
        from evalgate.checkpoints.model import load_tokenizer

        tokenizer = load_tokenizer(model_dir)  # MissingExtra without transformers
        import torch
        from transformers import AutoModelForSequenceClassification

        try:
            model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), dtype=torch.float32)
        except (OSError, ValueError) as e:
            raise BadInput(f"{model_dir} does not load as a sequence classifier ({e}); a reward model is an "
                           "AutoModelForSequenceClassification checkpoint") from e
        cfg = model.config
        if cfg.num_labels != 1:
            raise BadInput(f"{model_dir} is a sequence classifier with {cfg.num_labels} outputs; a reward model has "
                           "one (num_labels: 1 in config.json)")
        if cfg.pad_token_id is None:
            raise BadInput(f"{model_dir}: config.json has no pad_token_id, so the reward cannot be read at the last "
                           "token of a padded batch; set pad_token_id (the tokenizer's pad or eos id)")
        return cls(tokenizer, model.eval())

    def conversation(self, prompt: str, completion: str) -> str:
        """The text the RM scores (``conversation``)."""
        return conversation(self.tokenizer, prompt, completion)

    def logits(self, pairs: Sequence[tuple[str, str]]) -> list[list[float] | str]:
        """The model's pooled logits (``num_labels`` values) of each (prompt, completion), in input order; a
        conversation longer than the model's context gets a message (str) instead.

        Shapes: batches of ``BATCH`` right-padded sequences sorted by length; the model's pooled logits are
        ``[batch, num_labels]``, read at each row's last non-padding token (transformers' pooling).
        """
        ids = [self.tokenizer(self.conversation(p, c), add_special_tokens=False)["input_ids"] for p, c in pairs]
        out: list[list[float] | str] = [[] for _ in ids]
        order = []
        for i, seq in enumerate(ids):
            if self.context and len(seq) > self.context:
                out[i] = f"{len(seq)} tokens exceed the reward model's context of {self.context}"
            else:
                order.append(i)
        order.sort(key=lambda i: len(ids[i]))
        torch, pad = self.torch, self.model.config.pad_token_id
        for b in range(0, len(order), BATCH):
            batch = order[b:b + BATCH]
            x = torch.full((len(batch), max(len(ids[i]) for i in batch)), pad, dtype=torch.long)
            mask = torch.zeros_like(x)
            for row, i in enumerate(batch):
                x[row, :len(ids[i])] = torch.tensor(ids[i])
                mask[row, :len(ids[i])] = 1
            with torch.no_grad():
                logits = self.model(input_ids=x, attention_mask=mask).logits
            for row, i in enumerate(batch):
                out[i] = [float(v) for v in logits[row]]
        return out

    def rewards(self, pairs: Sequence[tuple[str, str]]) -> list[float | str]:
        """The reward (the one logit) of each (prompt, completion), or the message of one beyond the context."""
        return [r if isinstance(r, str) else r[0] for r in self.logits(pairs)]
