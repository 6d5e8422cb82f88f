"""Backend registry: names, lazy import with an install hint, and --backend-option parsing."""

from __future__ import annotations

import sys

import pytest

from evalgate.backends.base import BACKENDS, get_backend, parse_backend_options
from evalgate.errors import BadInput, MissingExtra


def test_registry_names_the_three_backends() -> None:
    assert set(BACKENDS) == {"hf", "vllm", "openai"}
    with pytest.raises(BadInput, match="known backends: hf, openai, vllm"):
        get_backend("tgi", "model")


def test_missing_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # sys.modules[name] = None makes `import name` raise ImportError, as on a machine without the package
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.delitem(sys.modules, "evalgate.backends.vllm", raising=False)
    with pytest.raises(MissingExtra, match=r"pip install 'evalgate\[vllm\]'"):
        get_backend("vllm", "model")
    monkeypatch.setitem(sys.modules, "httpx", None)
    monkeypatch.delitem(sys.modules, "evalgate.backends.openai", raising=False)
    with pytest.raises(MissingExtra, match=r"pip install 'evalgate\[openai\]'"):
        get_backend("openai", "model")


def test_backend_options_are_yaml_scalars() -> None:
    assert parse_backend_options(["base_url=http://127.0.0.1:8000/v1", "concurrency=4", "use_n=true",
                                  "gpu_memory_utilization=0.5", "dtype=bfloat16"]) == {
        "base_url": "http://127.0.0.1:8000/v1", "concurrency": 4, "use_n": True, "gpu_memory_utilization": 0.5,
        "dtype": "bfloat16"}
    with pytest.raises(BadInput, match="KEY=VALUE"):
        parse_backend_options(["concurrency"])
