"""Benchmark importers: one module per benchmark, one registry that ``evalgate splits import`` reads.

Each importer reads the benchmark's own file (nothing is downloaded), turns its records into items with a unique
``id`` and the gold answer in the field its scorer reads, and writes the four tiered splits
``<name>-smoke|dev|public|private`` with ``splits.import_tiered``.

To add a benchmark: write ``evalgate/datasets/<name>.py`` defining ``DATASET = Dataset(...)`` (``datasets/base.py``)
and add the module to ``_MODULES`` below.
"""

from __future__ import annotations

from pathlib import Path

from evalgate.datasets import gsm8k, humaneval, math500
from evalgate.datasets.base import Dataset, Items
from evalgate.errors import BadInput

__all__ = ["Dataset", "Items", "get", "import_dataset", "known"]
_MODULES = (humaneval, gsm8k, math500)


def _registry() -> dict[str, Dataset]:
    return {m.DATASET.name: m.DATASET for m in _MODULES}


def known() -> list[str]:
    """Names of the registered benchmarks, sorted."""
    return sorted(_registry())


def get(name: str) -> Dataset:
    """The registered benchmark called ``name``.

    Raises:
        BadInput: unknown name (the message lists the known ones).
    """
    reg = _registry()
    if name not in reg:
        raise BadInput(f"unknown dataset {name!r}; known: {', '.join(sorted(reg))}")
    return reg[name]


def import_dataset(name: str, source: Path | None = None, directory: Path | None = None) -> list[Path]:
    """Import a registered benchmark as four tiered splits ``<name>-smoke|dev|public|private``.

    Args:
        name: a registered name (``known()``).
        source: the benchmark's file; default its ``default_source`` where it has one.
        directory: splits directory (default ``splits_dir()``).

    Returns:
        The four manifest paths.

    Raises:
        BadInput: unknown name, no ``source`` where one is required, or a bad file.
    """
    return get(name).import_splits(source, directory)
