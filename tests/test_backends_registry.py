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


def test_partial_install_names_the_missing_module(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A backend whose engine imports but whose constructor needs a dependency that is absent, as vllm does when
    # xgrammar is missing: the error names that module and the extra, and exits 2 (MissingExtra), not 3.
    (tmp_path / "evalgate_partial_engine.py").write_text(
        "class Engine:\n"
        "    def __init__(self, model_dir):\n"
        "        import evalgate_absent_dependency  # noqa: F401\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(BACKENDS, "partial", ("evalgate_partial_engine", "Engine", "partial"))
    with pytest.raises(MissingExtra) as err:
        get_backend("partial", "model")
    assert "'evalgate_absent_dependency'" in err.value.message
    assert "pip install 'evalgate[partial]'" in err.value.message
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
    with pytest.raises(MissingExtra, match=rf"'{missing}'.*pip install 'evalgate\[vllm\]'"):
        get_backend("vllm", "model")
