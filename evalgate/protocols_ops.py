"""Protocol operations that touch the store: freezing a protocol and recording ``name@version -> hash``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.errors import BadInput
from evalgate.fileio import atomic_write
from evalgate.protocol import (
    LoadedProtocol,
    diff_resolved,
    format_diff,
    load_protocol,
    lock_document,
    lock_problem,
    verify,
)
from evalgate.store import ProtocolRepo, Store


def freeze(path: str | Path, store: ProtocolRepo | None = None) -> dict[str, Any]:
    """Hash a protocol, record ``name@version -> sha256`` in the store, and write ``<path>.lock`` atomically.

    Re-freezing unchanged content is a no-op that keeps the first ``frozen_at``; a lock whose fields disagree
    (``lock_problem``, e.g. an edited ``resolved``) is rewritten from the protocol file. Changed content under the
    ``name@version`` of the existing lock is refused from the lock alone, before the store is touched: the lock is
    committed with the protocol, so a fresh store (a new CI runner, a colleague's machine) cannot re-freeze
    ``my-protocol@1`` with other content either.

    Returns:
        The lock document.

    Raises:
        BadInput: invalid protocol, or changed content under a version the lock file or the store already holds
            (bump the version).
    """
    lp = load_protocol(path)
    old = _consistent_lock(lp.lock_path)
    if old is not None and (old.get("name"), old.get("version")) == (lp.spec.name, lp.spec.version) \
            and old["sha256"] != lp.sha256:
        rows = diff_resolved(old["resolved"], lp.resolved)
        raise BadInput(
            f"protocol {lp.ref} is already locked in {lp.lock_path} with hash {old['sha256'][:12]}; this content "
            f"hashes to {lp.sha256[:12]} ({len(rows)} field(s) changed). Bump 'version' in the protocol file and "
            "freeze again, or revert the change: a version names one content for good.\n"
            + format_diff(rows, "locked", "now"))
    (store or Store()).record_protocol(lp.spec.name, lp.spec.version, lp.sha256, lp.resolved)
    if old is not None and old["sha256"] == lp.sha256:
        return old
    doc = lock_document(lp)
    atomic_write(lp.lock_path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return doc


def verify_frozen(path: str | Path, store: ProtocolRepo | None = None) -> LoadedProtocol:
    """What ``protocol verify`` checks: everything ``run`` and ``freeze`` check before they accept a protocol.

    The file must load (schema, scorer), match its lock (``protocol.verify``), and its ``name@version`` must not be
    recorded in the store with another hash (the store's record, which ``freeze`` and ``run`` enforce through
    ``Store.record_protocol``; a lock copied from another machine's store can agree with the file and still be
    refused here). Nothing is written: a version the store has not seen is left for ``freeze`` or ``run`` to record.

    Returns:
        The loaded protocol.

    Raises:
        BadInput: invalid protocol, no or inconsistent lock, or ``name@version`` recorded with another hash.
        ProtocolDrift: the content no longer matches its lock.
    """
    lp = load_protocol(path)
    verify(lp)
    store = store or Store()
    recorded = store.protocol_hash(lp.spec.name, lp.spec.version)
    if recorded is not None and recorded != lp.sha256:
        raise BadInput(
            f"protocol {lp.ref} ({lp.path}) matches its lock, but the store {store.path} "
            f"recorded {lp.ref} with hash {recorded[:12]} and this content hashes to {lp.sha256[:12]}, so 'freeze' "
            "and 'run' refuse it here. Bump 'version' in the protocol file and freeze again (or restore the content "
            "frozen here)")
    return lp


def _consistent_lock(path: Path) -> dict[str, Any] | None:
    """The lock document at ``path`` if it exists, parses and agrees with itself (``lock_problem``), else None."""
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) and lock_problem(doc) is None else None
    except (json.JSONDecodeError, KeyError, AttributeError, TypeError):
        return None
