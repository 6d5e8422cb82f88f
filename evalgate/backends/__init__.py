"""Generation backends behind one contract (``base.Backend``), registered by name (``base.BACKENDS``, a
``BackendEntry`` each) and imported lazily."""

from evalgate.backends.base import (
    BACKENDS,
    Backend,
    BackendOptions,
    Completion,
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    check_backend,
    generation_settings,
    get_backend,
)

__all__ = ["BACKENDS", "Backend", "BackendOptions", "Completion", "EffectiveParams", "GenerationRequest",
           "GenerationResult", "check_backend", "generation_settings", "get_backend"]
