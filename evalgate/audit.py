"""The audit: who read which split, how often, for what, and whether the access log is intact.

The access log lives in the store (``access_log``); each row carries the sha256 of its predecessor, so
``verify_chain`` detects an edited, inserted or deleted row and names the first bad one.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from evalgate.errors import BadInput
from evalgate.splits import list_manifests
from evalgate.store import GENESIS_HASH, Store, access_row_hash, now


def verify_chain(store: Store, expect_head: tuple[int, str] | None = None) -> dict[str, Any]:
    """Re-compute the hash chain.

    The chain alone cannot tell a log whose last rows were deleted from a shorter log: pass a head recorded
    earlier (``head`` of a previous result, e.g. kept as a CI artifact) to detect that too.

    Args:
        store: the store whose ``access_log`` is checked.
        expect_head: ``(seq, row_hash)`` of a row that must still be in the chain with that hash.

    Returns:
        ``{"ok": bool, "rows": n, "first_bad_seq": seq or None, "reason": text or None, "head": {"seq", "hash"}}``.
        A gap in ``seq`` (a deleted row) or a row whose prev_hash or row_hash does not match is the first bad row.
    """
    rows = store.access_rows()
    prev, expected_seq = GENESIS_HASH, 1
    head = {"seq": rows[-1]["seq"] if rows else 0, "hash": rows[-1]["row_hash"] if rows else GENESIS_HASH}
    for r in rows:
        reason = None
        if r["seq"] != expected_seq:
            reason = f"sequence jumps from {expected_seq - 1} to {r['seq']} (a row was deleted or inserted)"
        elif r["prev_hash"] != prev:
            reason = "prev_hash does not match the previous row (a row was deleted, inserted or re-hashed)"
        elif access_row_hash(prev, r) != r["row_hash"]:
            reason = "row content does not match its hash (the row was edited)"
        if reason:
            return {"ok": False, "rows": len(rows), "first_bad_seq": r["seq"], "reason": reason, "head": head}
        prev, expected_seq = r["row_hash"], expected_seq + 1
    if expect_head is not None:
        seq, want = expect_head
        got = next((r["row_hash"] for r in rows if r["seq"] == seq), None)
        if got != want:
            reason = (f"the recorded head row {seq} is missing (rows after {len(rows)} were deleted)" if got is None
                      else f"row {seq} no longer has the recorded hash {want[:12]} (the log was rewritten)")
            return {"ok": False, "rows": len(rows), "first_bad_seq": min(seq, len(rows) + 1), "reason": reason,
                    "head": head}
    return {"ok": True, "rows": len(rows), "first_bad_seq": None, "reason": None, "head": head}


_warned_broken: set[Path] = set()  # stores whose broken chain this process has already reported


def warn_if_chain_broken(store: Store) -> None:
    """Before a row is appended: if the access log's chain is already broken, say so on stderr, once per store per
    process, naming the first bad row. The append still happens (refusing a read would not repair the log, and the
    new rows are still chained); the warning makes sure a broken log is not extended unnoticed.
    """
    path = store.path.resolve()
    if path in _warned_broken:
        return
    res = verify_chain(store)
    if not res["ok"]:
        _warned_broken.add(path)
        print(f"warning: the access log in {store.path} is already broken at row {res['first_bad_seq']} "
              f"({res['reason']}); new entries are still appended and chained, but the log no longer proves who "
              "read what. Run 'evalgate audit verify' to see the first bad row, and find out who edited the store.",
              file=sys.stderr)


def audit_summary(store: Store, split: str | None = None, since: datetime | None = None,
                  tier: str | None = None) -> dict[str, Any]:
    """Reads per split (with tier), by actor, by purpose, by day, refusals, and budget used/left in the window.

    A read is a row with outcome ``read`` or ``override`` (cached re-reads included). The budget is counted over
    the policy's window ending now, whatever ``since`` is.

    Args:
        store: the store whose access log is summarised.
        split: only this split.
        since: only rows with ``ts >= since`` (the budget is not affected).
        tier: only splits of this tier (e.g. ``"private"`` for the release report's table).

    Returns:
        ``{"generated_at", "since", "splits": {name: entry}, "chain": verify_chain(...)}``; each entry holds
        ``tier``, ``reads``, ``cached_reads``, ``overrides``, ``refusals``, ``by_actor``, ``by_purpose``,
        ``by_day`` (ISO date -> reads), ``refusals_by_actor``, ``ci_reads``, ``first_read``, ``last_read``
        (ISO text or None), ``tiers_seen`` (more than one means the manifest's tier was changed), and ``budget``
        (``max_reads``, ``window_days``, ``hard``, ``used``, ``left``) for budgeted splits.

    Raises:
        BadInput: ``split`` has neither a manifest nor any access-log row.
    """
    rows = store.access_rows(split, since)
    manifests = {m.name: m for m in list_manifests()}
    if split and split not in manifests and not store.access_rows(split):
        raise BadInput(f"unknown split {split!r}: no manifest and no access-log rows; known splits: "
                       f"{', '.join(sorted(manifests)) or 'none'}")
    by_split: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_split[r["split"]].append(r)
    out: dict[str, Any] = {}
    for name in sorted(set(by_split) | ({split} if split else set(manifests))):
        rs = by_split.get(name, [])
        reads = [r for r in rs if r["outcome"] in ("read", "override")]
        refused = [r for r in rs if r["outcome"] == "refused"]
        m_tier = manifests[name].tier if name in manifests else None
        entry: dict[str, Any] = {
            "tier": m_tier or (rs[-1]["tier"] if rs else None),
            "reads": len(reads), "cached_reads": sum(1 for r in reads if r["cached"]),
            "overrides": sum(1 for r in rs if r["outcome"] == "override"),
            "refusals": len(refused),
            "by_actor": dict(Counter(r["actor"] for r in reads)),
            "by_purpose": dict(Counter(r["purpose"] for r in reads)),
            "by_day": dict(sorted(Counter(r["ts"].date().isoformat() for r in reads).items())),
            "refusals_by_actor": dict(Counter(r["actor"] for r in refused)),
            "ci_reads": sum(1 for r in reads if r["ci"]),
            "first_read": min((r["ts"] for r in reads), default=None),
            "last_read": max((r["ts"] for r in reads), default=None),
            "tiers_seen": sorted({r["tier"] for r in rs} | ({m_tier} if m_tier else set())),
        }
        if tier is not None and entry["tier"] != tier:
            continue
        if name in manifests:
            policy = manifests[name].effective_policy()
            if policy.max_reads is not None:
                from evalgate.splits import SplitManager

                used = SplitManager(store).reads_in_window(name, policy)
                entry["budget"] = {"max_reads": policy.max_reads, "window_days": policy.window_days,
                                   "hard": policy.hard, "used": used, "left": max(0, policy.max_reads - used)}
        for k in ("first_read", "last_read"):
            if entry[k] is not None:
                entry[k] = entry[k].isoformat(timespec="seconds")
        out[name] = entry
    return {"generated_at": now().isoformat(timespec="seconds"), "since": since.isoformat() if since else None,
            "splits": out, "chain": verify_chain(store)}
