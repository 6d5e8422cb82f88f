"""A split's data file: JSONL parsing and dumping, Fernet encryption of the private tier's file, and reading the
items back (checked against the manifest's hashes).

``read_items`` is the library's reader for the tiers whose items may be looked at freely; ``read_unlogged`` reads
every tier without a log row, for ``SplitManager`` (which logs) and comparisons that show nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalgate.access import log as accesslog
from evalgate.core.enums import Tier
from evalgate.core.environment import Environment, or_from_env
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.core.fileio import iter_jsonl
from evalgate.keys.sealing import SEALED_TIERS, load_key
from evalgate.splits.manifest import LIBRARY_READ, Manifest, actor_name
from evalgate.store import AccessLogRepo, handed_down


def fernet(env: Environment, create: bool = False):  # noqa: ANN201 - cryptography type stays lazy
    """The ``cryptography.fernet.Fernet`` of ``env``'s private split key (``sealing.load_key``; ``create``: make the
    key when missing).

    Raises:
        BadInput: the key is not a valid Fernet key.
        RefusedByPolicy: no key and ``create`` is False (``sealing.load_key``).
    """
    from cryptography.fernet import Fernet

    try:
        return Fernet(load_key(create, env=env))
    except ValueError as e:
        raise BadInput(f"the private split key is not a valid Fernet key ({e}); check EVALGATE_PRIVATE_KEY") from e


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data``, as 64 hex digits (a manifest's ``sha256`` and ``content_sha256``)."""
    return hashlib.sha256(data).hexdigest()


def parse_jsonl(data: bytes, where: str) -> list[dict[str, Any]]:
    """Parse JSONL records, each an object with a unique ``id``: a non-empty string, or an integer, which becomes
    its decimal text (``1`` -> ``"1"``, as user data often numbers its items) so every id in evalgate is a string.

    Raises:
        BadInput: naming the line of the first bad record (an id of another type, e.g. ``1.5`` or ``true``; ids
            that are equal as text, e.g. ``1`` and ``"1"``, are duplicates).
    """
    items, seen = [], set()
    for i, rec in iter_jsonl(data, where):
        if not isinstance(rec, dict):
            raise BadInput(f"{where}:{i}: each record must be a JSON object with a non-empty string or integer 'id'")
        if isinstance(rec.get("id"), int) and not isinstance(rec["id"], bool):
            rec["id"] = str(rec["id"])
        if not isinstance(rec.get("id"), str) or not rec["id"]:
            got = "no 'id'" if "id" not in rec else f"'id' {json.dumps(rec['id'])} ({type(rec['id']).__name__})"
            raise BadInput(f"{where}:{i}: each record must be a JSON object with a non-empty string or integer "
                           f"'id'; this one has {got}")
        if rec["id"] in seen:
            raise BadInput(f"{where}:{i}: duplicate id {rec['id']!r}; ids must be unique within a split")
        seen.add(rec["id"])
        items.append(rec)
    return items


def dump_jsonl(items: Iterable[dict[str, Any]]) -> bytes:
    """``items`` as UTF-8 JSONL, keys sorted, one object a line: the plaintext a split's ``content_sha256`` hashes."""
    return "".join(json.dumps(it, ensure_ascii=False, sort_keys=True) + "\n" for it in items).encode("utf-8")


def read_items(manifest: Manifest, directory: Path | None = None, *, store: AccessLogRepo | None = None
               ) -> list[dict[str, Any]]:
    """Read and check a split's items, for the tiers whose items may be looked at freely (smoke, dev, public).
    Not logged by itself: reads that count go through ``SplitManager`` (``open``, or ``check``/``read``/``log_read``).

    Items of the private and human-audit tiers are never returned here (a library call must not hand out
    private plaintext without a log row): they are read through ``SplitManager``, under the tier's policy, logged.
    The refusal is logged in ``store`` (``Workspace.store``; without one, deprecated for one release, the store of
    the process's ``EVALGATE_*`` variables, with a ``DeprecationWarning``). In-process Python cannot be
    sandboxed, so this is a rule of the library, not a wall: whoever holds the key file can decrypt the data file
    directly; the key file is the boundary (docs/SECURITY.md).

    Raises:
        BadInput: data file missing or changed since the manifest was written (bytes or decrypted content).
        RefusedByPolicy: a private or human-audit split (logged as refused); encrypted data and no key.
    """
    if manifest.tier in SEALED_TIERS:
        why = (f"split {manifest.name} is tier {manifest.tier}: its items are read only through SplitManager under "
               "the tier's policy (logged); " + ("the private tier is read by 'evalgate gate'" if
                                                 manifest.tier == Tier.PRIVATE else "raters get them with "
                                                 f"'evalgate splits export-audit {manifest.name}'"))
        store = handed_down(store, "read_items")
        accesslog.append(store, accesslog.entry(actor=actor_name(env=store.env), split=manifest.name,
                                                  tier=manifest.tier,
                                                  purpose=LIBRARY_READ, outcome="refused", detail=why))
        raise RefusedByPolicy(why)
    return read_unlogged(manifest, directory, env=store.env if store is not None else None)


def read_unlogged(manifest: Manifest, directory: Path | None = None, *, env: Environment | None = None
                  ) -> list[dict[str, Any]]:
    """``read_items`` for every tier, unlogged: for ``SplitManager`` (which logs) and comparisons that show nothing
    (``twins.private_twin``, the plaintext scan). ``env``: whose splits directory (unless ``directory`` is given)
    and key (default the process's, ``or_from_env``).

    Raises:
        BadInput: data file missing or changed since the manifest was written (bytes or decrypted content).
        RefusedByPolicy: encrypted data and no key, or a key that does not decrypt it.
    """
    env = or_from_env(env)
    d = directory or env.splits
    path = d / manifest.data
    if not path.is_file():
        raise BadInput(f"split {manifest.name}: data file {path} is missing; re-import the split")
    stored = path.read_bytes()
    if sha256_hex(stored) != manifest.sha256:
        raise BadInput(f"split {manifest.name}: data file {path} changed since its manifest was written (sha256 "
                       f"{sha256_hex(stored)[:12]} != {manifest.sha256[:12]}); restore it or re-import the split")
    if manifest.encrypted:
        from cryptography.fernet import InvalidToken

        try:
            stored = fernet(env).decrypt(stored)
        except InvalidToken as e:
            raise RefusedByPolicy(f"split {manifest.name}: the private key does not decrypt {path}; "
                                  "use the key the split was imported with") from e
    if sha256_hex(stored) != manifest.content_sha256:  # the split's identity: a manifest may not claim another's
        raise BadInput(f"split {manifest.name}: the content of {path} (sha256 {sha256_hex(stored)[:12]}) is not the "
                       f"manifest's content_sha256 {manifest.content_sha256[:12]}; restore the manifest or re-import "
                       "the split")
    return parse_jsonl(stored, str(path))
