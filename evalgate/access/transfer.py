"""``evalgate store migrate``: a store copied into a new one (a file to a PostgreSQL server, or back to a local file),
its access log checked before the copy and again in the copy."""

from __future__ import annotations

from typing import Any

from evalgate.access.log import verify
from evalgate.core.errors import RefusedByPolicy
from evalgate.store import Store
from evalgate.store.copy import copy_tables
from evalgate.store.db import open_database


def migrate_store(source: Store, target: str, allow_broken: bool = False) -> dict[str, Any]:
    """Copy every row of ``source`` into the new store ``target`` (a ``postgresql://`` URL or a file path; created
    and migrated, it must hold no rows), after checking ``source``'s access log: hash chain and signed head
    (``evalgate.access.log.verify``, with the signing key of this environment). The copy is checked the same way.

    Args:
        source: the store to copy (its lock is held while it is checked and copied).
        target: where to copy it.
        allow_broken: copy a store whose log does not verify (the copy then fails the same check, as it should).

    Returns:
        ``{"from", "to", "rows": {table: n}, "before": verify result, "after": verify result}``.

    Raises:
        RefusedByPolicy: the source's log does not verify and ``allow_broken`` is off (nothing is written).
        BadInput: the target cannot be used, holds rows, or applied other migrations.
    """
    with source.session():
        before = verify(source)
        if not before["ok"] and not allow_broken:
            why = before["reason"] or before["signature"].get("reason") or "the signed head does not verify"
            raise RefusedByPolicy(f"the access log of {source.location} does not verify (first bad row "
                                  f"{before['first_bad_seq']}: {why}); nothing was copied. Look with 'evalgate "
                                  "audit verify'; to copy it as it is, pass --allow-broken (the copy fails the "
                                  "same check)")
        db = open_database(target)
        rows = copy_tables(source.db, db)
    after = verify(Store(db))
    return {"from": source.location, "to": db.location, "rows": rows, "before": before, "after": after}
