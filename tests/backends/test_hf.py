"""The hf backend: token-budget batching of length-sorted rows, finish_reason, token counts (real SmolLM2 where
outputs are asserted, the tiny random checkpoint for the plumbing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalgate.backends.base import EffectiveParams, GenerationRequest, cut_at_stop, plan_batches

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


def test_stop_criteria_sees_only_generated_tokens(tiny_checkpoint: Path) -> None:
    """Issue 14, point 9: a prompt ending in a newline and a first generated "```" do not make the stop
    "\\n```"; a newline and "```" both generated do. Neighbours: a stop split over several generated tokens,
    and a stop wholly inside the prompt."""
    import torch

    from evalgate.backends.hf import GeneratedStopCriteria
    from evalgate.checkpoints.model import load_tokenizer

    tok = load_tokenizer(str(tiny_checkpoint))  # SmolLM2's tokenizer
    prompt = tok('def f():\n    """doc"""\n', add_special_tokens=False)["input_ids"]

    def stops(generated: str, stop: str = "\n```", prompt_ids: list[int] = prompt) -> bool:
        gen = tok(generated, add_special_tokens=False)["input_ids"]
        crit = GeneratedStopCriteria(tok, (stop,), len(prompt_ids))
        return bool(crit(torch.tensor([prompt_ids + gen]), torch.zeros(1, 1))[0])

    assert not stops("```")  # "\n" is the prompt's, "```" the model's: no stop (hf used to stop here)
    assert stops("    return 1\n```")
    assert stops("x = 'no'\n``" + "`")
    assert not stops("    return 1", stop='"""doc"""')  # the stop occurs only inside the prompt


def test_decoding_progress_counts_finished_rows_and_stops_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-step hook, model-free: three rows after a 2-token prompt (EOS ids 0 and 9, pad 5): row a emits EOS 9
    at token 2, then pad; row b matches a stop string at token 3 (the stop criterion's result), then pad, which is
    not an EOS id; row c runs on. Finished rows stay finished; the hook never ends a row itself."""
    import types

    import torch

    from evalgate.backends import hf

    monkeypatch.setattr(hf, "REPORT_INTERVAL_S", 0.0)
    reports: list[tuple[int, int]] = []
    stop = types.SimpleNamespace(last=None)  # stands in for GeneratedStopCriteria: only its ``last`` is read
    crit = hf.DecodingProgress(2, [0, 9], stop, lambda done, tokens: reports.append((done, tokens)))  # type: ignore[arg-type]
    steps = [([4, 4, 4], [False, False, False]), ([9, 4, 4], [False, False, False]),
             ([5, 6, 4], [False, True, False]), ([5, 5, 4], [False, False, False])]
    ids = torch.tensor([[7, 7]] * 3)
    for tokens, stopped in steps:
        ids = torch.cat([ids, torch.tensor(tokens)[:, None]], dim=1)
        stop.last = torch.tensor(stopped)
        assert crit(ids, torch.zeros(3, 1)).tolist() == [False, False, False]
    assert reports == [(0, 1), (1, 2), (2, 3), (2, 4)]

    monkeypatch.setattr(hf, "REPORT_INTERVAL_S", 3600.0)  # reports are spaced in time: the first step only
    reports.clear()
    quiet = hf.DecodingProgress(2, [0], None, lambda done, tokens: reports.append((done, tokens)))
    for k in range(1, 4):
        quiet(torch.tensor([[7, 7] + [0] * k]), torch.zeros(1, 1))
    assert reports == [(1, 1)]


