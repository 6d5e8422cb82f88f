"""Generation settings: everything besides checkpoint, protocol, prompt and seed that changes a sampled output.

Sampled outputs differ by engine, engine version, dtype, device kind and parallelism, so the generation cache
reuses a sample only under the same settings (their sha256 is part of the cache key). Cross-backend equality is
what ``evalgate parity`` checks, explicitly. The settings are
``backends.base.generation_settings``: engine versions and the backend entry's ``cache_settings`` (by default every
option marked ``changes_outputs`` in the backend's options model), the one definition.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from evalgate.backends.base import generation_settings

__all__ = ["generation_settings", "settings_sha256"]


def settings_sha256(settings: dict[str, Any]) -> str:
    """sha256 of the settings' canonical JSON (the generation cache's settings key)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
