"""The access log's hash chain: the row, its hash, appending a row and verifying the chain.

Every read, cached re-read, refusal and data change of a split is one row of ``access_log`` in the store. Each row
carries the sha256 of its predecessor (``prev_hash``) and of itself (``row_hash``), so an edited, deleted or inserted
row breaks every later link and ``verify`` names the first bad one.

Two checks, two costs:

- ``verify`` (``evalgate audit verify``, ``evalgate audit``, every gate report) re-hashes every row: O(rows). When it
  finds the chain broken it records the first bad row in the store, so every later append warns about it too.
- ``append`` checks only what is new since the last verified head (kept in the store's ``access_log_head``): that
  the head row is still there with its hash and content, that no row was deleted or inserted at or before it (the
  row count up to it equals its ``seq``), and the rows added after it. That is O(1) when every writer appends through
  this module, so an append costs the same at 10 rows and at 100,000. It does *not* re-hash older rows: an edit of an
  older row's content (with or without re-hashing it) is seen only by the next full ``verify``.

This module depends on the store only; ``splits`` and ``audit`` both use it (no import cycle).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from evalgate.store import Store

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first row."""

ACCESS_FIELDS = ("seq", "ts", "actor", "ci", "split", "tier", "purpose", "outcome", "cached",
                 "checkpoint_digest", "protocol_hash", "run_id", "detail")
"""The fields a row's hash covers (every column but ``prev_hash`` and ``row_hash``)."""

