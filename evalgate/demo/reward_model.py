"""A tiny real reward model: a linear head on SmolLM2-135M features, trained from preference pairs, saved as a
standard ``LlamaForSequenceClassification`` checkpoint that ``AutoModelForSequenceClassification`` loads.

Features are exactly what the saved checkpoint's head sees: the base model (final norm applied) read at the
conversation's last non-padding token, the pooling of transformers' ``LlamaForSequenceClassification``. They are
taken by that class itself, built with an identity head (``num_labels`` = hidden size, ``score.weight`` = I), so
training and scoring cannot pool differently. The head is a Bradley-Terry model without intercept
(``P(chosen > rejected) = sigmoid(w . (h_chosen - h_rejected))``, Ouyang et al. 2022, eq. 1), fitted by scikit-learn's
``LogisticRegression`` on the feature differences, each pair in both orders (labels 1 and 0), so no intercept is
needed and none is fitted. The saved head is ``score.weight = w``: the checkpoint's reward of a conversation is
``w . h``.

Training pairs are the demo's addition task (``demo.train.addition_items``, the ``train`` part, so no dev or
private item is trained on): the correct sum is chosen, the sum off by ten rejected. The checkpoint is cached once
per machine under ``$EVALGATE_CACHE/reward-model/<key>`` (key: sha256 of ``RM_CONFIG`` and the base digest),
written to a temporary directory and renamed under a file lock, like the demo's training.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RM_CONFIG: dict[str, Any] = {
    "task": "addition-pairs-v1", "train_pairs": 96, "rejected": "sum + 10 (sum - 10 when above 150)",
    "head": "LogisticRegression(C=1.0, fit_intercept=False), both orders", "batch": 8, "torch_threads": 2,
    "dtype": "float32",
}
"""Everything that decides the reward model's bytes; its hash (with the base digest) keys the cache."""


def addition_pairs(part: str, n: int) -> list[dict[str, Any]]:
    """Preference pairs from the demo's addition items: ``{"id", "prompt", "chosen", "rejected", "category"}``,
    ``chosen`` the correct sum, ``rejected`` the sum plus ten (minus ten above 150), category ``addition``.

    Args:
        part: ``train``, ``dev`` or ``private`` (``demo.train.addition_items``: disjoint parts).
        n: number of pairs (at most 2000).
    """
    from evalgate.demo.train import addition_items

    out = []
    for it in addition_items(part, n):
        total = int(it["answer"])
        wrong = total - 10 if total > 150 else total + 10
        out.append({"id": f"pref-{it['id']}", "prompt": it["question"], "chosen": str(total), "rejected": str(wrong),
                    "category": "addition"})
    return out


def _feature_model(base_dir: Path) -> Any:
    """``LlamaForSequenceClassification`` of the base weights with an identity head: its logits are the pooled
    hidden state (``[batch, hidden]``)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    hidden = json.loads((base_dir / "config.json").read_text())["hidden_size"]
    model = AutoModelForSequenceClassification.from_pretrained(str(base_dir), num_labels=hidden, dtype=torch.float32)
    with torch.no_grad():
        model.score.weight.copy_(torch.eye(hidden))
    model.config.pad_token_id = _pad_id(base_dir)
    return model.eval()


def _pad_id(base_dir: Path) -> int:
    from evalgate.checkpoints.model import load_tokenizer

    tok = load_tokenizer(base_dir)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return int(pad)


def features(base_dir: Path, pairs: Sequence[tuple[str, str]]) -> Any:
    """Pooled features of (prompt, completion) conversations, as the saved reward model pools them.

    Returns:
        A float64 numpy array ``[len(pairs), hidden]``.
    """
    import numpy as np

    from evalgate.checkpoints.model import load_tokenizer
    from evalgate.rlhf.rm_engine import RewardModel

    rm = RewardModel(load_tokenizer(base_dir), _feature_model(base_dir))  # the scorer's batching and template
    rows = rm.logits(pairs)
    too_long = [r for r in rows if isinstance(r, str)]
    if too_long:
        raise ValueError(f"a training pair is too long: {too_long[0]}")
    return np.asarray(rows, dtype=np.float64)


def fit_head(chosen: Any, rejected: Any) -> Any:
    """The Bradley-Terry head ``w`` (``[hidden]``): logistic regression without intercept on ``h_c - h_r`` (label
    1) and ``h_r - h_c`` (label 0)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    diff = chosen - rejected
    x = np.concatenate([diff, -diff])
    y = np.concatenate([np.ones(len(diff)), np.zeros(len(diff))])
    return LogisticRegression(C=1.0, fit_intercept=False, max_iter=5000).fit(x, y).coef_[0]


def save_reward_model(base_dir: Path, w: Any, out: Path) -> None:
    """Write the base model with head ``w`` as a ``LlamaForSequenceClassification`` checkpoint (``num_labels: 1``,
    ``pad_token_id`` set, float32 safetensors, the base tokenizer and chat template)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from evalgate.checkpoints.model import load_tokenizer

    model = AutoModelForSequenceClassification.from_pretrained(str(base_dir), num_labels=1, dtype=torch.float32)
    with torch.no_grad():
        model.score.weight.copy_(torch.tensor(w, dtype=torch.float32).reshape(1, -1))
    model.config.pad_token_id = _pad_id(base_dir)
    model.config.id2label, model.config.label2id = {0: "reward"}, {"reward": 0}
    model.save_pretrained(str(out))
    load_tokenizer(base_dir).save_pretrained(str(out))


def rm_key(base_digest: str) -> str:
    """sha256 over ``RM_CONFIG`` and the base checkpoint's digest (first 16 hex digits)."""
    return hashlib.sha256(json.dumps({**RM_CONFIG, "base": base_digest}, sort_keys=True).encode()).hexdigest()[:16]


def _train(base_dir: Path, out: Path) -> dict[str, Any]:
    import torch

    torch.set_num_threads(RM_CONFIG["torch_threads"])
    pairs = addition_pairs("train", RM_CONFIG["train_pairs"])
    t0 = time.perf_counter()
    h = features(base_dir, [(p["prompt"], a) for p in pairs for a in (p["chosen"], p["rejected"])])
    w = fit_head(h[0::2], h[1::2])
    save_reward_model(base_dir, w, out)
    train_acc = float(((h[0::2] - h[1::2]) @ w > 0).mean())
    return {**RM_CONFIG, "train_wall_s": time.perf_counter() - t0, "train_accuracy": train_acc}


def ensure_reward_model(base_dir: Path, base_digest: str) -> Path:
    """Train (once per machine) and return the reward model's checkpoint directory
    ``<cache>/reward-model/<rm_key>/model`` (beside it ``training.json``: the config, wall time and training
    accuracy).

    Raises:
        MissingExtra: transformers, torch or scikit-learn not installed.
    """
    from evalgate.core.fileio import build_once
    from evalgate.demo.train import cache_root

    def build(tmp: Path) -> None:
        info = _train(base_dir, tmp / "model")
        (tmp / "training.json").write_text(json.dumps({**info, "base": base_digest}, indent=2) + "\n")

    return build_once(cache_root() / "reward-model" / rm_key(base_digest), build) / "model"
