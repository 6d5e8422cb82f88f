"""The body of a sweep unit's Ray actor (``ray_cluster``): all that a Ray worker process imports of evalgate before
its engine (the backends' registry and request types: no store, runner or scorer)."""

from __future__ import annotations

import os
from typing import Any

from evalgate.backends.base import BackendOptions, GenerationRequest, GenerationResult, get_backend


class GenerationWorker:
    """The body of a unit's Ray actor: loads the engine on first use and generates the chunks it is sent. It holds
    the prompts only in memory and writes nothing."""

    def __init__(self, backend: str, model_dir: str, options: BackendOptions):
        self.spec = (backend, model_dir, options)
        self.engine: Any = None

    def where(self) -> tuple[str, int]:
        """(Ray node id, process id) of this worker."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def generate(self, requests: list[GenerationRequest]) -> tuple[list[GenerationResult], dict[str, Any]]:
        """Completions for ``requests`` and the engine's ``info()``."""
        if self.engine is None:
            name, model_dir, options = self.spec
            self.engine = get_backend(name, model_dir, options)
        return self.engine.generate(requests), self.engine.info()
