"""The audit: who read which split, how often, for what, and whether the access log is intact.

The access log lives in the store (``access_log``); its hash chain is ``evalgate.access.log`` (``verify_chain`` is
``access.log.verify``: it detects an edited, inserted or deleted row and names the first bad one).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from evalgate.access.log import verify as verify_chain
from evalgate.core.errors import BadInput
from evalgate.core.results import ReadByKey, Result
from evalgate.splits.discovery import scan_manifests
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import Policy
from evalgate.splits.owners import ContentOwner
from evalgate.store import AccessLogRepo, AccessRow, Store


class ReadBudget(Result):
    """A split's read budget in its policy's window ending now, over every name of its content."""

    max_reads: int
    """Reads allowed per window."""
    window_days: int
    """The window, days."""
    hard: bool
    """Whether the budget is hard (no override)."""
    used: int | None
    """Reads counted in the window; None on a broken chain (a deleted row would read as a refund)."""
    left: int | None
    """Reads left (``max_reads - used``, at least 0); None on a broken chain."""
    unknown: str | None = None
    """Why ``used`` and ``left`` are not counted; present only on a broken chain."""


class ContaminationBudget(Result):
    """A split's contamination-check budget (the sealed tiers) in its policy's window ending now."""

    max_checks: int
    """Checks allowed per window."""
    window_days: int
    """The window, days."""
    used: int
    """Checks counted in the window, over every name of the content."""
    left: int
    """Checks left (at least 0)."""


class SplitAudit(Result):
    """One split's reads, refusals and budgets (an entry of ``AuditSummary.splits``). A read is a row with outcome
    ``read`` or ``override``, cached re-reads included; a split's reads are those of its content under any name
    (``splits.owners.content_owner``)."""

    tier: str | None
    """The manifest's tier, else the tier of the split's last logged row (None: neither)."""
    reads: int
    """Reads in the summary's rows (``since`` on)."""
    cached_reads: int
    """Of them, cached re-reads."""
    overrides: int
    """Reads past a soft budget under an override reason."""
    refusals: int
    """Refused attempts."""
    judge_reads: int
    """Rows of an LLM judge shown a run's items (outcome ``judge-read``; not reads of their own)."""
    by_actor: dict[str, int]
    """Reads per actor."""
    by_purpose: dict[str, int]
    """Reads per purpose."""
    by_day: dict[str, int]
    """Reads per ISO date, in date order."""
    refusals_by_actor: dict[str, int]
    """Refusals per actor."""
    ci_reads: int
    """Reads made in CI."""
    first_read: str | None
    """The first read's time (ISO, seconds), or None."""
    last_read: str | None
    """The last read's time (ISO, seconds), or None."""
    tiers_seen: list[str]
    """Every tier the split was logged under, sorted (more than one: its manifest's tier was changed)."""
    manifest: bool
    """Whether the split's manifest is in the splits directory (False: its budget is unknown, not absent)."""
    content_names: list[str] | None = None
    """Every name of the split's content, the owner's first (present when the manifest loads)."""
    same_content_as: str | None = None
    """The owning split when this manifest is a copy, else None (present when the manifest loads)."""
    budget: ReadBudget | None = None
    """The read budget (present for budgeted splits)."""
    contamination_budget: ContaminationBudget | None = None
    """The contamination-check budget (present where the policy sets one: the sealed tiers)."""


class ChainHead(ReadByKey, Result):
    """The access log's last row: its ``seq`` (0: an empty log) and ``hash`` (its row hash; the genesis hash of an
    empty log). ``--expect-head SEQ:HASH`` pins it."""

    seq: int
    hash: str


class SignatureCheck(ReadByKey, Result):
    """The newest signed head checked against the signing key outside the store (``access.log``'s signature check).
    """

    ok: bool
    """The signed head verifies and every row up to the last is under it."""
    checked: bool
    """A key was found to check with (False: ``ok`` is False unless the log is empty)."""
    seq: int | None
    """The signed row (None: no signed head)."""
    reason: str | None
    """Why it does not hold, and what to do (None: it holds)."""
    public_key: str | None
    """The checking key's public half, hex (None: no key)."""
    first_bad_seq: int | None
    """The first row the signature does not cover (None: it holds)."""


