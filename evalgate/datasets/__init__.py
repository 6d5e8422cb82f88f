"""Benchmark importers: one module per benchmark, one registry that ``evalgate splits import`` reads.

Each importer reads the benchmark's own file (nothing is downloaded), turns its records into items with a unique
``id`` and the gold answer in the field its scorer reads, and writes the four tiered splits
``<name>-smoke|dev|public|private`` with ``splits.import_tiered``.

To add a benchmark: write ``evalgate/datasets/<name>.py`` defining ``DATASET = Dataset(...)`` and add the module to
``_MODULES`` below.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.errors import BadInput

Items = list[dict[str, Any]]


@dataclass(frozen=True)
class Dataset:
    """One importable benchmark.

    Attributes:
        name: the name ``splits import`` takes; also the prefix of the four split names.
        description: one line for help and listings (what it is, who published it).
        read: ``read(path) -> (items, raw file bytes)``; raises ``BadInput`` naming the file and line of a bad
            record.
        provenance: recorded in every split's manifest (source, license, how the gold answer was parsed).
        default_source: where the file is when ``--from`` is not given (e.g. an installed wheel), or None when
            ``--from`` is required.
    """

    name: str
    description: str
    read: Callable[[Path], tuple[Items, bytes]]
    provenance: dict[str, Any] = field(default_factory=dict)
    default_source: Callable[[], Path] | None = None


def _registry() -> dict[str, Dataset]:
    from evalgate.datasets import gsm8k, humaneval, math500

    return {d.name: d for d in (humaneval.DATASET, gsm8k.DATASET, math500.DATASET)}


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
    from evalgate.splits import import_tiered

    ds = get(name)
    if source is None:
        if ds.default_source is None:
            raise BadInput(f"{name}: pass --from PATH to the dataset's file (nothing is downloaded)")
        source = ds.default_source()
    items, raw = ds.read(Path(source))
    provenance = {**ds.provenance, "file": Path(source).name, "file_sha256": hashlib.sha256(raw).hexdigest()}
    return import_tiered(name, items, provenance, directory)