_CI_VARS = ("GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "CIRCLECI", "JENKINS_URL", "TF_BUILD", "CI")


def ci_marker() -> str | None:
    """Name of the CI system the process runs under (the first of a known set of variables), else None."""
    for var in _CI_VARS:
        if os.environ.get(var, "").lower() not in ("", "0", "false"):
            return var.lower()
    return None


def entry(*, actor: str, split: str, tier: str, purpose: str, outcome: str, cached: bool = False,
          checkpoint_digest: str | None = None, protocol_hash: str | None = None, run_id: str | None = None,
          detail: str | None = None) -> dict[str, Any]:
    """One access-log row before it is chained (``ACCESS_FIELDS`` less ``seq`` and ``ts``; ``ci`` filled in).

    Args:
        actor: who (``--actor``, ``$EVALGATE_ACTOR`` or the OS user).
        split: the split's name.
        tier: its tier.
        purpose: what for (``tuning``, ``release-gate``, ``replace-data`` ...).
        outcome: ``read``, ``override``, ``refused``, ``added``, ``replaced`` ...
        cached: the read was served from the generation cache.
        checkpoint_digest, protocol_hash, run_id: what the read was for, where known.
        detail: free text (the refusal's reason, an override's reason, the content hashes of a change).
    """
    return {"actor": actor, "ci": ci_marker(), "split": split, "tier": tier, "purpose": purpose,
            "outcome": outcome, "cached": bool(cached), "checkpoint_digest": checkpoint_digest,
            "protocol_hash": protocol_hash, "run_id": run_id, "detail": detail}


def row_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """sha256 of ``prev_hash`` and the canonical JSON of the row's ``ACCESS_FIELDS`` (ts as ISO text).

    Each row commits to its predecessor, so an edited, deleted or inserted row breaks every later hash.
    """
    payload = {k: (row[k].isoformat() if isinstance(row[k], datetime) else row[k]) for k in ACCESS_FIELDS}
    text = prev_hash + json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _first_bad(rows: list[dict[str, Any]], prev: str, expected_seq: int) -> tuple[int, str] | None:
    """``(seq, reason)`` of the first row that does not continue the chain from ``(expected_seq - 1, prev)``."""
    for r in rows:
        if r["seq"] != expected_seq:
            return r["seq"], f"sequence jumps from {expected_seq - 1} to {r['seq']} (a row was deleted or inserted)"
        if r["prev_hash"] != prev:
            return r["seq"], "prev_hash does not match the previous row (a row was deleted, inserted or re-hashed)"
        if row_hash(prev, r) != r["row_hash"]:
            return r["seq"], "row content does not match its hash (the row was edited)"
        prev, expected_seq = r["row_hash"], expected_seq + 1
    return None


def verify(store: Store, expect_head: tuple[int, str] | None = None) -> dict[str, Any]:
    """Re-compute the whole hash chain (O(rows)); record the result in the store for ``append``'s warning.

    The chain alone cannot tell a log whose last rows were deleted from a shorter log: pass a head recorded
    earlier (``head`` of a previous result, e.g. kept as a CI artifact) to detect that too. The head ``append``
    last verified is checked the same way.

    Args:
        store: the store whose ``access_log`` is checked.
        expect_head: ``(seq, row_hash)`` of a row that must still be in the chain with that hash.

    Returns:
        ``{"ok": bool, "rows": n, "first_bad_seq": seq or None, "reason": text or None, "head": {"seq", "hash"}}``.
        A gap in ``seq`` (a deleted row) or a row whose prev_hash or row_hash does not match is the first bad row.
    """
    with store.session():
        rows = store.access_rows()
        recorded = store.access_log_head()
        head: dict[str, Any] = {"seq": rows[-1]["seq"] if rows else 0,
                                "hash": rows[-1]["row_hash"] if rows else GENESIS_HASH}
        bad = _first_bad(rows, GENESIS_HASH, 1)
        for want in (expect_head, (recorded["seq"], recorded["row_hash"]) if recorded else None):
            if bad is None and want is not None and want[0] > 0:
                seq, digest = want
                got = rows[seq - 1]["row_hash"] if seq <= len(rows) else None
                if got != digest:
                    bad = (min(seq, len(rows) + 1),
                           f"the recorded head row {seq} is missing (rows after {len(rows)} were deleted)"
                           if got is None else f"row {seq} no longer has the recorded hash {digest[:12]} "
                                               "(the log was rewritten)")
        if bad is None:
            store.set_access_log_head(head["seq"], head["hash"])
        else:
            store.mark_access_log_broken(*bad)
    return {"ok": bad is None, "rows": len(rows), "first_bad_seq": bad[0] if bad else None,
            "reason": bad[1] if bad else None, "head": head}


def _check_since_head(store: Store) -> tuple[tuple[int, str] | None, dict[str, Any] | None]:
    """The incremental check ``append`` runs: ``(first_bad, last_good_row)``. See the module docstring."""
    recorded = store.access_log_head()
    if recorded and recorded["broken_seq"] is not None:
        return (recorded["broken_seq"], recorded["broken_reason"]), None
    seq, digest = (recorded["seq"], recorded["row_hash"]) if recorded else (0, GENESIS_HASH)
    rows = store.access_rows(from_seq=max(seq, 1))
    last: dict[str, Any] | None = None
    if seq > 0:
        if not rows or rows[0]["seq"] != seq or rows[0]["row_hash"] != digest:
            return (seq, f"the verified head row {seq} is missing or was re-hashed (rows were deleted or "
                         "rewritten)"), None
        last = rows.pop(0)
        if row_hash(last["prev_hash"], last) != digest:
            return (seq, "row content does not match its hash (the row was edited)"), None
        if store.access_log_count(up_to_seq=seq) != seq:
            return (seq, f"the log holds {store.access_log_count(up_to_seq=seq)} rows up to row {seq} (rows were "
                         "deleted or inserted before it)"), None
    bad = _first_bad(rows, digest, seq + 1)
    return bad, (rows[-1] if rows else last) if bad is None else None


_warned_broken: set[Path] = set()  # stores whose broken chain this process has already reported


def append(store: Store, row: dict[str, Any], budget: tuple[datetime, int] | None = None,
           counted: tuple[str, ...] | None = None) -> dict[str, Any] | None:
    """Chain and append one row (built with ``entry``); ``append_many`` with one row.

    Returns:
        The stored row with seq, ts, prev_hash and row_hash; None when ``budget`` refused it (nothing stored).
    """
    rows = append_many(store, [row], budget, counted)
    return rows[0] if rows else None


def append_many(store: Store, rows: list[dict[str, Any]], budget: tuple[datetime, int] | None = None,
                counted: tuple[str, ...] | None = None) -> list[dict[str, Any]] | None:
    """Chain and append rows (built with ``entry``, all of one split when ``budget`` is given) after the incremental
    check of what is new since the last verified head; all under the store lock, and the budget count and the
    insert in one transaction, so concurrent processes append one at a time and all rows go in or none.

    If the chain is broken (found now, or recorded by an earlier full ``verify``), a warning naming the first bad
    row goes to stderr once per store per process. The rows are still appended and chained: refusing a read would
    not repair the log, and the warning makes sure a broken log is not extended unnoticed.

    Args:
        store: the store holding the log.
        rows: the rows' fields (``entry``), in order.
        budget: ``(window_start, max_reads)``: append only if the permitted reads (outcome ``read`` or
            ``override``) of ``rows[0]["split"]`` with ``ts >= window_start``, plus those among ``rows``, stay
            within ``max_reads``: concurrent readers cannot overdraw a budget, and a gate reserves all its reads or
            none (``SplitManager.reserve``).
        counted: the split names whose reads ``budget`` counts (default: ``rows[0]["split"]`` alone); one content
            known under several names shares one budget (``SplitManager.content_names``).

    Returns:
        The stored rows with seq, ts, prev_hash and row_hash; None when ``budget`` refused them (nothing stored).
    """
    with store.session():
        bad, verified = _check_since_head(store)
        last = store.access_log_last()
        seq, prev = (last["seq"] + 1, last["row_hash"]) if last else (1, GENESIS_HASH)
        ts, full_rows = store.clock(), []
        for row in rows:
            full: dict[str, Any] = {k: row.get(k) for k in ACCESS_FIELDS}
            full.update(seq=seq, ts=ts, cached=bool(row.get("cached", False)), prev_hash=prev)
            full["row_hash"] = prev = row_hash(prev, full)
            full_rows.append(full)
            seq += 1
        limit = (counted or rows[0]["split"], budget[0], budget[1]) if budget is not None and rows else None
        if not store.insert_access_rows(full_rows, limit):
            return None
        if bad is not None and store.path.resolve() not in _warned_broken:
            _warned_broken.add(store.path.resolve())
            print(f"warning: the access log in {store.path} is already broken at row {bad[0]} ({bad[1]}); new "
                  "entries are still appended and chained, but the log no longer proves who read what. Run "
                  "'evalgate audit verify' to see the first bad row, and find out who edited the store.",
                  file=sys.stderr)
        first = full_rows[0]["seq"] if full_rows else seq
        if bad is None and full_rows and (verified["seq"] if verified else 0) == first - 1:
            store.set_access_log_head(full_rows[-1]["seq"], full_rows[-1]["row_hash"])
        elif bad is not None:
            store.mark_access_log_broken(*bad)
    return full_rows