class ChainCheck(ReadByKey, Result):
    """The access log's hash chain and signed head (``access.log.verify``)."""

    ok: bool
    """The chain is intact and its signed head holds."""
    rows: int
    """Rows in the log."""
    first_bad_seq: int | None
    """The first row whose seq, prev_hash or row_hash does not match (None: the rows chain)."""
    reason: str | None
    """Why that row breaks the chain (None: it does not break)."""
    head: ChainHead
    """The last row."""
    signature: SignatureCheck
    """The signed head's check."""


class AuditSummary(Result):
    """Who read which split, how often and for what (``audit_summary``, ``Workspace.audit``; ``evalgate audit
    --json`` prints ``as_dict()``)."""

    generated_at: str
    """When the summary was made (ISO, seconds)."""
    since: str | None
    """The ``since`` it was made for (ISO), or None for the whole log."""
    splits_dir: str
    """The absolute directory the manifests (tiers, budgets) were read from."""
    splits: dict[str, SplitAudit]
    """Split name -> its entry, sorted by name."""
    chain: ChainCheck
    """The access log's hash chain and signed head (``access.log.verify``'s result, typed: ``ok``, ``rows``,
    ``first_bad_seq``, ``reason``, ``head``, ``signature``)."""
    broken_manifests: list[str]
    """The error of each split manifest that does not load (its split shows only its logged rows)."""


def audit_summary(store: Store, split: str | None = None, since: datetime | None = None,
                  tier: str | None = None) -> AuditSummary:
    """Reads per split (with tier), by actor, by purpose, by day, refusals, and budget used/left in the window.

    A read is a row with outcome ``read`` or ``override`` (cached re-reads included); ``judge_reads`` counts the
    rows of an LLM judge shown a run's items (outcome ``judge-read``, not reads of their own). The budget is counted
    over the policy's window ending now, whatever ``since`` is; on a broken chain it is not counted at all (a
    deleted row would otherwise count as a refund).

    Args:
        store: the store whose access log is summarised.
        split: only this split.
        since: only rows with ``ts >= since`` (the budget is not affected).
        tier: only splits of this tier (e.g. ``"private"`` for the release report's table).

    Returns:
        The ``AuditSummary``: one ``SplitAudit`` per split in the log or the splits directory, the chain's state
        and the manifests that do not load.

    Raises:
        BadInput: ``split`` has neither a manifest nor any access-log row.
    """
    chain = verify_chain(store)  # first: a budget is never counted from a broken chain
    # a manifest that does not load is named, and hides no other split
    loaded, broken = scan_manifests(store.env.splits)
    manifests = {m.name: m for m in loaded}
    if split:
        _refuse_unknown_split(store, split, manifests)
    manager = SplitManager(store)
    owners = {name: manager.owner(m) for name, m in manifests.items()}
    names = set(owners[split].names) if split in owners else {split} if split else None
    by_split: dict[str, list[AccessRow]] = defaultdict(list)
    for r in store.access_rows(None, since):
        if names is None or r.split in names:
            by_split[r.split].append(r)
    out: dict[str, SplitAudit] = {}
    for name in sorted(set(by_split) | ({split} if split else set(manifests))):
        own = owners.get(name)
        rs = sorted((r for n in (own.names if own else (name,)) for r in by_split.get(n, [])), key=lambda r: r.seq)
        fields = _split_fields(rs, manifests[name].tier if name in manifests else None)
        if tier is not None and fields["tier"] != tier:
            continue
        if own is not None:
            fields.update(_content_fields(name, own, manager, chain))
        out[name] = SplitAudit(**fields)
    return AuditSummary(generated_at=store.clock().isoformat(timespec="seconds"),
                        since=since.isoformat() if since else None, splits_dir=str(store.env.splits.resolve()),
                        splits=out, chain=chain, broken_manifests=[e.message for e in broken])


