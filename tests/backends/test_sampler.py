"""The hf backend's seeded sampler: batch independence, the target distribution, transformers' kept sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch

    from evalgate.backends.sampler import SeededSampler

# torch, transformers, scipy.stats and the sampler (torch) are imported in the tests, not here: every pytest process
# collects this file, and the fast lane's other worker runs none of it

U64 = (1 << 64) - 1


def _splitmix64_reference(x: int) -> int:
    """Steele, Lea & Flood 2014, on Python ints modulo 2**64."""
    z = (x + 0x9E3779B97F4A7C15) & U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
    return z ^ (z >> 31)


def test_splitmix64_matches_the_reference_bit_for_bit() -> None:
    import torch

    from evalgate.backends.sampler import splitmix64

    xs = [0, 1, 2, 12345, (1 << 63) - 1, 1 << 63, U64, 0xDEADBEEFCAFEBABE]
    signed = [x - (1 << 64) if x >= 1 << 63 else x for x in xs]
    got = splitmix64(torch.tensor(signed, dtype=torch.int64)).tolist()
    assert [g & U64 for g in got] == [_splitmix64_reference(x) for x in xs]
    # the first output of the splitmix64 generator seeded with 0 (a published test vector)
    assert _splitmix64_reference(0) == 0xE220A8397B1DCDAF


def _step(sampler: SeededSampler, logits: torch.Tensor, width: int) -> list[int]:
    import torch

    scores = sampler(torch.zeros((logits.shape[0], width), dtype=torch.long), logits.clone())
    assert bool((scores == 0).sum(dim=-1).eq(1).all())  # exactly one token left per row
    return scores.argmax(dim=-1).tolist()


@pytest.mark.parametrize(("top_k", "top_p"), [(0, 1.0), (0, 0.9), (20, 1.0), (50, 0.8)])
def test_a_draw_depends_only_on_its_own_seed_step_and_logits(top_k: int, top_p: float) -> None:
    import torch

    from evalgate.backends.sampler import SeededSampler

    gen = torch.Generator().manual_seed(0)
    mine = torch.randn(1, 1000, generator=gen) * 3
    others = torch.randn(6, 1000, generator=gen) * 3
    seed = 2**63 + 17  # sample seeds are unsigned 64-bit
    for step in range(5):
        alone = _step(SeededSampler([seed], 4, 0.8, top_k, top_p), mine, 4 + step)[0]
        # the same row third in a batch of 7 with another prompt width (so another padding) at the same step
        batch = torch.cat([others[:2], mine, others[2:]])
        seeds = [1, 2, seed, 3, 4, 5, 6]
        shared = _step(SeededSampler(seeds, 11, 0.8, top_k, top_p), batch, 11 + step)[2]
        assert alone == shared
    # and a different step or seed moves the draw somewhere (over 20 steps, not all equal)
    draws = {_step(SeededSampler([seed], 0, 1.0, 0, 1.0), torch.zeros(1, 1000), s)[0] for s in range(20)}
    assert len(draws) > 1


def test_draws_follow_the_target_categorical_chi_square() -> None:
    """20,000 seeds, one draw each, from softmax(logits / T); chi-square goodness of fit at alpha = 0.001."""
    import torch
    from scipy.stats import chisquare

    from evalgate.backends.sampler import gumbel_argmax, row_keys, seed_keys

    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    t = 0.7
    n = 20_000
    keys = row_keys(seed_keys(range(n)), 0)
    draws = gumbel_argmax((logits / t).expand(n, -1).contiguous(), keys)
    observed = torch.bincount(draws, minlength=6).numpy()
    expected = torch.softmax(logits.double() / t, dim=0).numpy() * n
    assert chisquare(observed, expected).pvalue > 1e-3
    # the same test catches a wrong distribution: the untempered softmax is rejected
    wrong = torch.softmax(logits.double(), dim=0).numpy() * n
    assert chisquare(observed, wrong).pvalue < 1e-3


@pytest.mark.parametrize(("top_k", "top_p"), [(0, 0.9), (5, 1.0), (8, 0.7), (0, 0.5)])
def test_the_tokens_drawn_are_exactly_transformers_kept_set(top_k: int, top_p: float) -> None:
    import torch
    from transformers import TopKLogitsWarper, TopPLogitsWarper

    from evalgate.backends.sampler import SeededSampler

    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        logits = torch.randn(1, 64, generator=gen) * 2
        hf = logits / 0.9
        if top_k:
            hf = TopKLogitsWarper(top_k)(None, hf)
        if top_p < 1:
            hf = TopPLogitsWarper(top_p)(None, hf)
        kept = set(torch.nonzero(torch.isfinite(hf[0])).flatten().tolist())
        n = 4000
        sampler = SeededSampler(list(range(n)), 0, 0.9, top_k, top_p)
        drawn = set(_step(sampler, logits.expand(n, -1).contiguous(), 0))
        assert drawn == kept  # nothing outside transformers' set; everything inside it reachable


def test_temperature_zero_is_refused() -> None:
    from evalgate.backends.sampler import SeededSampler

    with pytest.raises(ValueError, match="temperature"):
        SeededSampler([1], 0, 0.0, 0, 1.0)
