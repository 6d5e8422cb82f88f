"""``evalgate store migrate``: a store copied into a new one (a file to a PostgreSQL server, or back to a local file),
its access log checked, without writing to it, before anything is written, and checked again in the copy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalgate.access.log import append, entry, inspect, verify
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.store import Store
from evalgate.store.copy import copy_tables
from evalgate.store.db import location_of, open_database
from evalgate.store.dialect import is_server_url

MIGRATE = "store-migrate"
"""The purpose of the access-log row a copy made under ``accept_broken_chain`` logs on the target."""
BROKEN_CHAIN_ACCEPTED = "broken-chain-accepted"
"""Its outcome (the gate's own word for a broken chain it was told to accept, ``gate.reads``)."""
STORE_SPLIT = "*"
"""The split that row names: the whole store's log, not one split."""


def problem(check: dict[str, Any]) -> str | None:
    """What is wrong with a log ``inspect`` or ``verify`` checked (the first bad row, else the signed head), or
    None where it holds."""
    if check["ok"]:
        return None
    if check["first_bad_seq"] is not None:
        return f"the hash chain is broken at row {check['first_bad_seq']} ({check['reason']})"
    return f"the signed head does not hold: {check['signature']['reason']}"


def migrate_store(source: Store, target: str, actor: str, accept_broken_chain: str | None = None,
                  expect_head: tuple[int, str] | None = None) -> dict[str, Any]:
    """Copy every row of ``source`` into the new store ``target`` (``evalgate.store.copy.copy_tables``), after
    checking ``source``'s access log without writing to it (``evalgate.access.log.inspect``: hash chain, the head
    last verified, ``expect_head``, the newest signed head against this environment's signing key); then verify the
    copy the same way (``verify``, which records its result in the copy).

    Args:
        source: the store to copy (its lock is held while it is checked and copied; it is not changed).
        target: a ``postgresql://`` URL (an empty database or schema: migrated first) or a file path (a new file,
            or one holding an empty store).
        actor: who copies (named in the row an accepted broken chain logs).
        accept_broken_chain: a reason to copy a store whose log does not hold. The copy then logs one row on the
            target (split ``*``, purpose ``store-migrate``, outcome ``broken-chain-accepted``) naming the source,
            what is broken, who copied and the reason, and stays marked broken as its source is.
        expect_head: ``(seq, row_hash)`` that the source's log must hold (a head pinned outside the store).

    Returns:
        ``{"from", "to", "rows": {table: n}, "before": inspect's result on the source, "after": verify's result on
        the copy, "accepted_broken_chain": the reason where the source's log did not hold, else None,
        "problem": what did not hold, else None}``.

    Raises:
        RefusedByPolicy: the source's log does not hold and no ``accept_broken_chain`` reason is given (exit 2;
            the target is not opened, nothing is written).
        BadInput: ``target`` is the source itself, cannot be used, holds rows or applied other migrations (nothing
            is copied; a file this call created is removed).
    """
    if (where := location_of(target)) == source.location:
        raise BadInput(f"--to {where} is the store being copied; name a new file, or another server, database or "
                       "schema")
    created = [] if is_server_url(target) or Path(target).exists() else \
        [Path(target), Path(f"{target}.wal"), Path(f"{target}.lock")]
    with source.session():
        before = inspect(source, expect_head)
        wrong = problem(before)
        if wrong and not accept_broken_chain:
            raise RefusedByPolicy(f"not copying {source.location}: its access log does not hold: {wrong}. A copy "
                                  "would carry the damage into the new store as if it were intact; find out who "
                                  "changed the store ('evalgate audit verify'), or copy it anyway with "
                                  "--accept-broken-chain REASON, which is logged in the new store's access log. "
                                  "Nothing was written")
        try:
            copy = Store(open_database(target), clock=source.clock)
            rows = copy_tables(source.db, copy.db)
        except BaseException:
            for leftover in created:
                leftover.unlink(missing_ok=True)
            raise
    after = verify(copy)
    if wrong and accept_broken_chain:
        append(copy, entry(actor=actor, split=STORE_SPLIT, tier="-", purpose=MIGRATE, outcome=BROKEN_CHAIN_ACCEPTED,
                           detail=f"copied from {source.location} by {actor} (pid {os.getpid()}): its access log "
                                  f"does not hold: {wrong}; accepted: {accept_broken_chain}"))
    return {"from": source.location, "to": copy.location, "rows": rows, "before": before, "after": after,
            "accepted_broken_chain": accept_broken_chain if wrong else None, "problem": wrong}
