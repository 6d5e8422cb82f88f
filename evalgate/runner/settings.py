"""Generation settings: everything besides checkpoint, protocol, prompt and seed that changes a sampled output.

Sampled outputs differ by engine, engine version, dtype, device kind and parallelism, so the generation cache
reuses a sample only under the same settings (their sha256 is part of the cache key). Cross-backend equality is
what ``evalgate parity`` checks, explicitly. To add a backend or an output-changing option, extend
mark the option ``changes_outputs`` in the backend's options model (the one place).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from evalgate.backends.base import BackendOptions
from evalgate.backends.base import generation_settings as base_generation_settings


def generation_settings(backend: str, options: BackendOptions) -> dict[str, Any]:
    """The settings of ``backend`` under validated ``options`` that change sampled outputs: the backend's own
    ``backends.base.generation_settings`` (engine versions and every option marked ``changes_outputs``), with an hf
    device reduced to its kind (``cuda:1`` -> ``cuda``: the same GPU model gives the same samples on any index) and
    an openai server's address added (a remote engine's version is not visible; its address stands for it).
    """
    settings = base_generation_settings(backend, options)
    if backend == "hf" and settings.get("device"):
        settings["device"] = str(settings["device"]).split(":")[0]
    if backend == "openai":
        settings["base_url"] = getattr(options, "base_url", None) or os.environ.get("EVALGATE_OPENAI_BASE_URL")
    return settings


def settings_sha256(settings: dict[str, Any]) -> str:
    """sha256 of the settings' canonical JSON (the generation cache's settings key)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
