"""Protocol operations that touch the store: freezing a protocol and recording ``name@version -> hash``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write
from evalgate.protocol.spec import (
    LoadedProtocol,
    ProtocolLock,
    diff_resolved,
    format_diff,
    load_protocol,
    lock_document,
    lock_problem,
    lock_versions,
    verify,
)
from evalgate.store import ProtocolRepo, handed_down


def freeze(path: str | Path, store: ProtocolRepo | Callable[[], ProtocolRepo] | None = None) -> ProtocolLock:
    """Hash a protocol, record ``name@version -> sha256`` in the store, and write ``<path>.lock`` atomically.

    The lock keeps every version it ever froze (``versions``, appended to): changed content under any
    ``name@version`` the lock holds is refused from the lock alone, before the store is touched. The lock is
    committed with the protocol, so a fresh store (a new CI runner, a colleague's machine) cannot re-freeze
    ``my-protocol@1`` with other content either, even after ``@2`` was frozen over it. Re-freezing unchanged content
    is a no-op that keeps the lock as it is (a format-1 lock, written before ``versions``, is rewritten in format 2
    when a new version is frozen); a lock whose fields disagree (``lock_problem``, e.g. an edited ``resolved``) is
    rewritten from the protocol file, keeping the well-formed entries of its ``versions``.

    Args:
        path: the protocol file.
        store: where ``name@version`` is recorded: a store, or a function that opens one (called only once the
            protocol and its lock allow the freeze, so a refused freeze opens, and creates, no store):
            ``Workspace.store``, or ``Store`` itself; without one (deprecated, one release: a ``DeprecationWarning``)
            the store of the process's ``EVALGATE_*`` variables.

    Returns:
        The lock (``ProtocolLock``; its ``as_dict()`` the ``.lock`` file's document).

    Raises:
        BadInput: invalid protocol, or changed content under a version the lock file or the store already holds
            (bump the version to one never used).
    """
    lp = load_protocol(path)
    old, versions = _previous_lock(lp.lock_path)
    used = next((e for e in versions if (e["name"], e["version"]) == (lp.spec.name, lp.spec.version)
                 and e["sha256"] != lp.sha256), None)
    if used is not None:
        raise BadInput(_used_version_message(lp, used, old, versions))
    repo = store() if callable(store) else handed_down(store, "freeze")
    repo.record_protocol(lp.spec.name, lp.spec.version, lp.sha256, lp.resolved)
    if old is not None and old["sha256"] == lp.sha256:
        return ProtocolLock.of(old)
    doc = lock_document(lp, versions)
    atomic_write(lp.lock_path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return ProtocolLock.of(doc)


def _used_version_message(lp: LoadedProtocol, used: dict[str, str], old: dict[str, Any] | None,
                          versions: list[dict[str, str]]) -> str:
    """Why freezing ``lp`` is refused: its ``name@version`` is in the lock with ``used['sha256']``; the field-level
    diff when that version is the lock's current one (its ``resolved`` content is kept only for that one)."""
    current = old is not None and (old["name"], old["version"]) == (lp.spec.name, lp.spec.version)
    where = "is already locked in" if current else "was frozen before in"
    names = [e["version"] for e in versions if e["name"] == lp.spec.name]
    unused = _next_unused(names)
    msg = (f"protocol {lp.ref} {where} {lp.lock_path} with hash {used['sha256'][:12]} (frozen {used['frozen_at']}; "
           f"the lock keeps every version it froze: {', '.join(names)}); this content hashes to {lp.sha256[:12]}. "
           f"Bump 'version' in the protocol file to one never used (e.g. {unused!r}) and freeze again, or revert "
           "the change: a version names one content for good.")
    if current and old is not None:
        rows = diff_resolved(old["resolved"], lp.resolved)
        msg += f" {len(rows)} field(s) changed:\n" + format_diff(rows, "locked", "now")
    return msg


def _next_unused(versions: list[str]) -> str:
    """A version name not in ``versions``: one above the highest integer version, else ``<last>-2``."""
    ints = [int(v) for v in versions if v.isdigit()]
    return str(max(ints) + 1) if ints else f"{versions[-1]}-2"


def verify_frozen(path: str | Path, store: ProtocolRepo) -> LoadedProtocol:
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
    recorded = store.protocol_hash(lp.spec.name, lp.spec.version)
    if recorded is not None and recorded != lp.sha256:
        raise BadInput(
            f"protocol {lp.ref} ({lp.path}) matches its lock, but the store {store.path} "
            f"recorded {lp.ref} with hash {recorded[:12]} and this content hashes to {lp.sha256[:12]}, so 'freeze' "
            "and 'run' refuse it here. Bump 'version' in the protocol file and freeze again (or restore the content "
            "frozen here)")
    return lp


def _previous_lock(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """The lock document at ``path`` if it exists, parses and agrees with itself (``lock_problem``), else None; and
    the versions it froze (``lock_versions``; of an inconsistent lock, the well-formed ``versions`` entries)."""
    if not path.is_file():
        return None, []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None, []
    if not isinstance(doc, dict):
        return None, []
    try:
        consistent = lock_problem(doc) is None
    except (KeyError, AttributeError, TypeError):
        consistent = False
    if consistent:
        return doc, lock_versions(doc)
    return None, lock_versions(doc) if "versions" in doc else []
