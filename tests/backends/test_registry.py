"""Backend registry: one registration per backend (name, options model, constructor, extra, engine), lazy import
with an install hint, options validated into an object, flags that set options, and the settings that change
outputs."""

from __future__ import annotations

import importlib.metadata
import inspect
import sys

import pytest

from evalgate.backends.base import (
    BACKENDS,
    BackendEntry,
    BackendOptions,
    HFOptions,
    OpenAIOptions,
    VLLMOptions,
    check_backend,
    generation_settings,
    get_backend,
    parse_backend_options,
    with_flags,
)
from evalgate.core.errors import BadInput, MissingExtra


def test_registry_names_the_engines_and_the_replay_backend() -> None:
    assert set(BACKENDS) == {"hf", "vllm", "openai", "replay"}
    for call in (lambda: get_backend("tgi", "model"), lambda: check_backend("tgi", {}),
                 lambda: with_flags("tgi", {}, device="cpu")):
        with pytest.raises(BadInput, match="unknown backend 'tgi'; known backends: hf, openai, replay, vllm"):
            call()


def test_missing_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # sys.modules[name] = None makes `import name` raise ImportError, as on a machine without the package
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.delitem(sys.modules, "evalgate.backends.vllm", raising=False)
    with pytest.raises(MissingExtra, match=r"pip install '<evalgate checkout>\[vllm\]' \(by path"):
        get_backend("vllm", "model")
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.delitem(sys.modules, "evalgate.backends.openai", raising=False)
    with pytest.raises(MissingExtra, match=r"pip install '<evalgate checkout>\[openai\]' \(by path"):
        get_backend("openai", "model", OpenAIOptions(base_url="http://127.0.0.1:9/v1"))


def test_backend_options_are_yaml_scalars() -> None:
    assert parse_backend_options(["base_url=http://127.0.0.1:8000/v1", "concurrency=4", "use_n=true",
                                  "gpu_memory_utilization=0.5", "dtype=bfloat16"]) == {
        "base_url": "http://127.0.0.1:8000/v1", "concurrency": 4, "use_n": True, "gpu_memory_utilization": 0.5,
        "dtype": "bfloat16"}
    with pytest.raises(BadInput, match="KEY=VALUE"):
        parse_backend_options(["concurrency"])


class _PartialOptions(BackendOptions):
    """No options."""


def test_partial_install_names_the_missing_module(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A backend whose engine imports but whose constructor needs a dependency that is absent, as vllm does when
    # xgrammar is missing: the error names that module and the extra, and exits 2 (MissingExtra), not 3.
    (tmp_path / "evalgate_partial_engine.py").write_text(
        "class Engine:\n"
        "    def __init__(self, model_dir, options, tokenizer):\n"
        "        import evalgate_absent_dependency  # noqa: F401\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    monkeypatch.setitem(BACKENDS, "partial", BackendEntry(_PartialOptions, "evalgate_partial_engine:Engine",
                                                          "partial", "evalgate_partial_engine", ()))
    with pytest.raises(MissingExtra) as err:
        get_backend("partial", "model")
    assert "'evalgate_absent_dependency'" in err.value.message
    assert "pip install '<evalgate checkout>[partial]' (by path" in err.value.message
    assert err.value.exit_code == 2


def test_partially_installed_vllm_is_a_missing_extra() -> None:
    # make setup installs vLLM with --no-deps (for the contract tests), so `from vllm import LLM` fails here on
    # an absent dependency; the registry must name that module.
    pytest.importorskip("vllm", reason="vLLM is not importable here; the partial-install case is covered above")
    try:
        from vllm import LLM  # noqa: F401
    except ImportError as e:
        missing = e.name
    else:
        pytest.skip("vLLM is completely installed here, so it is not a partial install; covered by the test above")
    with pytest.raises(MissingExtra, match=rf"'{missing}'.*pip install '<evalgate checkout>\[vllm\]' \(by path"):
        get_backend("vllm", "model")


def test_each_constructor_takes_its_validated_options_object() -> None:
    # one signature for every backend: (model_dir, options, tokenizer); the options are the registered model
    for name, entry in BACKENDS.items():
        try:
            klass = entry.constructor()
        except ImportError as e:
            pytest.skip(f"backend {name} cannot be imported here ({e}); its constructor is checked where it can")
        params = inspect.signature(klass).parameters
        assert list(params) == ["model_dir", "options", "tokenizer"], name
        assert entry.options.__name__ in str(params["options"].annotation), name
        assert not hasattr(klass, "accepts_tokenizer"), name
        assert entry.options.model_config["extra"] == "forbid" and entry.options.model_config["frozen"], name
        assert all(f.description for f in entry.options.model_fields.values()), f"{name}: a field has no docstring"


