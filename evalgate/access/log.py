"""The access log's hash chain: the row, its hash, appending a row and verifying the chain.

Every read, cached re-read, refusal and data change of a split is one row of ``access_log``, carrying the sha256 of
its predecessor and of itself. ``append`` checks only what is new since the last verified head (O(1) per append);
``verify`` re-hashes every row. Every append signs the new head with an Ed25519 key kept outside the store
(``keys.signing``); a head pinned outside the store (``expect_head``) catches a whole store rolled back. What each
check can and cannot show: docs/AUDIT.md, "Signed heads".
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import weakref
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.keys import signing as logsign
from evalgate.store import AccessLogRepo, AccessRow, BudgetLimit, ChainLink, SignedHead, VerifiedHead

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


def row_hash(prev_hash: str, row: Mapping[str, Any] | AccessRow) -> str:
    """sha256 of ``prev_hash`` and the canonical JSON of the row's ``ACCESS_FIELDS`` (ts as ISO text), for a row
    being appended (its fields as a mapping) or a stored one (an ``AccessRow``): the same text either way.

    Each row commits to its predecessor, so an edited, deleted or inserted row breaks every later hash.
    """
    values = row.__dict__ if isinstance(row, AccessRow) else row
    payload = {k: (v.isoformat() if isinstance(v := values[k], datetime) else v) for k in ACCESS_FIELDS}
    text = prev_hash + json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _first_bad(rows: list[AccessRow], prev: str, expected_seq: int) -> tuple[int, str] | None:
    """``(seq, reason)`` of the first row that does not continue the chain from ``(expected_seq - 1, prev)``."""
    for r in rows:
        if r.seq != expected_seq:
            return r.seq, f"sequence jumps from {expected_seq - 1} to {r.seq} (a row was deleted or inserted)"
        if r.prev_hash != prev:
            return r.seq, "prev_hash does not match the previous row (a row was deleted, inserted or re-hashed)"
        if row_hash(prev, r) != r.row_hash:
            return r.seq, "row content does not match its hash (the row was edited)"
        prev, expected_seq = r.row_hash, expected_seq + 1
    return None


def parse_head(text: str, where: str = "--expect-head") -> tuple[int, str]:
    """A head as ``audit verify`` and ``audit`` print it: ``SEQ:HASH`` (row number, colon, 64 hex digits).

    Raises:
        BadInput: any other form, or the empty head ``0:`` with a hash other than the genesis hash.
    """
    seq, _, digest = text.strip().partition(":")
    digest = digest.lower()
    if not seq.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise BadInput(f"{where} {text!r}: expected SEQ:HASH as printed by 'evalgate audit verify' or 'evalgate "
                       "audit' (a row number, a colon, 64 hex digits)")
    if int(seq) == 0 and digest != GENESIS_HASH:
        raise BadInput(f"{where} {text!r}: row 0 is the empty log, whose only head is 0:{GENESIS_HASH}")
    return int(seq), digest


def _expected_mismatch(rows: list[AccessRow], want: tuple[int, str]) -> tuple[int, str] | None:
    """``(seq, reason)`` when the chain does not hold head ``want``. The empty head ``(0, GENESIS_HASH)`` matches
    only an empty log: a head pinned before anything was read must not vouch for a store that holds reads."""
    seq, digest = want
    if seq == 0:
        if rows:
            return 1, (f"the expected head is the empty log (0:{GENESIS_HASH[:12]}...), but the log holds "
                       f"{len(rows)} rows: an empty head matches only an empty log; pin the head printed after the "
                       "first read")
        return None
    got = rows[seq - 1].row_hash if seq <= len(rows) else None
    if got == digest:
        return None
    return (min(seq, len(rows) + 1),
            f"the recorded head row {seq} is missing (rows after {len(rows)} were deleted)" if got is None
            else f"row {seq} no longer has the recorded hash {digest[:12]} (the log was rewritten)")


def _signature_check(store: AccessLogRepo, rows: list[AccessRow]) -> dict[str, Any]:
    """Check the newest signed head against the key outside the store (``keys.signing.signing_key``).

    Returns:
        ``{"ok", "checked", "seq", "reason", "public_key"}``: ``checked`` is False when no key was found to check
        with (then ``ok`` is False unless the log is empty); ``seq`` is the signed row.
    """
    sig = store.access_log_signature()
    key = logsign.signing_key(store.env)
    out: dict[str, Any] = {"ok": False, "checked": key is not None, "seq": sig.seq if sig else None,
                           "reason": None, "public_key": logsign.public_hex(key) if key is not None else None,
                           "first_bad_seq": min(sig.seq, len(rows) + 1) if sig and sig.seq > 0 else 1}
    if not rows and (sig is None or sig.seq == 0):
        out.update(ok=True, checked=True, first_bad_seq=None)
        return out
    if sig is None:
        out["reason"] = (f"the log holds {len(rows)} rows and no signed head: its signature was removed, or the rows "
                         "were written by an evalgate without signed heads. If you trust this store as it is (check "
                         "it against a head you pinned, --expect-head), sign its head once with 'evalgate audit "
                         "sign'")
    elif key is None:
        out["reason"] = ("no access-log signing key to check the signed head with "
                         f"({logsign.log_key_file(store.env)} is missing); set EVALGATE_LOG_KEY or "
                         "EVALGATE_LOG_KEY_FILE to the key that signs this store")
    elif not logsign.valid(key, sig.seq, sig.row_hash, sig.signature):
        other = sig.public_key != out["public_key"]
        out["reason"] = (f"the signature of head {sig.seq} does not verify with this key"
                         + (f" (it names key {sig.public_key[:16]}, this is {out['public_key'][:16]}: use the key "
                            "that signs this store, or the signature was forged)" if other
                            else " (the signed head or its signature was rewritten)"))
    elif sig.seq > len(rows) or rows[sig.seq - 1].row_hash != sig.row_hash:
        out["reason"] = (f"the signed head row {sig.seq} is missing (rows after {len(rows)} were deleted)"
                         if sig.seq > len(rows) else
                         f"row {sig.seq} no longer has its signed hash {sig.row_hash[:12]} (the log was "
                         "rewritten and re-hashed)")
    elif sig.seq < len(rows):
        out["first_bad_seq"] = sig.seq + 1
        out["reason"] = (f"rows {sig.seq + 1}-{len(rows)} follow the signed head {sig.seq} unsigned: they "
                         "were appended without the signing key, or the log after the signed row was rewritten")
    else:
        out.update(ok=True, first_bad_seq=None)
    return out


def verify(store: AccessLogRepo, expect_head: tuple[int, str] | None = None) -> dict[str, Any]:
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
        res = inspect(store, expect_head)
        signature = res["signature"]
        if res["ok"]:
            store.set_access_log_head(res["head"]["seq"], res["head"]["hash"])
        elif res["first_bad_seq"] is not None:
            store.mark_access_log_broken(res["first_bad_seq"], res["reason"])
        elif signature["checked"]:
            store.mark_access_log_broken(signature["first_bad_seq"], f"signed head: {signature['reason']}")
    return res


def inspect(store: AccessLogRepo, expect_head: tuple[int, str] | None = None) -> dict[str, Any]:
    """``verify``'s check without recording its result: nothing is written to ``store`` (``evalgate store
    migrate`` checks the store it copies from this way).

    Returns:
        ``verify``'s result.
    """
    with store.session():
        rows = store.access_rows()
        recorded = store.access_log_head()
        head: dict[str, Any] = {"seq": rows[-1].seq if rows else 0,
                                "hash": rows[-1].row_hash if rows else GENESIS_HASH}
        bad = _first_bad(rows, GENESIS_HASH, 1)
        recorded_head = (recorded.seq, recorded.row_hash) if recorded and recorded.seq > 0 else None
        for want in (expect_head, recorded_head):
            if bad is None and want is not None:
                bad = _expected_mismatch(rows, want)
        signature = _signature_check(store, rows)
    return {"ok": bad is None and signature["ok"], "rows": len(rows), "first_bad_seq": bad[0] if bad else None,
            "reason": bad[1] if bad else None, "head": head, "signature": signature}


def check_for_gate(store: AccessLogRepo, expect_head: tuple[int, str] | None = None, required: bool = False,
                   accept_broken: bool = False) -> dict[str, Any]:
    """What every gate checks before it reads anything: the newest signed head, and the head pinned outside the
    store (``expect_head``, else ``$EVALGATE_EXPECT_HEAD``).

    A chain broken by an edited or deleted row is not refused here (whatever its signature says); that is the
    broken-chain rule's to decide (``gate.reads.check_chain``: refused and logged unless accepted). Refused here:
    a log whose newest signed head does not verify with the signing key (it was rewritten and re-hashed, truncated,
    or appended to unsigned), no key to check it with, and a log that does not
    hold the expected head (an empty expected head holds only for an empty log).

    Args:
        store: the store whose access log the gate will append to.
        expect_head: ``(seq, row_hash)`` pinned by an earlier run, or None.
        required: the policy's ``require_expect_head``: refuse when no expected head is given.
        accept_broken: the policy's ``accept_broken_chain`` is set: a signed head that does not hold is left to the
            broken-chain rule (the gate goes on, logged and shown in every report) instead of refused here; the
            expected head is still enforced.

    Returns:
        ``verify``'s result.

    Raises:
        RefusedByPolicy: see above (nothing read, nothing spent).
        BadInput: ``$EVALGATE_EXPECT_HEAD`` is not ``SEQ:HASH``.
    """
    pinned = store.env.expect_head
    if expect_head is None and pinned:
        expect_head = parse_head(pinned, "$EVALGATE_EXPECT_HEAD")
    if required and expect_head is None:
        raise RefusedByPolicy("the gate policy sets require_expect_head: pass --expect-head SEQ:HASH (or set "
                              "$EVALGATE_EXPECT_HEAD) to the head the last gate or 'evalgate audit verify' printed")
    res = verify(store, expect_head)
    mismatch = _expected_mismatch(store.access_rows(), expect_head) if expect_head else None
    if mismatch is not None and expect_head is not None:
        raise RefusedByPolicy(f"the access log does not hold the expected head {expect_head[0]}:"
                              f"{expect_head[1][:16]}...: {mismatch[1]}; the store was rolled back, truncated or "
                              "replaced. Find out who changed it before gating (nothing was read)")
    sig = res["signature"]
    if not sig["ok"] and not accept_broken and res["first_bad_seq"] is None:  # a broken chain: the rule's to refuse
        raise RefusedByPolicy(f"the access log's signed head does not hold: {sig['reason']}. The log may have been "
                              "rewritten by someone without the signing key; nothing was read ('evalgate audit "
                              "verify' says more)")
    return res


def sign_head(store: AccessLogRepo, expect_head: tuple[int, str] | None = None) -> dict[str, Any]:
    """Sign the current head of a log whose chain is intact (``evalgate audit sign``), creating the key if needed.

    For a store written before heads were signed, or after a key change the team decided on: it vouches for the log
    as it is now, so check it first (against a head pinned outside the store: ``expect_head``). A signed log that
    loses its signature was tampered with; signing it again would hide that.

    Returns:
        ``verify``'s result after signing.

    Raises:
        BadInput: the chain is broken, or does not hold ``expect_head`` (nothing signed).
    """
    with store.session():
        rows = store.access_rows()
        bad = _first_bad(rows, GENESIS_HASH, 1) or (_expected_mismatch(rows, expect_head) if expect_head else None)
        if bad is not None:
            raise BadInput(f"not signing: the access log is broken at row {bad[0]} ({bad[1]}); a signature would vouch "
                           "for an edited log")
        key = logsign.signing_key(store.env, create=True)
        if rows:
            seq, digest = rows[-1].seq, rows[-1].row_hash
            store.set_access_log_signature(seq, digest, logsign.public_hex(key), logsign.sign(key, seq, digest))
        return verify(store, expect_head)


def _check_since_head(store: AccessLogRepo, recorded: VerifiedHead | None
                      ) -> tuple[tuple[int, str] | None, AccessRow | None]:
    """The incremental check ``append`` runs from the ``recorded`` head (``store.access_log_head()``):
    ``(first_bad, last_good_row)``. See the module docstring."""
    if recorded and recorded.broken_seq is not None:
        return (recorded.broken_seq, recorded.broken_reason or ""), None
    seq, digest = (recorded.seq, recorded.row_hash) if recorded else (0, GENESIS_HASH)
    rows = store.access_rows(from_seq=max(seq, 1))
    last: AccessRow | None = None
    if seq > 0:
        if not rows or rows[0].seq != seq or rows[0].row_hash != digest:
            return (seq, f"the verified head row {seq} is missing or was re-hashed (rows were deleted or "
                         "rewritten)"), None
        last = rows.pop(0)
        if row_hash(last.prev_hash, last) != digest:
            return (seq, "row content does not match its hash (the row was edited)"), None
        if store.access_log_count(up_to_seq=seq) != seq:
            return (seq, f"the log holds {store.access_log_count(up_to_seq=seq)} rows up to row {seq} (rows were "
                         "deleted or inserted before it)"), None
    bad = _first_bad(rows, digest, seq + 1)
    return bad, (rows[-1] if rows else last) if bad is None else None


_warned_broken: set[str] = set()  # stores (``_first_warning``) whose broken chain this process has already reported
_warned_unsigned: set[str] = set()  # stores this process appended to without signing


def _first_warning(warned: set[str], store: AccessLogRepo) -> bool:
    """Whether ``store`` is not yet in ``warned``, and add it: a file or a server by its location; a memory database
    (every one's location is ``:memory:``) by itself, while it lives (one warned about must not silence another)."""
    key = store.location
    if getattr(store.db, "memory", False):
        key = f"{key}{id(store.db)}"
        if key not in warned:
            weakref.finalize(store.db, warned.discard, key)
    if key in warned:
        return False
    warned.add(key)
    return True


def _signer(store: AccessLogRepo, last: ChainLink | None, sig: SignedHead | None) -> tuple[Any | None, str | None]:
    """The key that signs the head after an append, or ``(None, why not)``; ``last`` is the log's last row and
    ``sig`` its newest signed head (``store.access_log_signature()``).

    An append signs only when the log it extends is empty (and was never signed) or ends at the validly signed
    head: signing the head of a log that was rewritten after its last signature would vouch for the rewrite. The
    key is created at a store's first append only (``keys.signing``): a command run without the key on a store that
    another key signs makes no key file of its own. Without a key the row is still appended, unsigned.
    """
    fresh = last is None and (sig is None or sig.seq == 0)  # only a store's first append makes a key
    try:
        key = logsign.signing_key(store.env, create=fresh)
    except OSError as e:
        return None, f"the signing key {logsign.log_key_file(store.env)} cannot be created ({e})"
    if key is None:
        return None, (f"no signing key ({logsign.log_key_file(store.env)} is missing); set EVALGATE_LOG_KEY or "
                      "EVALGATE_LOG_KEY_FILE to the key that signs this store")
    if last is None:
        return (key, None) if sig is None or sig.seq == 0 else (None, "the log is empty but was signed at row "
                                                                          f"{sig.seq} (its rows were deleted)")
    if sig is None:
        return None, "the log has no signed head (see 'evalgate audit sign')"
    if (sig.seq, sig.row_hash) != (last.seq, last.row_hash):
        return None, f"its last row {last.seq} is not the signed head (row {sig.seq})"
    if not logsign.valid(key, sig.seq, sig.row_hash, sig.signature):
        return None, "the signed head does not verify with this key (another key signs this store, or it was forged)"
    return key, None


def _broken_advice(reason: str) -> str:
    """What to do about a broken log: rows that only lack a signature (the chain intact; appended by someone
    without the signing key) can be vouched for again with ``sign_head``; anything else was edited."""
    if reason.startswith("signed head:") and "unsigned" in reason:
        return ("if those rows are genuine ('evalgate audit log'), sign the head again with the key that signs this "
                "store ('evalgate audit sign'); whoever appended them needs that key (EVALGATE_LOG_KEY)")
    return "find out who edited the store"


def append(store: AccessLogRepo, row: dict[str, Any], limit: BudgetLimit | None = None) -> dict[str, Any] | None:
    """Chain and append one row (built with ``entry``); ``append_many`` with one row.

    Returns:
        The stored row with seq, ts, prev_hash and row_hash; None when ``limit`` refused it (nothing stored).
    """
    rows = append_many(store, [row], limit)
    return rows[0] if rows else None


def append_many(store: AccessLogRepo, rows: list[dict[str, Any]],
                limit: BudgetLimit | Sequence[BudgetLimit] | None = None) -> list[dict[str, Any]] | None:
    """Chain and append rows (built with ``entry``) after the incremental check of what is new since the last
    verified head; all under the store lock, and the budget count and the insert in one transaction, so concurrent
    processes append one at a time and all rows go in or none.

    If the chain is broken (found now, or recorded by an earlier full ``verify``), a warning naming the first bad
    row goes to stderr once per store per process. The rows are still appended and chained: refusing a read would
    not repair the log, and the warning makes sure a broken log is not extended unnoticed.

    Args:
        store: the store holding the log.
        rows: the rows' fields (``entry``), in order.
        limit: append only if the rows the budget counts (``limit.counted``: ``store.access.READS`` or
            ``CONTAMINATION_CHECKS``) of ``limit.splits`` since ``limit.since``, plus those among ``rows``, stay
            within ``limit.max_rows``: concurrent readers cannot overdraw a budget, and a gate reserves all its
            reads or none (``SplitManager.reserve``). Several limits: every one must hold (a suite gate reserves
            its members' reads of several splits at once, ``SplitManager.reserve_all``). One content known under
            several names shares one budget (``ContentOwner.names``).

    Returns:
        The stored rows with seq, ts, prev_hash and row_hash; None when ``limit`` refused them (nothing stored).
    """
    with store.session(), store.connect():  # one transaction: the check, the rows, the signed and verified heads
        recorded, sig = store.access_log_heads()
        bad, verified = _check_since_head(store, recorded)
        # an intact chain's check read every row from the verified head on: its last row is the log's last
        last = ChainLink(verified.seq, verified.row_hash) if verified else store.access_log_last()
        key, why_unsigned = _signer(store, last, sig)
        seq, prev = (last.seq + 1, last.row_hash) if last else (1, GENESIS_HASH)
        ts, full_rows = store.clock(), []
        for row in rows:
            full: dict[str, Any] = {k: row.get(k) for k in ACCESS_FIELDS}
            full.update(seq=seq, ts=ts, cached=bool(row.get("cached", False)), prev_hash=prev)
            full["row_hash"] = prev = row_hash(prev, full)
            full_rows.append(full)
            seq += 1
        signature = None
        if key is not None and bad is None and full_rows:
            head_seq, head_hash = full_rows[-1]["seq"], full_rows[-1]["row_hash"]
            signature = (head_seq, head_hash, logsign.public_hex(key), logsign.sign(key, head_seq, head_hash))
        if not store.append(full_rows, limit if full_rows else None, signature):
            return None
        if bad is None and why_unsigned and _first_warning(_warned_unsigned, store):
            print(f"warning: the access log in {store.location} is appended to without a new signed head: "
                  f"{why_unsigned}. "
                  "'evalgate audit verify' and 'evalgate gate' fail until that is resolved (see 'evalgate audit "
                  "verify').", file=sys.stderr)
        if bad is not None and _first_warning(_warned_broken, store):
            print(f"warning: the access log in {store.location} is already broken at row {bad[0]} ({bad[1]}); new "
                  "entries are still appended and chained, but the log no longer proves who read what. Run "
                  f"'evalgate audit verify' to see the first bad row, and {_broken_advice(bad[1])}.",
                  file=sys.stderr)
        first = full_rows[0]["seq"] if full_rows else seq
        if bad is None and full_rows and (verified.seq if verified else 0) == first - 1:
            store.set_access_log_head(full_rows[-1]["seq"], full_rows[-1]["row_hash"])
        elif bad is not None:
            store.mark_access_log_broken(*bad)
    return full_rows
