"""Generation settings: everything besides checkpoint, protocol, prompt and seed that changes a sampled output.

Sampled outputs differ by engine, engine version, dtype, device kind and parallelism, so the generation cache
reuses a sample only under the same settings (their sha256 is part of the cache key). Cross-backend equality is
what ``evalgate parity`` checks, explicitly. To add a backend or an output-changing option, extend
``OUTPUT_SETTINGS`` (the one place; a backend's options model may later declare these itself).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from evalgate.runner.prompts import package_version

# backend -> (output-changing options with their defaults, packages whose versions change outputs). Options that
# only change speed or robustness (token_budget, concurrency, timeouts, retries, gpu_memory_utilization,
# data_parallel_size) are left out: per-sample seeds make a sample independent of batching.
OUTPUT_SETTINGS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "hf": ({"device": "cpu", "dtype": None}, ("transformers", "torch")),
    "vllm": ({"dtype": "auto", "tensor_parallel_size": 1, "max_model_len": None, "enforce_eager": False},
             ("vllm", "torch")),
    # a remote server's engine and version are not visible; its address and model name stand for them
    "openai": ({"base_url": None, "model": None, "endpoint": "completions", "use_n": False}, ()),
}


def generation_settings(backend: str, options: dict[str, Any]) -> dict[str, Any]:
    """The settings of ``backend`` under validated ``options`` that change sampled outputs.

    Returns:
        ``{"backend", "options": {name: value, defaults filled}, "engine": {package: version}}``; an hf device is
        reduced to its kind (``cuda:1`` -> ``cuda``: the same GPU model gives the same samples on any index).
    """
    defaults, packages = OUTPUT_SETTINGS.get(backend, ({}, ()))
    opts = {k: options.get(k, v) for k, v in defaults.items()}
    if backend == "hf":
        opts["device"] = str(opts["device"]).split(":")[0]
    if backend == "openai" and opts["base_url"] is None:
        opts["base_url"] = os.environ.get("EVALGATE_OPENAI_BASE_URL")
    return {"backend": backend, "options": opts, "engine": {p: package_version(p) for p in packages}}


def settings_sha256(settings: dict[str, Any]) -> str:
    """sha256 of the settings' canonical JSON (the generation cache's settings key)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
