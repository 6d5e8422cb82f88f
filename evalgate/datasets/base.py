"""The contract of a benchmark importer (one ``Dataset`` per module of ``evalgate/datasets/``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.core.errors import BadInput

if TYPE_CHECKING:
    from evalgate.store import AccessLogRepo

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

    def load(self, source: Path | None = None) -> tuple[Items, dict[str, Any]]:
        """The benchmark's items and the provenance its splits record (source, license, the file's name and
        sha256); nothing is written.

        Args:
            source: the benchmark's file; default ``default_source`` where there is one.

        Raises:
            BadInput: no ``source`` where one is required, or a bad file.
        """
        if source is None:
            if self.default_source is None:
                raise BadInput(f"{self.name}: pass --from PATH to the dataset's file (nothing is downloaded)")
            source = self.default_source()
        items, raw = self.read(Path(source))
        return items, {**self.provenance, "file": Path(source).name, "file_sha256": hashlib.sha256(raw).hexdigest()}

    def import_splits(self, source: Path | None = None, directory: Path | None = None, *,
                      store: AccessLogRepo) -> list[Path]:
        """Import as four tiered splits ``<name>-smoke|dev|public|private`` (``load``, then
        ``splits.import_tiered``).

        Args:
            source: the benchmark's file; default ``default_source`` where there is one.
            directory: splits directory (default the store's environment's).
            store: where the additions are logged (``splits.import_tiered``; ``Workspace.store``).

        Returns:
            The four manifest paths.

        Raises:
            BadInput: no ``source`` where one is required, or a bad file.
        """
        from evalgate.splits.tiering import import_tiered

        items, provenance = self.load(source)
        return import_tiered(self.name, items, provenance, directory, store=store)
