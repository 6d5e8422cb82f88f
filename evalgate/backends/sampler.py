"""Batch-independent seeded sampling on the model's device, vectorised across rows.

The draw for a row depends only on its own sample seed, its decoding step and its logits: never on which other rows
share its batch, the batch size, or the device's global random state. It is the Gumbel-max trick (an exponential
race): ``argmax_i (logits_i / T + G_i)`` with ``G_i = -log(-log U_i)`` is a draw from ``softmax(logits / T)``
(Gumbel 1954; Maddison et al. 2014, "A* Sampling", sec. 2). The uniforms ``U_i`` come from a counter-based generator:
the splitmix64 finaliser (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number generators") keyed by
(sample seed, step) and counted by token id, computed with int64 tensor arithmetic wherever the logits are, so no
per-step host round trip and no Python loop over rows. vLLM's GPU sampler (``vllm/v1/worker/gpu/sample/gumbel.py``)
does the same with Philox keyed by (request seed, position) and counted by token id; its older sampler, like ours
before, drew each seeded row with its own ``torch.Generator`` in a loop.

Top-k and top-p are transformers' own ``TopKLogitsWarper`` and ``TopPLogitsWarper`` (so the kept sets are theirs by
construction), applied after the temperature as ``generate`` orders them. Noise is computed only for the tokens a
row keeps (at most the largest kept set in the batch), keyed by token id, so it is the same whatever that size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from transformers import LogitsProcessor, TopKLogitsWarper, TopPLogitsWarper

from evalgate.backends.base import HF_SAMPLER_RULE

SAMPLER_VERSION = HF_SAMPLER_RULE
"""Names the draw rule, recorded with every run and in the hf backend's generation settings."""

_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _i64(c: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    c &= (1 << 64) - 1
    return c - (1 << 64) if c >= 1 << 63 else c


def _srl(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` is arithmetic)."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """The splitmix64 output function of ``x + gamma`` on int64 tensors (wrapping arithmetic), elementwise.

    Equal, bit for bit, to the reference ``z = x + 0x9E3779B97F4A7C15; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
    z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31`` on unsigned 64-bit integers.
    """
    z = x + _i64(_GAMMA)
    z = (z ^ _srl(z, 30)) * _i64(_M1)
    z = (z ^ _srl(z, 27)) * _i64(_M2)
    return z ^ _srl(z, 31)


def seed_keys(seeds: Sequence[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """``splitmix64`` of each sample seed (any int, taken mod 2**64): shape (rows,), int64."""
    return splitmix64(torch.tensor([_i64(int(v)) for v in seeds], dtype=torch.int64, device=device))


def row_keys(seed_key: torch.Tensor, step: int) -> torch.Tensor:
    """One int64 key per row for decoding step ``step`` (0-based) from ``seed_keys``: shape (rows,)."""
    return splitmix64(seed_key ^ _i64(step))


def uniforms(keys: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """Uniforms in (0, 1), float64, one per (row key, token id): the top 53 bits of
    ``splitmix64(key + token_id * gamma)``, offset by half a unit so neither 0 nor 1 occurs.

    Args:
        keys: (rows,) int64 from ``row_keys``.
        token_ids: (rows, m) int64 token ids.

    Returns:
        (rows, m) float64.
    """
    bits = splitmix64(keys[:, None] + token_ids * _i64(_GAMMA))
    return (_srl(bits, 11).to(torch.float64) + 0.5) * (2.0 ** -53)


def gumbel_argmax(logits: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Sample one token per row from ``softmax(logits)`` by the Gumbel-max trick; ``-inf`` logits are never drawn.

    On the CPU the noise is computed only for the kept tokens (``topk`` over the largest kept count); elsewhere for
    the whole vocabulary, which avoids reading that count back to the host each step. The draws are the same: the
    noise of a token depends on its id, not on how many tokens were considered.

    Args:
        logits: (rows, vocab) float, already tempered and masked; each row has at least one finite value.
        keys: (rows,) int64 row keys.

    Returns:
        (rows,) int64 token ids, on the logits' device.
    """
    if logits.device.type == "cpu":
        kept = int(torch.isfinite(logits).sum(dim=-1).max())
        vals, ids = torch.topk(logits, max(kept, 1), dim=-1)
    else:
        vals = logits
        ids = torch.arange(logits.shape[-1], device=logits.device).expand_as(logits)
    g = -torch.log(-torch.log(uniforms(keys, ids)))
    race = torch.where(torch.isfinite(vals), vals.to(torch.float64) + g, float("-inf"))
    return ids.gather(1, race.argmax(dim=-1, keepdim=True)).squeeze(1)


class SeededSampler(LogitsProcessor):
    """A logits processor that draws each row's next token, seeded per row, and returns scores that are 0 at the
    drawn token and -inf elsewhere (so ``generate`` in greedy mode emits the draw).

    Args:
        seeds: one sample seed per batch row.
        prompt_width: the padded prompt length of the batch; the decoding step is ``input_ids.shape[1] -
            prompt_width``.
        temperature: > 0.
        top_k: keep the k largest logits (0 disables); transformers' ``TopKLogitsWarper``.
        top_p: nucleus sampling (Holtzman et al. 2020) with transformers' ``TopPLogitsWarper`` (1 disables).
    """

    def __init__(self, seeds: Sequence[int], prompt_width: int, temperature: float, top_k: int, top_p: float):
        if temperature <= 0:
            raise ValueError(f"SeededSampler needs temperature > 0, got {temperature}")
        self.seeds, self.prompt_width, self.temperature = list(seeds), prompt_width, temperature
        self._seed_keys: torch.Tensor | None = None
        self.warpers: list[LogitsProcessor] = []
        if top_k > 0:
            self.warpers.append(TopKLogitsWarper(top_k))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        logits = scores.float() / self.temperature
        for w in self.warpers:
            logits = w(input_ids, logits)
        if self._seed_keys is None or self._seed_keys.device != scores.device:
            self._seed_keys = seed_keys(self.seeds, scores.device)
        chosen = gumbel_argmax(logits, row_keys(self._seed_keys, input_ids.shape[1] - self.prompt_width))
        out = torch.full_like(scores, float("-inf"))
        return cast(torch.FloatTensor, out.scatter(1, chosen[:, None], 0.0))