def test_options_are_one_strict_object() -> None:
    checked = check_backend("hf", {"token_budget": 64})
    assert isinstance(checked, HFOptions) and checked.token_budget == 64 and checked.device == "cpu"
    assert checked.model_dump(exclude_unset=True) == {"token_budget": 64}  # what the run records as given
    with pytest.raises(BadInput, match="token_budget='64': Input should be a valid integer"):
        check_backend("hf", {"token_budget": "64"})
    with pytest.raises(BadInput, match=r"known: api_key, backoff_s, base_url, concurrency, endpoint"):
        check_backend("openai", {"base_url": "http://127.0.0.1:9/v1", "concurency": 2})
    with pytest.raises(BadInput, match="backend 'hf' takes HFOptions, not VLLMOptions"):
        get_backend("hf", "model", VLLMOptions())


def test_device_flag_applies_where_the_backend_has_the_option() -> None:
    assert with_flags("hf", {"token_budget": 8}, device="cuda:1") == {"token_budget": 8, "device": "cuda:1"}
    assert with_flags("vllm", {"dtype": "float16"}, device=None) == {"dtype": "float16"}  # flag not given
    for name in ("vllm", "openai"):
        with pytest.raises(BadInput, match=rf"--device does not apply to the {name} backend"):
            with_flags(name, {}, device="cuda")
    with pytest.raises(BadInput, match="--device cpu and --backend-option device=cuda disagree"):
        with_flags("hf", {"device": "cuda"}, device="cpu")
    assert with_flags("hf", {"device": "cpu"}, device="cpu") == {"device": "cpu"}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_generation_settings_hold_what_changes_outputs_and_nothing_else() -> None:
    hf = generation_settings("hf", HFOptions(token_budget=64))
    assert hf == {"backend": "hf", "versions": {"transformers": _version("transformers"), "torch": _version("torch")},
                  "device": "cpu", "dtype": "float32",  # the dtype used on cpu, not None; no token_budget
                  "sampler": "gumbel-splitmix64/1"}  # the hf draw rule (issue 21): another rule draws other samples
    assert generation_settings("hf", HFOptions(device="cuda"))["dtype"] == "bfloat16"
    oa = generation_settings("openai", OpenAIOptions(base_url="http://127.0.0.1:9/v1", concurrency=2, timeout_s=5,
                                                     use_n=True))
    assert oa == {"backend": "openai", "versions": {}, "model": None, "endpoint": "completions", "use_n": True,
                  "base_url": "http://127.0.0.1:9/v1"}  # the server's address stands for its unseen engine version
    assert generation_settings("hf", HFOptions(device="cuda:1"))["device"] == "cuda"  # the kind, not the index
    vl = generation_settings("vllm", VLLMOptions(data_parallel_size=4, gpu_memory_utilization=0.5))
    assert vl == {"backend": "vllm", "versions": {"vllm": _version("vllm"), "torch": _version("torch")},
                  "tensor_parallel_size": 1, "max_model_len": None, "dtype": "auto"}
    # a KV block size, once set, is part of the key (the attention sums over blocks); unset, the key is as before it
    assert generation_settings("vllm", VLLMOptions(block_size=32))["block_size"] == 32
    # JSON-able, so it can be part of a cache key
    import json

    json.dumps([hf, oa, vl])
    with pytest.raises(BadInput, match="takes OpenAIOptions"):
        generation_settings("openai", HFOptions())


def test_the_backend_contract_has_no_settings_method_of_its_own(tiny_checkpoint) -> None:
    # issue 31: Backend.generation_settings() had no runtime caller and left out the hf device kind and the openai
    # server address that the cache key holds; the entry's cache_settings is now the one definition
    from evalgate.backends.hf import HFBackend

    b = get_backend("hf", str(tiny_checkpoint), check_backend("hf", {"dtype": "bfloat16"}))
    assert isinstance(b, HFBackend) and b.dtype == "bfloat16"
    assert not hasattr(b, "generation_settings")
    assert generation_settings("hf", HFOptions(dtype="bfloat16"))["dtype"] == "bfloat16"
