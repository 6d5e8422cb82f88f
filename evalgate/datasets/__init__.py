"""Benchmark importers: one module per benchmark, one registry (``DATASETS``) that ``evalgate splits import`` reads.

Each importer reads the benchmark's own file (nothing is downloaded), turns its records into items with a unique
``id`` and the gold answer in the field its scorer reads, and writes the four tiered splits
``<name>-smoke|dev|public|private`` with ``splits.import_tiered``.

To add a benchmark: one module defining ``DATASET = Dataset(...)`` (``datasets/base.py``), and one registration:
``DATASETS.register(name, "module:DATASET")`` below, or, outside evalgate, an entry point in the group
``evalgate.datasets`` naming a ``Dataset``. Entries are ``"module:attr"`` references, so listing the names imports
no importer.
The ``*-pref`` entries are preference pairs built from the benchmarks (``datasets/preference.py``), for
evaluating reward models; ``rewardbench`` reads pairs in RewardBench's format (``datasets/rewardbench.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.core.errors import BadInput
from evalgate.core.registry import Registry
from evalgate.datasets.base import Dataset, Items

if TYPE_CHECKING:
    from evalgate.store import AccessLogRepo

__all__ = ["DATASETS", "Dataset", "Items", "get", "import_dataset", "known"]

DATASETS: Registry[Dataset] = Registry("dataset", Dataset, entry_point_group="evalgate.datasets")
"""Benchmarks by ``splits import`` name; plugins through the ``evalgate.datasets`` entry-point group (each names a
``Dataset`` whose ``name`` is the entry point's name)."""

DATASETS.register("humaneval", "evalgate.datasets.humaneval:DATASET")
DATASETS.register("gsm8k", "evalgate.datasets.gsm8k:DATASET")
DATASETS.register("math500", "evalgate.datasets.math500:DATASET")
DATASETS.register("mmlu-pro", "evalgate.datasets.mmlu_pro:DATASET")
DATASETS.register("ifeval", "evalgate.datasets.ifeval:DATASET")
DATASETS.register("xstest-safe", "evalgate.datasets.xstest:SAFE")
DATASETS.register("xstest-unsafe", "evalgate.datasets.xstest:UNSAFE")
DATASETS.register("gsm8k-pref", "evalgate.datasets.preference:GSM8K_PREF")
DATASETS.register("math500-pref", "evalgate.datasets.preference:MATH500_PREF")
DATASETS.register("humaneval-pref", "evalgate.datasets.preference:HUMANEVAL_PREF")
DATASETS.register("rewardbench", "evalgate.datasets.rewardbench:DATASET")


def known() -> list[str]:
    """Names of the registered benchmarks (plugins' included), sorted; imports no importer."""
    return DATASETS.names()


def get(name: str) -> Dataset:
    """The registered benchmark called ``name``.

    Raises:
        BadInput: unknown name (the message lists the known ones); an entry whose ``Dataset.name`` is not the name
            it is registered under (its splits would be named after the other).
    """
    dataset = DATASETS.require(name)
    if dataset.name != name:
        raise BadInput(f"dataset {name!r} ({DATASETS.origin(name)}) is a Dataset named {dataset.name!r}; register it "
                       "under its own name")
    return dataset


def import_dataset(name: str, source: Path | None = None, directory: Path | None = None,
                   *, store: AccessLogRepo) -> list[Path]:
    """Import a registered benchmark as four tiered splits ``<name>-smoke|dev|public|private``.

    Args:
        name: a registered name (``known()``).
        source: the benchmark's file; default its ``default_source`` where it has one.
        directory: splits directory (default the store's environment's).
        store: where the additions are logged (``Workspace.store``); its
            environment's key encrypts the private split.

    Returns:
        The four manifest paths.

    Raises:
        BadInput: unknown name, no ``source`` where one is required, or a bad file.
    """
    return get(name).import_splits(source, directory, store=store)
