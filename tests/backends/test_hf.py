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


def test_stop_criteria_sees_only_generated_tokens(smollm2_dir: Path) -> None:
    """Issue 14, point 9: a prompt ending in a newline and a first generated "```" do not make the stop
    "\\n```"; a newline and "```" both generated do. Neighbours: a stop split over several generated tokens,
    and a stop wholly inside the prompt."""
    import torch

    from evalgate.backends.hf import GeneratedStopCriteria
    from evalgate.checkpoints.model import load_tokenizer

    tok = load_tokenizer(str(smollm2_dir))
    prompt = tok('def f():\n    """doc"""\n', add_special_tokens=False)["input_ids"]

    def stops(generated: str, stop: str = "\n```", prompt_ids: list[int] = prompt) -> bool:
        gen = tok(generated, add_special_tokens=False)["input_ids"]
        crit = GeneratedStopCriteria(tok, (stop,), len(prompt_ids))
        return bool(crit(torch.tensor([prompt_ids + gen]), torch.zeros(1, 1))[0])

    assert not stops("```")  # "\n" is the prompt's, "```" the model's: no stop (hf used to stop here)
    assert stops("    return 1\n```")
    assert stops("x = 'no'\n``" + "`")
    assert not stops("    return 1", stop='"""doc"""')  # the stop occurs only inside the prompt


@pytest.mark.slow
def test_humaneval_smoke_prompt_does_not_stop_on_its_own_newline(smollm2_dir: Path,
                                                                humaneval_records: list[dict]) -> None:
    """The issue's case on the real model: HumanEval/3 under the smoke protocol's prompt (ending in a newline),
    greedy: SmolLM2 writes "```" first and then goes on; hf used to store "```" with finish 'stop'."""
    from evalgate.backends.hf import HFBackend
    from evalgate.prompts import render_prompt
    from evalgate.protocol import load_protocol
    from tests.conftest import REPO

    rec = next(r for r in humaneval_records if r["task_id"] == "HumanEval/3")
    hf = HFBackend(str(smollm2_dir))
    prompt = render_prompt(load_protocol(REPO / "protocols" / "humaneval-smoke.yaml"), {"id": "3", **rec},
                           hf.tokenizer).text
    assert prompt.endswith("\n")
    p = EffectiveParams(0.0, 1.0, 0, 12, ("\n```",), 1.0)
    (res,) = hf.generate([GenerationRequest("3", prompt, (0,), (1,), p)])
    (c,) = res.completions
    assert c.text.startswith("```") and c.text != "```" and "\n```" not in c.text
    assert c.completion_tokens > 1



def _broken_copy(src: Path, dest: Path, tensor: str, value: float) -> Path:
    """A copy of the SmolLM2 directory with one value of ``tensor`` set to ``value`` (NaN, infinity)."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dest)
    weights = load_file(str(dest / "model.safetensors"))
    weights[tensor].view(-1)[7] = value
    save_file(weights, str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


@pytest.mark.slow
def test_a_checkpoint_with_a_nan_weight_is_refused_before_generation(smollm2_dir: Path, tmp_path: Path) -> None:
    """Issue 28 item 17: one NaN weight gave a "complete" run of empty completions, exit 0, nothing said. Right:
    exit 2 (a broken checkpoint is bad input) naming the tensor, and no completion stored."""
    import yaml
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.protocols_ops import freeze
    from evalgate.splits import write_split
    from evalgate.store import Store

    tensor = "model.layers.3.self_attn.q_proj.weight"
    ckpt = _broken_copy(smollm2_dir, tmp_path / "nan-ckpt", tensor, float("nan"))
    write_split("t-smoke", "smoke", [{"id": "a", "question": "What is 2+2?", "answer": "4"}], {"source": "test"})
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "version": "1", "scorer": {"name": "exact"},
                                 "prompt": {"template": "Q: {{ question }}", "chat_template": "model"},
                                 "sampling": {"temperature": 0.0, "max_tokens": 4}}))
    freeze(p)
    r = CliRunner().invoke(main, ["run", "--protocol", str(p), "--checkpoint", str(ckpt), "--split", "t-smoke"])
    assert r.exit_code == 2, r.output
    assert f"tensor {tensor} holds 1 non-finite value(s)" in r.stderr and str(ckpt) in r.stderr
    (run,) = Store().runs()
    assert run["status"] == "failed" and tensor in run["error"] and Store().samples(run["run_id"]) == []


@pytest.mark.slow
def test_the_file_check_for_engines_that_load_weights_themselves(smollm2_dir: Path, tmp_path: Path) -> None:
    """The vllm backend's check (``check_finite_weights``, before its engine starts) on the same kind of damage:
    infinity in a norm weight; the clean checkpoint passes."""
    from evalgate.checkpoints.model import check_finite_weights
    from evalgate.errors import BadInput

    check_finite_weights(smollm2_dir)
    ckpt = _broken_copy(smollm2_dir, tmp_path / "inf-ckpt", "model.layers.0.input_layernorm.weight", float("inf"))
    with pytest.raises(BadInput, match=r"tensor model\.layers\.0\.input_layernorm\.weight in model\.safetensors "
                                       r"holds 1 non-finite value"):
        check_finite_weights(ckpt)