def _split_fields(rs: list[AccessRow], m_tier: str | None) -> dict[str, Any]:
    """A split's counts from its rows ``rs`` (in sequence order; ``m_tier``: its manifest's tier, None when it has
    no manifest)."""
    reads = [r for r in rs if r.outcome in ("read", "override")]
    refused = [r for r in rs if r.outcome == "refused"]
    first, last = min((r.ts for r in reads), default=None), max((r.ts for r in reads), default=None)
    return {
        "tier": m_tier or (rs[-1].tier if rs else None),
        "reads": len(reads), "cached_reads": sum(1 for r in reads if r.cached),
        "overrides": sum(1 for r in rs if r.outcome == "override"),
        "refusals": len(refused),
        "judge_reads": sum(1 for r in rs if r.outcome == "judge-read"),
        "by_actor": dict(Counter(r.actor for r in reads)),
        "by_purpose": dict(Counter(r.purpose for r in reads)),
        "by_day": dict(sorted(Counter(r.ts.date().isoformat() for r in reads).items())),
        "refusals_by_actor": dict(Counter(r.actor for r in refused)),
        "ci_reads": sum(1 for r in reads if r.ci),
        "first_read": first.isoformat(timespec="seconds") if first is not None else None,
        "last_read": last.isoformat(timespec="seconds") if last is not None else None,
        "tiers_seen": sorted({r.tier for r in rs} | ({m_tier} if m_tier else set())),
        "manifest": m_tier is not None,
    }


def _content_fields(name: str, own: ContentOwner, manager: SplitManager, chain: dict[str, Any]) -> dict[str, Any]:
    """The fields of a split that has a manifest: its content's names and owner, and its budgets."""
    fields: dict[str, Any] = {"content_names": list(own.names),
                              "same_content_as": own.manifest.name if own.manifest.name != name else None}
    policy = own.manifest.effective_policy()
    if policy.max_reads is not None:
        fields["budget"] = _budget(manager, own.names, policy, policy.max_reads, chain)
    if policy.max_contamination_checks is not None:
        used = manager.contamination_checks_in_window(own.names, policy)
        fields["contamination_budget"] = ContaminationBudget(
            max_checks=policy.max_contamination_checks, window_days=policy.window_days, used=used,
            left=max(0, policy.max_contamination_checks - used))
    return fields


def _budget(manager: SplitManager, names: tuple[str, ...], policy: Policy, max_reads: int,
            chain: dict[str, Any]) -> ReadBudget:
    """A budget's line (``max_reads``: the policy's): used and left in the window over every name of the content;
    on a broken chain ``used`` and ``left`` are None and ``unknown`` (present only then) says why: deleted rows would
    count as budget left, so nothing is counted."""
    if not chain["ok"]:
        return ReadBudget(max_reads=max_reads, window_days=policy.window_days, hard=policy.hard, used=None,
                          left=None, unknown=_why_unknown(chain))
    used = manager.reads_in_window(names, policy)
    return ReadBudget(max_reads=max_reads, window_days=policy.window_days, hard=policy.hard, used=used,
                      left=max(0, max_reads - used))


def _why_unknown(chain: dict[str, Any]) -> str:
    """Why a budget is not counted: the first bad row of the chain, else the signed head that does not hold (the
    chain itself intact, so ``verify`` has no ``first_bad_seq``: rows appended unsigned, or no key to check with)."""
    if chain["first_bad_seq"] is not None:
        return f"chain broken at row {chain['first_bad_seq']}"
    sig = chain["signature"]
    if not sig["checked"]:
        return "log not verified (no signing key; see 'evalgate audit verify')"
    return f"log not verified from row {sig['first_bad_seq']} (signed head; see 'evalgate audit verify')"


def _refuse_unknown_split(store: AccessLogRepo, split: str, manifests: Iterable[str]) -> None:
    """A split with neither a manifest nor an access-log row is a typo: say so rather than show nothing.

    Raises:
        BadInput: naming the known splits.
    """
    known = set(manifests)
    if split not in known and not store.access_rows(split):
        raise BadInput(f"unknown split {split!r}: no manifest and no access-log rows; known splits: "
                       f"{', '.join(sorted(known)) or 'none'}")


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

    Raises:
        BadInput: ``split`` has neither a manifest nor any access-log row (a typo would otherwise list nothing).
    """
    if split:
        _refuse_unknown_split(store, split, (m.name for m in scan_manifests(store.env.splits)[0]))
    out = []
    for r in store.access_rows(split, since):
        if refused and r.outcome != "refused":
            continue
        row = {k: getattr(r, k) for k in LOG_FIELDS}
        row["ts"] = r.ts.isoformat(timespec="seconds")
        out.append(row)
    return out
