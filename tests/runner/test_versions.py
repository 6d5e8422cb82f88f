"""The package versions a run records (``runner.prompts.versions``): the installed distributions' metadata, read
once per process."""

from __future__ import annotations

import importlib.metadata
import platform

import pytest

from evalgate.backends.base import _distributions_of
from evalgate.runner import prompts


def test_versions_are_the_installed_ones_and_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    read: list[str] = []

    engine = set(_distributions_of().get("vllm", []))  # vLLM's build: read by engine_builds on every call

    def counted(dist: str) -> str:
        if dist not in engine:
            read.append(dist)
        return real(dist)

    prompts.package_version.cache_clear()
    monkeypatch.setattr(prompts.importlib.metadata, "version", counted)
    first = prompts.versions()
    assert first["python"] == platform.python_version()
    for key, dist in (("evalgate", "evalgate-gate"), ("transformers", "transformers"), ("duckdb", "duckdb"),
                      ("torch", "torch"), ("math-verify", "math-verify")):
        assert first[key] == real(dist)
    assert prompts.renderer_versions() == {"evalgate": real("evalgate-gate"), "transformers": real("transformers")}
    assert sorted(read) == sorted({"evalgate-gate", "transformers", "torch", "duckdb", "math-verify"})
    read.clear()
    assert prompts.versions() == first and prompts.renderer_versions()["transformers"] == real("transformers")
    assert read == []
    assert prompts.package_version("no-such-distribution-xyz") is None
