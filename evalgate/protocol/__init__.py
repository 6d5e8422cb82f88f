"""Protocols: the file models and loading (``spec``), prompt rendering (``prompts``), freezing (``freeze``) and the
generated reference (``docs``).

``from evalgate.protocol import Protocol`` (the names of ``spec``) keeps working: they are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = {"spec", "prompts", "docs", "freeze"}


def __getattr__(name: str) -> Any:
    """A name of ``evalgate.protocol.spec``, imported on first use (PEP 562)."""
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(name)
    spec = importlib.import_module("evalgate.protocol.spec")
    try:
        value = getattr(spec, name)
    except AttributeError:
        raise AttributeError(f"module 'evalgate.protocol' has no attribute {name!r}") from None
    globals()[name] = value
    return value
