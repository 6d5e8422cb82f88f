"""The audit: who read which split, how often, for what, and whether the access log is intact.

The access log lives in the store (``access_log``); each row carries the sha256 of its predecessor, so
``verify_chain`` detects an edited, inserted or deleted row and names the first bad one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from evalgate.splits import list_manifests
from evalgate.store import GENESIS_HASH, Store, access_row_hash, now


def verify_chain(store: Store) -> dict[str, Any]:
    """Re-compute the hash chain.

    Returns:
        ``{"ok": bool, "rows": n, "first_bad_seq": seq or None, "reason": text or None}``. A gap in ``seq`` (a
        deleted row) or a row whose prev_hash or row_hash does not match is the first bad row.
    """
    rows = store.access_rows()
    prev, expected_seq = GENESIS_HASH, 1
    for r in rows:
        reason = None
        if r["seq"] != expected_seq:
            reason = f"sequence jumps from {expected_seq - 1} to {r['seq']} (a row was deleted or inserted)"
        elif r["prev_hash"] != prev:
            reason = "prev_hash does not match the previous row (a row was deleted, inserted or re-hashed)"
        elif access_row_hash(prev, r) != r["row_hash"]:
            reason = "row content does not match its hash (the row was edited)"
        if reason:
            return {"ok": False, "rows": len(rows), "first_bad_seq": r["seq"], "reason": reason}
        prev, expected_seq = r["row_hash"], expected_seq + 1
    return {"ok": True, "rows": len(rows), "first_bad_seq": None, "reason": None}


def audit_summary(store: Store, split: str | None = None, since: datetime | None = None) -> dict[str, Any]:
    """Reads per split (with tier), by actor, by purpose, by day, refusals, and budget used/left in the window.

    Returns:
        ``{"generated_at", "since", "splits": {name: {...}}, "chain": verify_chain(...)}``.
    """
    rows = store.access_rows(split, since)
    manifests = {m.name: m for m in list_manifests()}
    by_split: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_split[r["split"]].append(r)
    out: dict[str, Any] = {}
    for name in sorted(set(by_split) | ({split} if split else set(manifests))):
        rs = by_split.get(name, [])
        reads = [r for r in rs if r["outcome"] in ("read", "override")]
        entry: dict[str, Any] = {
            "tier": rs[0]["tier"] if rs else (manifests[name].tier if name in manifests else None),
            "reads": len(reads), "cached_reads": sum(1 for r in reads if r["cached"]),
            "overrides": sum(1 for r in rs if r["outcome"] == "override"),
            "refusals": sum(1 for r in rs if r["outcome"] == "refused"),
            "by_actor": dict(Counter(r["actor"] for r in reads)),
            "by_purpose": dict(Counter(r["purpose"] for r in reads)),
            "by_day": dict(sorted(Counter(r["ts"].date().isoformat() for r in reads).items())),
            "ci_reads": sum(1 for r in reads if r["ci"]),
            "last_read": max((r["ts"] for r in reads), default=None),
        }
        if name in manifests:
            policy = manifests[name].effective_policy()
            if policy.max_reads is not None:
                from evalgate.splits import SplitManager

                used = SplitManager(store).reads_in_window(name, policy)
                entry["budget"] = {"max_reads": policy.max_reads, "window_days": policy.window_days,
                                   "hard": policy.hard, "used": used, "left": max(0, policy.max_reads - used)}
        if entry["last_read"] is not None:
            entry["last_read"] = entry["last_read"].isoformat(timespec="seconds")
        out[name] = entry
    return {"generated_at": now().isoformat(timespec="seconds"), "since": since.isoformat() if since else None,
            "splits": out, "chain": verify_chain(store)}
