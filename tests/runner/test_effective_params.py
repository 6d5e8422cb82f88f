"""Effective parameters, on the tiny random checkpoint with SmolLM2's tokenizer and config (real decoding; what
the text says does not matter here): a checkpoint's generation_config.json never changes what is sent; per-sample
seeds survive reordering and re-batching; the system text reaches the model when the chat template rejects a
system role; the token ids sent hold one BOS; the run records all of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from evalgate.backends.base import EffectiveParams, GenerationRequest, sample_seed
from evalgate.core.errors import BadInput
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.test_prompts import ADD_BOS, BOS, NO_SYSTEM, set_post_processor

if TYPE_CHECKING:  # torch is imported where a test uses the backend, not when the fast lane collects this module
    from evalgate.backends.hf import HFBackend


def hf_backend() -> type[HFBackend]:
    """The hf backend's class, imported when a test runs (torch and transformers load with it)."""
    from evalgate.backends.hf import HFBackend

    return HFBackend

# Values that, if a checkpoint's generation_config.json leaked into generate(), would change greedy output.
POISON = {"do_sample": True, "temperature": 3.0, "top_k": 7, "top_p": 0.5, "repetition_penalty": 1.8,
          "no_repeat_ngram_size": 1, "max_new_tokens": 2}
GREEDY = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=8, stop=(), repetition_penalty=1.0)
SAMPLED = EffectiveParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=4, stop=(), repetition_penalty=1.0)


def ckpt_copy(src: Path, dest: Path) -> Path:
    """A copy of an HF checkpoint directory whose small files can be edited; the weights are a symlink."""
    dest.mkdir()
    for f in src.iterdir():
        if f.suffix == ".safetensors":
            (dest / f.name).symlink_to(f)
        elif f.is_file():
            shutil.copy(f, dest / f.name)
    return dest


@pytest.fixture(scope="module")
def clean(tiny_checkpoint: Path) -> HFBackend:
    return hf_backend()(str(tiny_checkpoint))


def chat(backend: HFBackend, text: str) -> str:
    return backend.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)


def request(backend: HFBackend, key: str, text: str, params: EffectiveParams, n: int = 1
            ) -> GenerationRequest:
    seeds = tuple(sample_seed(7, key, j) for j in range(n))
    return GenerationRequest(key, chat(backend, text), tuple(range(n)), seeds, params)


def texts(results) -> dict[str, list[str]]:
    return {r.request.key: [c.text for c in r.completions] for r in results}


