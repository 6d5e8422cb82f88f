"""Generation backends behind one contract (``base.Backend``), registered by name (``base.BACKENDS``, a
``BackendEntry`` each) and imported lazily."""

from __future__ import annotations

from typing import Any

from evalgate.core import lazy

_WHERE = {  # name -> the submodule that defines it
    "BACKENDS": "base", "Backend": "base", "BackendOptions": "base", "Completion": "base", "EffectiveParams": "base",
    "GenerationRequest": "base", "GenerationResult": "base", "check_backend": "base", "generation_settings": "base",
    "get_backend": "base",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _WHERE, name, globals())
