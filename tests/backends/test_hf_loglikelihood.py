"""The hf backend's log-likelihoods (its context computed once per request, the options on copies of its cache)
against lm-evaluation-harness's definition computed here the plain way: each (context, option) row alone through
the model, the log-softmax at the positions before the option's tokens (``HFLM._loglikelihood_tokens``). Equal to
float32 rounding: 1e-5 relative (the plain way itself moves by up to 2.7e-5 absolute on SmolLM2's sums of -111
when the same row is batched with others: docs/BENCHMARKS.md, "HF log-likelihoods, the context once")."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from evalgate.backends.base import HFOptions, LoglikelihoodRequest
from evalgate.core.errors import BadInput, EngineError

# torch and the hf backend (transformers) are imported in the tests: every one runs the tiny checkpoint (the
# integration lane), and a worker of the fast lane collects this file without running it


def plain(model: Any, context: list[int], option: list[int]) -> tuple[float, bool]:
    """(sum of log p(option token | everything before it), every token the argmax): the row alone, fed whole."""
    import torch

    row = context + option
    with torch.inference_mode():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([row[:-1]])).logits.float(), dim=-1)[0]
    window = logprobs[len(context) - 1:]
    target = torch.tensor(option)
    return float(window.gather(1, target.unsqueeze(1)).sum()), bool((window.argmax(dim=-1) == target).all())


def greedy_option(model: Any, context: list[int], length: int) -> list[int]:
    """The model's own greedy continuation of ``context``: an option whose every token is the argmax."""
    import torch

    ids = list(context)
    with torch.inference_mode():
        for _ in range(length):
            ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(context):]


def requests(model: Any, rng: random.Random, count: int) -> list[LoglikelihoodRequest]:
    """Contexts of 1-40 tokens; per request 1-6 options of 1-9 tokens (single-token ones, equal lengths, a
    repeated option) and one greedy option, so both values of ``greedy`` occur."""
    vocab = int(model.config.vocab_size)
    out = []
    for i in range(count):
        context = [rng.randrange(vocab) for _ in range(rng.randint(1, 40))]
        options = [[rng.randrange(vocab) for _ in range(rng.choice((1, 1, 2, 3, 5, 9)))]
                   for _ in range(rng.randint(1, 6))]
        options.insert(rng.randint(0, len(options)), greedy_option(model, context, rng.randint(1, 4)))
        if i % 3 == 0:
            options.append(list(options[0]))
        out.append(LoglikelihoodRequest(f"q{i}", tuple(context), tuple(tuple(o) for o in options)))
    return out


@pytest.mark.parametrize("token_budget", [32768, 40])  # 40: a request's options split over several batches
def test_the_context_once_equals_each_row_fed_whole(tiny_checkpoint: Path, token_budget: int) -> None:
    from evalgate.backends.hf import HFBackend

    backend = HFBackend(str(tiny_checkpoint), HFOptions(token_budget=token_budget))
    reqs = requests(backend.model, random.Random(7), 12)
    seen: list[str] = []
    results = backend.loglikelihood(reqs, on_result=lambda r: seen.append(r.request.key))
    assert [r.request.key for r in results] == seen == [r.key for r in reqs]
    greedy_seen = set()
    for req, res in zip(reqs, results, strict=True):
        expected = [plain(backend.model, list(req.context_ids), list(o)) for o in req.continuations]
        assert list(res.logprobs) == pytest.approx([e[0] for e in expected], rel=1e-5), req.key
        assert list(res.greedy) == [e[1] for e in expected], req.key
        greedy_seen.update(res.greedy)
    assert greedy_seen == {True, False}


def test_a_row_beyond_the_context_is_refused_before_any_forward_and_a_failing_forward_is_an_engine_error(
        tiny_checkpoint: Path) -> None:
    from evalgate.backends.hf import HFBackend

    backend = HFBackend(str(tiny_checkpoint))
    limit = int(backend.model.config.max_position_embeddings)
    calls = []
    backend.model.register_forward_pre_hook(lambda *a: calls.append(1))
    fits = LoglikelihoodRequest("fits", (1,) * (limit - 1), ((2, 3),))  # limit + 1 tokens: the last is not fed
    long = LoglikelihoodRequest("long", (1,) * limit, ((2,), (2, 3)))
    with pytest.raises(BadInput, match=rf"item 'long': prompt and option are {limit + 2} tokens, beyond the "
                                       rf"model's context of {limit}; shorten the prompt"):
        backend.loglikelihood([fits, long])
    assert calls == []
    vocab = int(backend.model.config.vocab_size)
    with pytest.raises(EngineError, match="transformers forward pass failed on item 'bad': IndexError"):
        backend.loglikelihood([LoglikelihoodRequest("bad", (1, 2), ((3,), (vocab + 5, 4)))])