def test_progress_arrives_during_a_batch(tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32: a batch is one generate() call, and progress used to move only when it returned. Three requests
    of two samples share one batch; reports come after decoding steps, before any result (real decoding, of the
    tiny random checkpoint: what is decoded does not matter here)."""
    from evalgate.backends import hf

    monkeypatch.setattr(hf, "REPORT_INTERVAL_S", 0.0)
    backend = hf.HFBackend(str(tiny_checkpoint))
    events: list[tuple[Any, ...]] = []

    class Receiver:
        def __call__(self, res: Any) -> None:
            events.append(("result", res.request.key))

        def progress(self, finished: int, note: str) -> None:
            events.append(("progress", finished, note))

    params = EffectiveParams(0.0, 1.0, 0, 8, (), 1.0)
    questions = ["What is 2 + 2?", "Name a colour.", "Say hello."]
    requests = [GenerationRequest(f"q{i}", q, (0, 1), (1, 2), params) for i, q in enumerate(questions)]
    results = backend.generate(requests, on_result=Receiver())
    assert len(results) == 3
    first_result = next(i for i, e in enumerate(events) if e[0] == "result")
    during = events[:first_result]
    assert during and all(e[0] == "progress" for e in during)
    tokens = [int(e[2].split("at token ")[1].split("/")[0]) for e in during]
    assert tokens == list(range(1, len(tokens) + 1)) and len(tokens) >= 2  # one report per step (interval 0)
    assert all(e[2].startswith("batch 1/1 at token ") and e[2].endswith("/8") for e in during)
    finished = [e[1] for e in during]
    assert finished == sorted(finished) and finished[-1] <= 6
    stopped = sum(c.finish_reason == "stop" for r in results for c in r.completions)
    assert finished[-1] == stopped  # rows that ended on EOS are the ones counted; rows cut at 8 tokens end with it


@pytest.mark.slow
def test_humaneval_smoke_prompt_does_not_stop_on_its_own_newline(smollm2_dir: Path,
                                                                humaneval_records: list[dict]) -> None:
    """The issue's case on the real model: HumanEval/3 under the smoke protocol's prompt (ending in a newline),
    greedy: SmolLM2 writes "```" first and then goes on; hf used to store "```" with finish 'stop'."""
    from evalgate.backends.hf import HFBackend
    from evalgate.protocol.prompts import render_prompt
    from evalgate.protocol.spec import load_protocol
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
    """A copy of checkpoint directory ``src`` with one value of ``tensor`` set to ``value`` (NaN, infinity)."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dest)
    weights = load_file(str(dest / "model.safetensors"))
    weights[tensor].view(-1)[7] = value
    save_file(weights, str(dest / "model.safetensors"), metadata={"format": "pt"})
    return dest


def test_a_checkpoint_with_a_nan_weight_is_refused_before_generation(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """Issue 28 item 17: one NaN weight gave a "complete" run of empty completions, exit 0, nothing said. Right:
    exit 2 (a broken checkpoint is bad input) naming the tensor, and no completion stored."""
    import yaml
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.protocol.freeze import freeze
    from evalgate.splits import write_split
    from evalgate.store import Store

    tensor = "model.layers.1.self_attn.q_proj.weight"
    ckpt = _broken_copy(tiny_checkpoint, tmp_path / "nan-ckpt", tensor, float("nan"))
    write_split("t-smoke", "smoke", [{"id": "a", "question": "What is 2+2?", "answer": "4"}], {"source": "test"})
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "version": "1", "scorer": {"name": "exact"},
                                 "prompt": {"template": "Q: {{ question }}", "chat_template": "model"},
                                 "sampling": {"temperature": 0.0, "max_tokens": 4}}))
    freeze(p, Store)
    r = CliRunner().invoke(main, ["run", "--protocol", str(p), "--checkpoint", str(ckpt), "--split", "t-smoke"])
    assert r.exit_code == 2, r.output
    assert f"tensor {tensor} holds 1 non-finite value(s)" in r.stderr and str(ckpt) in r.stderr
    (run,) = Store().runs()
    assert run.status == "failed" and tensor in run.error and Store().samples(run.run_id) == []


def test_the_file_check_for_engines_that_load_weights_themselves(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """The vllm backend's check (``check_finite_weights``, before its engine starts) on the same kind of damage:
    infinity in a norm weight; the clean checkpoint passes."""
    from evalgate.checkpoints.model import check_finite_weights
    from evalgate.core.errors import BadInput

    check_finite_weights(tiny_checkpoint)
    ckpt = _broken_copy(tiny_checkpoint, tmp_path / "inf-ckpt", "model.layers.0.input_layernorm.weight", float("inf"))
    with pytest.raises(BadInput, match=r"tensor model\.layers\.0\.input_layernorm\.weight in model\.safetensors "
                                       r"holds 1 non-finite value"):
        check_finite_weights(ckpt)
