"""Finding split manifests: load one by name, list every one (strict), or scan (the loadable ones beside the
errors, for display)."""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import ValidationError

from evalgate.core.errors import BadInput
from evalgate.core.fileio import read_text
from evalgate.core.userfiles import format_validation_error, load_yaml_mapping
from evalgate.splits.manifest import Manifest, splits_dir


def load_manifest(name: str, directory: Path | None = None) -> Manifest:
    """Load ``<splits dir>/<name>.yaml``.

    Raises:
        BadInput: unknown split (listing the known ones) or invalid manifest.
    """
    d = directory or splits_dir()
    path = d / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []
        hint = f"known splits: {', '.join(known)}" if known else "no splits yet: run 'evalgate splits import humaneval'"
        raise BadInput(f"unknown split {name!r} (no {path}); {hint}")
    return _parse(path, read_text(path))


@functools.lru_cache(maxsize=256)
def _parse(path: Path, text: str) -> Manifest:
    """The manifest in ``text`` (the file ``path``), parsed once per text: a logged read loads its split's manifest
    several times (check, content owner, log row), ~3 ms of YAML each. The file is read on every load, so an edit
    applies at once; a ``Manifest`` is frozen, so the one object can be shared; errors are not kept."""
    try:
        return Manifest.model_validate(load_yaml_mapping(path, text, "split manifest"))
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, Manifest, "split manifest")) from e


def list_manifests(directory: Path | None = None) -> list[Manifest]:
    """Every split manifest in ``directory`` (default ``splits_dir()``), sorted by name.

    Raises:
        BadInput: a manifest does not load (naming its file and line). Strict on purpose: callers that check
            content across splits (a private split re-added under another name shares its budget) must not miss
            one. ``scan_manifests`` lists the loadable ones beside the errors, for display.
    """
    good, bad = scan_manifests(directory)
    if len(bad) == 1:
        raise bad[0]
    if bad:  # every broken file named, so fixing one does not reveal the next only on the next run
        raise BadInput(f"{len(bad)} split manifests do not load:\n  " + "\n  ".join(e.message for e in bad))
    return good


def scan_manifests(directory: Path | None = None) -> tuple[list[Manifest], list[BadInput]]:
    """The manifests that load, sorted by name, and one ``BadInput`` per manifest that does not (for ``splits
    list``: one broken file must not hide every other split)."""
    d = directory or splits_dir()
    good: list[Manifest] = []
    bad: list[BadInput] = []
    for p in sorted(d.glob("*.yaml")) if d.is_dir() else []:
        try:
            good.append(load_manifest(p.stem, d))
        except BadInput as e:
            bad.append(e)
    return good, bad