def test_generation_config_json_does_not_leak_into_generate(tiny_checkpoint: Path, tmp_path: Path,
                                                            clean: HFBackend,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    poisoned = ckpt_copy(tiny_checkpoint, tmp_path / "poisoned")
    gc = json.loads((poisoned / "generation_config.json").read_text())
    (poisoned / "generation_config.json").write_text(json.dumps({**gc, **POISON}))
    bad = hf_backend()(str(poisoned))
    model = bad.model
    # What transformers resolves from the config we pass plus the model's own generation config: the values it
    # actually generates with (GenerationMixin._prepare_generation_config, transformers 5).
    resolved = []
    prepare = model._prepare_generation_config
    monkeypatch.setattr(model, "_prepare_generation_config",
                        lambda *a, **k: resolved.append(prepare(*a, **k)) or resolved[-1])
    req = request(bad, "greedy", "Repeat the word cat five times.", GREEDY)
    expected = texts(clean.generate([req]))
    assert texts(bad.generate([req])) == expected

    [(cfg, _)] = resolved
    assert cfg.do_sample is False and cfg.repetition_penalty == 1.0 and not cfg.no_repeat_ngram_size
    assert cfg.temperature != 3.0 and cfg.top_k != 7 and cfg.top_p != 0.5
    assert cfg.max_new_tokens == GREEDY.max_tokens
    info = bad.info()
    assert {k: info["ignored_generation_config"].get(k) for k in POISON} == POISON
    sent = info["sent"]["generation_config"]
    assert sent["repetition_penalty"] == 1.0 and "temperature" not in sent and "top_k" not in sent

    # The test has teeth: applied, the poisoned config changes the greedy completion.
    from transformers import GenerationConfig

    ids = bad.tokenizer(req.prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    as_greedy = GenerationConfig.from_pretrained(str(poisoned))
    as_greedy.do_sample, as_greedy.max_new_tokens = False, GREEDY.max_tokens  # deterministic, same length
    leaked = model.generate(ids, generation_config=as_greedy)
    assert bad.tokenizer.decode(leaked[0, ids.shape[1]:], skip_special_tokens=True) != expected["greedy"][0]


def setup_run(tmp_path: Path, prompt: dict, sampling: dict | None = None, version: str = "1") -> Path:
    items = [{"id": "a", "question": "What is 2+2?", "answer": "4"}]
    write_split("t-smoke", "smoke", items, {"source": "test"})
    doc = {"name": "t", "version": version, "scorer": {"name": "exact"},
           "prompt": {"template": "Q: {{ question }}", **prompt},
           "sampling": {"temperature": 0.0, "max_tokens": 3, **(sampling or {})}}
    p = tmp_path / f"p{version}.yaml"
    p.write_text(yaml.safe_dump(doc))
    freeze(p, Store)
    return p


def test_run_records_effective_values_prompts_and_special_tokens(tiny_checkpoint: Path, tmp_path: Path) -> None:
    poisoned = ckpt_copy(tiny_checkpoint, tmp_path / "poisoned")
    gc = json.loads((poisoned / "generation_config.json").read_text())
    (poisoned / "generation_config.json").write_text(json.dumps({**gc, **POISON}))
    p = setup_run(tmp_path, {"chat_template": "model"}, {"top_p": 0.9, "repetition_penalty": 1.05})
    doc = evaluate(p, poisoned, "t-smoke", RunOptions(progress=False), store=Store())
    assert doc["effective_params"] == {"temperature": 0.0, "top_p": 0.9, "top_k": 0, "max_tokens": 3,
                                       "stop": [], "repetition_penalty": 1.05, "n": 1, "seed": 0,
                                       "per_sample_seed": "sha256(f'{seed}:{item_id}:{sample_index}')[:8] & (2**63-1)"}
    backend = doc["backend"]
    assert backend["ignored_generation_config"]["repetition_penalty"] == 1.8
    assert backend["ignored_generation_config"]["temperature"] == 3.0
    assert backend["sent"]["generation_config"]["repetition_penalty"] == 1.05
    assert backend["sent"]["generation_config"]["max_new_tokens"] == 3
    assert len(backend["chat_template_sha256"]) == 64
    assert backend["tokenizer"]["bos_token"] == "<|im_start|>"
    assert backend["tokenizer"]["prompts_bos_added"] == 0
    # SmolLM2's template: default system turn, user turn, assistant turn, each opened by <|im_start|> (= BOS).
    assert backend["tokenizer"]["bos_per_prompt"] == {"min": 3, "max": 3}

    store = Store()
    [row] = store.run_prompts(doc["run_id"])
    assert row.item_id == "a" and row.bos_count == 3 and row.bos_added is False
    assert row.text.endswith("<|im_start|>user\nQ: What is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert store.runs(run_id=doc["run_id"])[0].backend_info["tokenizer"] == backend["tokenizer"]
    # a cached rerun records its prompts too, without loading the model
    again = evaluate(p, poisoned, "t-smoke", RunOptions(progress=False), store=Store())
    assert again["counts"]["cached"] == 1 and store.run_prompts(again["run_id"])[0].text == row.text


def test_sample_is_stable_under_reordering_and_rebatching(clean: HFBackend) -> None:
    a = request(clean, "a", "Name a colour.", SAMPLED, n=2)
    c = request(clean, "c", "Hi", SAMPLED, n=2)
    together = texts(clean.generate([a, c]))  # one batch, two prompt lengths, left-padded
    reordered = texts(clean.generate([c, a]))
    clean.token_budget, budget = 1, clean.token_budget  # every row alone in its batch
    try:
        alone = texts(clean.generate([a]))
    finally:
        clean.token_budget = budget
    assert reordered["a"] == together["a"] == alone["a"] and reordered["c"] == together["c"]
    # sampling is real: the two samples of an item (different seeds) are not all identical
    assert any(len(set(v)) == 2 for v in together.values())


def test_system_text_reaches_the_model_when_the_template_rejects_the_system_role(
        tiny_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nosys.jinja").write_text(NO_SYSTEM)
    sent = []
    generate = hf_backend().generate
    monkeypatch.setattr(hf_backend(), "generate", lambda self, reqs, on_result=None: (
        sent.extend(self.tokenizer.decode(r.prompt_ids) for r in reqs) or generate(self, reqs, on_result)))
    p = setup_run(tmp_path, {"chat_template": "nosys.jinja", "system_prompt": "Reply in French."})
    doc = evaluate(p, tiny_checkpoint, "t-smoke", RunOptions(progress=False), store=Store())
    assert sent == ["<|im_start|>user\nReply in French.\n\nQ: What is 2+2?<|im_end|>\n"
                    "<|im_start|>assistant\n"]
    assert Store().run_prompts(doc["run_id"])[0].system_merged is True

    p = setup_run(tmp_path, {"chat_template": "nosys.jinja", "system_prompt": "Reply in French.",
                             "system_role": "fail"}, version="2")
    with pytest.raises(BadInput, match="rejects a system role.*system_role: fail"):
        evaluate(p, tiny_checkpoint, "t-smoke", RunOptions(progress=False), store=Store())
    assert [r.status for r in Store().runs()] == ["complete"]


def test_token_ids_sent_to_the_model_hold_one_bos(tiny_checkpoint: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = ckpt_copy(tiny_checkpoint, tmp_path / "adds-bos")
    set_post_processor(ckpt / "tokenizer.json", ADD_BOS)
    rows = []
    batch_fn = hf_backend()._generate_batch
    monkeypatch.setattr(hf_backend(), "_generate_batch",
                        lambda self, batch, p, *rest: rows.extend(b[2] for b in batch) or batch_fn(self, batch, p,
                                                                                                   *rest))
    p = setup_run(tmp_path, {"chat_template": "none"})
    doc = evaluate(p, ckpt, "t-smoke", RunOptions(progress=False), store=Store())
    assert len(rows) == 1 and rows[0][0] == BOS and rows[0].count(BOS) == 1
    tok = doc["backend"]["tokenizer"]
    assert tok["tokenizer_adds_bos"] is True and tok["prompts_bos_added"] == 1
    assert tok["bos_per_prompt"] == {"min": 1, "max": 1}


def test_max_tokens_beyond_the_context_is_refused_before_any_read(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """Issue 28 item 17: ``max_tokens: 100000000`` was accepted though SmolLM2's context is 8,192 tokens
    (config.json max_position_embeddings). Refused before the split is read (no access-log row), naming both."""
    from evalgate.runner.plan import prepare

    p = setup_run(tmp_path, {"chat_template": "model"}, {"max_tokens": 100_000_000})
    with pytest.raises(BadInput) as e:
        prepare(p, tiny_checkpoint, "t-smoke", RunOptions(progress=False), store=Store())
    assert "max_tokens 100000000" in e.value.message and "context of 8192 tokens" in e.value.message
    assert "max_position_embeddings" in e.value.message
    assert Store().access_rows("t-smoke") == [] and Store().runs() == []

    # 8,190 completion tokens leave 2 for the prompt; SmolLM2's chat prompt for "Q: What is 2+2?" is longer (its
    # default system turn alone is a sentence), so prompt + max_tokens exceeds 8,192: refused, naming the item.
    p = setup_run(tmp_path, {"chat_template": "model"}, {"max_tokens": 8190}, version="2")
    with pytest.raises(BadInput, match=r"item 'a''s prompt of \d+ tokens \+ sampling\.max_tokens 8190 = \d+ "
                                       r"exceeds the checkpoint's context of 8192 tokens"):
        prepare(p, tiny_checkpoint, "t-smoke", RunOptions(progress=False), store=Store())
    assert Store().access_rows("t-smoke") == [] and Store().runs() == []
    p = setup_run(tmp_path, {"chat_template": "model"}, {"max_tokens": 8000}, version="3")  # fits: prepared
    assert prepare(p, tiny_checkpoint, "t-smoke", RunOptions(progress=False), store=Store()).warnings == []


def test_the_context_check_is_skipped_for_a_server_and_the_run_says_so(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from evalgate.runner.plan import prepare

    p = setup_run(tmp_path, {"chat_template": "model"}, {"max_tokens": 100_000_000})
    plan = prepare(p, tiny_checkpoint, "t-smoke", RunOptions(backend="openai", progress=False,
                                                         backend_options={"base_url": "http://127.0.0.1:9/v1"}),
                   store=Store())
    (w,) = plan.warnings
    assert w.startswith("context length not checked: the openai server decides it") and "8192" in w


@pytest.mark.parametrize("config, expected", [
    ({"max_position_embeddings": 8192}, (8192, "config.json max_position_embeddings")),
    ({"n_positions": 1024}, (1024, "config.json n_positions")),  # GPT-2
    ({"text_config": {"max_position_embeddings": 32768}},  # Gemma 3 (multimodal config)
     (32768, "config.json text_config max_position_embeddings")),
    # Qwen2.5's model card: 32,768 tokens, 131,072 with YaRN factor 4
    ({"max_position_embeddings": 32768,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
     (131072, "config.json max_position_embeddings with yarn RoPE scaling x4.0")),
    # Llama 3.1 states the extended length itself (rope_type llama3)
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
     (131072, "config.json max_position_embeddings")),
    ({"hidden_size": 8}, None),
])
def test_context_length_from_common_configs(tmp_path: Path, config: dict, expected) -> None:
    from evalgate.checkpoints.model import context_length

    (tmp_path / "config.json").write_text(json.dumps(config))
    assert context_length(tmp_path) == expected
