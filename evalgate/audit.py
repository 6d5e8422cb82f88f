"""The audit: who read which split, how often, for what, and whether the access log is intact.

The access log lives in the store (``access_log``); its hash chain is ``evalgate.accesslog`` (``verify_chain`` is
``accesslog.verify``: it detects an edited, inserted or deleted row and names the first bad one).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from evalgate.accesslog import verify as verify_chain
from evalgate.errors import BadInput
from evalgate.splits.discovery import scan_manifests
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import splits_dir
from evalgate.splits.owners import ContentOwner
from evalgate.store import AccessLogRepo, Store, now


def audit_summary(store: Store, split: str | None = None, since: datetime | None = None,
                  tier: str | None = None) -> dict[str, Any]:
    """Reads per split (with tier), by actor, by purpose, by day, refusals, and budget used/left in the window.

    A read is a row with outcome ``read`` or ``override`` (cached re-reads included); ``judge_reads`` counts the
    rows of an LLM judge shown a run's items (outcome ``judge-read``, not reads of their own). The budget is counted
    over the policy's window ending now, whatever ``since`` is.

    Args:
        store: the store whose access log is summarised.
        split: only this split.
        since: only rows with ``ts >= since`` (the budget is not affected).
        tier: only splits of this tier (e.g. ``"private"`` for the release report's table).

    Returns:
        ``{"generated_at", "since", "splits_dir", "splits": {name: entry}, "chain": verify_chain(...)}``, where
        ``splits_dir`` is the absolute directory the manifests (tiers, budgets) were read from; each entry holds
        ``tier``, ``reads``, ``cached_reads``, ``overrides``, ``refusals``, ``by_actor``, ``by_purpose``,
        ``by_day`` (ISO date -> reads), ``refusals_by_actor``, ``ci_reads``, ``first_read``, ``last_read``
        (ISO text or None), ``tiers_seen`` (more than one means the manifest's tier was changed), and ``budget``
        (``max_reads``, ``window_days``, ``hard``, ``used``, ``left``; ``unknown`` on a broken chain) for
        budgeted splits, and ``manifest`` (False for a split in the log whose manifest is not in ``splits_dir``:
        its budget is unknown, not absent). A split's reads are those of its content under any name
        (``splits.content_owner``): ``content_names`` lists them, ``same_content_as`` names the owning split when
        this manifest is a copy. On a broken chain the budget's ``used`` and ``left`` are None and ``unknown`` says
        why (a deleted row would otherwise count as a refund). ``broken_manifests``: the error of each split
        manifest that does not load (its split shows only its logged rows). ``contamination_budget``
        (``max_checks``, ``window_days``, ``used``, ``left``) for splits whose policy budgets contamination checks
        (the sealed tiers), over every name of the content.

    Raises:
        BadInput: ``split`` has neither a manifest nor any access-log row.
    """
    chain = verify_chain(store)  # first: a budget is never counted from a broken chain
    loaded, broken = scan_manifests()  # a manifest that does not load is named, and hides no other split
    manifests = {m.name: m for m in loaded}
    if split and split not in manifests and not store.access_rows(split):
        raise BadInput(f"unknown split {split!r}: no manifest and no access-log rows; known splits: "
                       f"{', '.join(sorted(manifests)) or 'none'}")
    manager = SplitManager(store)
    owners = {name: manager.owner(m) for name, m in manifests.items()}
    names = set(owners[split].names) if split in owners else {split} if split else None
    rows = [r for r in store.access_rows(None, since) if names is None or r["split"] in names]
    by_split: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_split[r["split"]].append(r)
    out: dict[str, Any] = {}
    for name in sorted(set(by_split) | ({split} if split else set(manifests))):
        own = owners.get(name)
        rs = sorted((r for n in (own.names if own else (name,)) for r in by_split.get(n, [])), key=lambda r: r["seq"])
        entry = _counts(rs, manifests[name].tier if name in manifests else None, name in manifests)
        if tier is not None and entry["tier"] != tier:
            continue
        if own is not None:
            entry.update(_content(name, own, manager, chain))
        out[name] = entry
    return {"generated_at": now().isoformat(timespec="seconds"), "since": since.isoformat() if since else None,
            "splits_dir": str(splits_dir().resolve()), "splits": out, "chain": chain,
            "broken_manifests": [e.message for e in broken]}


def _counts(rs: list[dict[str, Any]], m_tier: str | None, has_manifest: bool) -> dict[str, Any]:
    """One split's entry of ``audit_summary`` from its access-log rows ``rs`` (in log order): the counts, the
    first and last read (ISO text), the tiers seen (``m_tier``: its manifest's tier, None without a manifest)."""
    reads = [r for r in rs if r["outcome"] in ("read", "override")]
    refused = [r for r in rs if r["outcome"] == "refused"]
    first, last = min((r["ts"] for r in reads), default=None), max((r["ts"] for r in reads), default=None)
    return {
        "tier": m_tier or (rs[-1]["tier"] if rs else None),
        "reads": len(reads), "cached_reads": sum(1 for r in reads if r["cached"]),
        "overrides": sum(1 for r in rs if r["outcome"] == "override"),
        "refusals": len(refused),
        "judge_reads": sum(1 for r in rs if r["outcome"] == "judge-read"),
        "by_actor": dict(Counter(r["actor"] for r in reads)),
        "by_purpose": dict(Counter(r["purpose"] for r in reads)),
        "by_day": dict(sorted(Counter(r["ts"].date().isoformat() for r in reads).items())),
        "refusals_by_actor": dict(Counter(r["actor"] for r in refused)),
        "ci_reads": sum(1 for r in reads if r["ci"]),
        "first_read": first.isoformat(timespec="seconds") if first is not None else None,
        "last_read": last.isoformat(timespec="seconds") if last is not None else None,
        "tiers_seen": sorted({r["tier"] for r in rs} | ({m_tier} if m_tier else set())),
        "manifest": has_manifest,
    }


def _content(name: str, own: ContentOwner, manager: SplitManager, chain: dict[str, Any]) -> dict[str, Any]:
    """The content part of a split's entry: its names, the split owning the content, and its budgets (reads,
    contamination checks) over every name of the content."""
    out: dict[str, Any] = {"content_names": list(own.names),
                           "same_content_as": own.manifest.name if own.manifest.name != name else None}
    policy = own.manifest.effective_policy()
    if policy.max_reads is not None:
        out["budget"] = _budget(manager, own.names, policy, chain)
    if policy.max_contamination_checks is not None:
        used = manager.contamination_checks_in_window(own.names, policy)
        out["contamination_budget"] = {
            "max_checks": policy.max_contamination_checks, "window_days": policy.window_days, "used": used,
            "left": max(0, policy.max_contamination_checks - used)}
    return out


def _budget(manager: SplitManager, names: tuple[str, ...], policy: Any, chain: dict[str, Any]) -> dict[str, Any]:
    """A budget's line: used and left in the window over every name of the content; on a broken chain ``used`` and
    ``left`` are None and ``unknown`` (present only then) says why: deleted rows would count as budget left, so
    nothing is counted."""
    b: dict[str, Any] = {"max_reads": policy.max_reads, "window_days": policy.window_days, "hard": policy.hard}
    if not chain["ok"]:
        return {**b, "used": None, "left": None, "unknown": f"chain broken at row {chain['first_bad_seq']}"}
    used = manager.reads_in_window(names, policy)
    return {**b, "used": used, "left": max(0, policy.max_reads - used)}


LOG_FIELDS = ("seq", "ts", "actor", "ci", "split", "tier", "purpose", "outcome", "cached", "run_id",
              "checkpoint_digest", "detail")
"""The access-log fields ``log_rows`` returns (the chain's hashes are left to ``audit verify``)."""


def log_rows(store: AccessLogRepo, split: str | None = None, since: datetime | None = None,
             refused: bool = False) -> list[dict[str, Any]]:
    """Access-log rows in sequence order: who read which split when, for what, with what outcome, for which run.

    Args:
        store: the store whose access log is listed.
        split: only this split.
        since: only rows with ``ts >= since``.
        refused: only refused attempts (outcome ``refused``).

    Returns:
        One dict per row with the keys of ``LOG_FIELDS``; ``ts`` as ISO text (seconds).
    """
    out = []
    for r in store.access_rows(split, since):
        if refused and r["outcome"] != "refused":
            continue
        row = {k: r[k] for k in LOG_FIELDS}
        row["ts"] = r["ts"].isoformat(timespec="seconds")
        out.append(row)
    return out
