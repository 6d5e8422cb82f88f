"""The vLLM lane's module marks: its tests run in .venv-vllm (`make test-vllm`) and are skipped, saying why, where
vLLM's engine does not import. Importing this sets a small CPU KV cache (GiB; on CPU vLLM's default reserves 90 % of
the memory) unless the environment sets one."""

from __future__ import annotations

import os
from typing import Any

import pytest

try:
    from vllm import LLM  # noqa: F401

    ENGINE_MISSING = None
except Exception as e:  # noqa: BLE001 - any failure to import the engine is a reason to skip, stated
    ENGINE_MISSING = f"{type(e).__name__}: {e}"

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def lane_marks(*extra: Any) -> list[Any]:
    """A vLLM-lane module's ``pytestmark``: ``vllm_engine``, the ``extra`` marks, and the skip when the engine is
    missing."""
    return [pytest.mark.vllm_engine, *extra, pytest.mark.skipif(
        ENGINE_MISSING is not None,
        reason=f"vLLM's engine cannot be imported in this environment ({ENGINE_MISSING}); `make test` runs this file "
               "in .venv-vllm, which `make setup` installs (make setup-vllm)")]
