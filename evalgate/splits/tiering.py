"""Importing a benchmark as tiered splits: a deterministic partition of its item ids into smoke, dev, public and
private (``partition``), and ``import_tiered``, which writes (``write_tiered``) and logs (``log_imported``) the four
splits (``evalgate splits import``; ``evalgate init`` writes first and logs once the files are in place)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from evalgate.access import log as accesslog
from evalgate.core.enums import Tier
from evalgate.splits.data import read_unlogged
from evalgate.splits.discovery import load_manifest
from evalgate.splits.manifest import ADD_PURPOSE, actor_name
from evalgate.splits.twins import refuse_private_copy, remember_private
from evalgate.splits.write import write_split
from evalgate.store import AccessLogRepo

PARTITION_SALT = "evalgate-partition-v1"
SMOKE_SIZE = 8


def partition(ids: list[str], smoke_size: int = SMOKE_SIZE, human_audit: int = 0) -> dict[str, list[str]]:
    """Deterministic tier partition of item ids.

    Ids are ordered by ``sha256(PARTITION_SALT + ":" + id)``; the first ``smoke_size`` form ``smoke``, the next
    ``human_audit`` (when > 0) ``human-audit``, and the rest are dealt round-robin to ``dev``, ``public``,
    ``private`` (sizes differ by at most one). With ``human_audit=0`` the partition is the one it always was.

    Returns:
        ``{"smoke": [...], "dev": [...], "public": [...], "private": [...]}`` (and ``"human-audit"`` when asked),
        each in hash order.
    """
    order = sorted(ids, key=lambda i: hashlib.sha256(f"{PARTITION_SALT}:{i}".encode()).hexdigest())
    out: dict[str, list[str]] = {"smoke": order[:smoke_size], "dev": [], "public": [], "private": []}
    if human_audit > 0:
        out["human-audit"] = order[smoke_size:smoke_size + human_audit]
    for j, i in enumerate(order[smoke_size + max(human_audit, 0):]):
        out[("dev", "public", "private")[j % 3]].append(i)
    return out


def import_tiered(prefix: str, items: list[dict[str, Any]], provenance: dict[str, Any],
                  directory: Path | None = None, smoke_size: int = SMOKE_SIZE, *, store: AccessLogRepo) -> list[Path]:
    """Split ``items`` (each with an ``id``) into ``<prefix>-smoke|dev|public|private`` with ``partition``, and log
    each addition (``write_tiered``, then ``log_imported``) in ``store`` (a ``Store`` is one: ``Workspace.store``),
    whose environment's key and actor are used."""
    paths = write_tiered(prefix, items, provenance, directory, smoke_size, store=store)
    log_imported(paths, store)
    return paths


def write_tiered(prefix: str, items: list[dict[str, Any]], provenance: dict[str, Any],
                 directory: Path | None = None, smoke_size: int = SMOKE_SIZE,
                 *, store: AccessLogRepo, human_audit: int = 0) -> list[Path]:
    """Write ``<prefix>-smoke|dev|public|private`` (``partition``, ``write_split``) without logging them: the
    caller logs them with ``log_imported`` once they are where they stay (``evalgate init`` writes into a staging
    folder first).

    Items that repeat another private split are refused before anything is written, as ``splits add`` refuses
    them (``twins.refuse_private_copy``; the refusal is logged in ``store``): a dataset
    plugin or ``evalgate init --from`` given a private split's items would otherwise deal them into the new
    dev and public splits.

    ``human_audit``: items dealt to ``<prefix>-human-audit`` (``partition``) for blind rating; 0: none.

    Returns:
        The manifest paths, in tier order (four, five with a human-audit split).

    Raises:
        RefusedByPolicy: a tier's items repeat a private split other than ``<prefix>-private`` (logged).
    """
    parts = refuse_private_parts(prefix, items, provenance, smoke_size, store=store, human_audit=human_audit)
    audit = f"next {human_audit} human-audit, " if human_audit > 0 else ""
    prov = {**provenance, "partition": f"sha256('{PARTITION_SALT}:' + id) order; first {smoke_size} smoke, {audit}"
                                       "rest round-robin dev/public/private"}
    return [write_split(name, tier, part, prov, directory, env=store.env) for name, (tier, part) in parts.items()]


def refuse_private_parts(prefix: str, items: list[dict[str, Any]], provenance: dict[str, Any],
                         smoke_size: int = SMOKE_SIZE, *, store: AccessLogRepo, human_audit: int = 0
                         ) -> dict[str, tuple[str, list[Any]]]:
    """The tiered parts of ``items`` (split name -> (tier, items), ``partition``), each checked against the private
    splits (``twins.refuse_private_copy``; ``<prefix>-private`` itself excepted, so a reimport works).

    Raises:
        RefusedByPolicy: a part repeats a private split (logged in ``store``).
    """
    by_id = {it["id"]: it for it in items}
    parts = {f"{prefix}-{tier}": (tier, [by_id[i] for i in ids])
             for tier, ids in partition(list(by_id), smoke_size, human_audit).items()}
    source = str(provenance.get("source") or provenance.get("file") or f"the data of {prefix}")
    for name, (tier, part) in parts.items():
        if part:
            refuse_private_copy(name, tier, part, source, store, actor_name(env=store.env))
    return parts


def log_imported(manifests: list[Path], store: AccessLogRepo) -> None:
    """Log the addition of each split whose manifest is in ``manifests`` (outcome ``added``, purpose
    ``ADD_PURPOSE``, the content hash and item count in the detail) and record the private ones' content
    (``twins.remember_private``: keyed fingerprints, so their items stay refused under other names after the
    manifest leaves the disk), all in one transaction.

    Raises:
        BadInput: a private split's data file does not match its manifest (``data.read_unlogged``).
    """
    loaded = [load_manifest(path.stem, path.parent) for path in manifests]
    private = {m.name: read_unlogged(m, path.parent, env=store.env) for m, path in zip(loaded, manifests, strict=True)
               if m.tier == Tier.PRIVATE}
    with store.session(), store.connect():
        accesslog.append_many(store, [accesslog.entry(
            actor=actor_name(env=store.env), split=m.name, tier=m.tier, purpose=ADD_PURPOSE, outcome="added",
            detail=f"imported: sha256 {m.content_sha256[:12]} ({m.count} items)") for m in loaded])
        for name, items in private.items():
            remember_private(store, name, items, "imported")
