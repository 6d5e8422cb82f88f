"""Generation backends behind one contract (``base.Backend``), chosen by name and imported lazily."""

from evalgate.backends.base import (
    BACKENDS,
    Backend,
    Completion,
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    get_backend,
)

__all__ = ["BACKENDS", "Backend", "Completion", "EffectiveParams", "GenerationRequest", "GenerationResult",
           "get_backend"]
