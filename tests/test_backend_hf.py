"""The hf backend: token-budget batching of length-sorted rows, finish_reason, token counts (real SmolLM2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.backends.base import EffectiveParams, GenerationRequest, cut_at_stop
from evalgate.backends.hf import plan_batches

P7 = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=7, stop=(), repetition_penalty=1.0)


def test_batches_fill_the_token_budget_in_length_order() -> None:
    # padded size = rows x (longest prompt + max_tokens): [3] -> 10; [3, 5] -> 2 x 12 = 24 <= 30;
    # [3, 5, 5] -> 3 x 12 = 36 > 30, so 5 starts a batch; [5, 9] -> 2 x 16 = 32 > 30, so 9 does too
    assert plan_batches([(3, P7), (5, P7), (5, P7), (9, P7)], token_budget=30) == [[0, 1], [2], [3]]
    # a budget that holds everything gives one batch; a row larger than the budget still gets one of its own
    assert plan_batches([(3, P7), (5, P7), (5, P7), (9, P7)], token_budget=64) == [[0, 1, 2, 3]]
    assert plan_batches([(40, P7)], token_budget=30) == [[0]]


def test_rows_with_different_params_never_share_a_batch() -> None:
    other = EffectiveParams(0.5, 1.0, 0, 7, (), 1.0)
    assert plan_batches([(3, P7), (3, other), (4, other), (5, P7)], token_budget=1000) == [[0], [1, 2], [3]]


def test_cut_at_stop_takes_the_earliest_stop() -> None:
    assert cut_at_stop("a\n```b\n\nc", ("\n\n", "\n```")) == ("a", True)
    assert cut_at_stop("abc", ("x",)) == ("abc", False)


@pytest.mark.slow
def test_finish_reason_and_token_counts_with_the_real_model(smollm2_dir: Path) -> None:
    from evalgate.backends.hf import HFBackend

    hf = HFBackend(str(smollm2_dir))
    tok = hf.tokenizer
    prompt = tok.apply_chat_template([{"role": "user", "content": "Write a Python function that adds two numbers."}],
                                     tokenize=False, add_generation_prompt=True)
    free = EffectiveParams(0.0, 1.0, 0, 12, (), 1.0)
    (res,) = hf.generate([GenerationRequest("a", prompt, (0,), (1,), free)])
    (c,) = res.completions
    # 12 tokens without EOS: cut by max_tokens, and the tokenizer re-encodes the text to the same 12 tokens
    assert c.finish_reason == "length" and c.completion_tokens == 12
    assert len(tok(c.text, add_special_tokens=False)["input_ids"]) == 12
    assert c.prompt_tokens == len(hf.encoder.encode(prompt, "a").ids)

    # a stop sequence taken from inside that greedy text ends generation there: text before it, finish 'stop'
    words = c.text.split()
    stop = words[len(words) // 2]
    expected = c.text[:c.text.index(stop)]
    (res2,) = hf.generate([GenerationRequest("a", prompt, (0,), (1,), EffectiveParams(0.0, 1.0, 0, 12, (stop,),
                                                                                        1.0))])
    (c2,) = res2.completions
    assert c2.text == expected and c2.finish_reason == "stop" and c2.completion_tokens < 12
