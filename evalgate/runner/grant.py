"""The release grant: the only way a run may read a split under purpose ``release-gate``.

The ``release-gate`` purpose is the one purpose a private split's policy admits, so whoever may use it can read the
private set. Policy lives in the library, not in the CLI: ``evaluate`` refuses that purpose unless the options
carry a ``ReleaseGrant`` that the gate's decision holds, for that split, with reads left.

A grant exists only inside a gate's decision: the one way to get one is ``_reserve_release_reads``, which
the gate calls after its policy checks and which first logs (and counts against the budget) every read the gate will
make, in one locked step, or refuses them all; the runs under it are then logged as ``reserved-read`` (not counted
again). The gate revokes its grant when its decision ends (``revoke``), so a grant kept past the gate reads
nothing. There is no function that hands out a grant without that reservation, a grant built by hand
(``ReleaseGrant(...)``) was never issued and is refused, and per-item private outputs are never shown through a
grant (``evalgate.views.samples`` refuses the private tier outright). Every refusal is logged like any other refused
read.

This is a rule of the library, not a sandbox: Python code in the same process can reach any object, and whoever can
read the key file can decrypt the private data directly. The key file (``EVALGATE_PRIVATE_KEY`` or the file it
names) is the boundary (docs/SECURITY.md, "What protects the private split").
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import RELEASE_GATE, Manifest


@dataclass(frozen=True, eq=False)
class ReleaseGrant:
    """A gate's permission to read its decision split under purpose ``release-gate``.

    Attributes:
        gate: the gate policy's name (for messages).
        split: the decision split the grant covers; any other split is refused.
        reads: how many runs the grant admits (each ``evaluate`` under it uses one).
        reserved: its reads were logged and counted when it was issued (``reserve_release_reads``; always).
    """

    gate: str
    split: str
    reads: int
    reserved: bool = True


# Reads left per issued grant. Weak keys: a grant the gate dropped takes its entry with it.
_READS_LEFT: weakref.WeakKeyDictionary[ReleaseGrant, int] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _reserve_release_reads(gate: str, manager: SplitManager, manifest: Manifest, actor: str,
                           reads: list[dict[str, Any]], refusal: str) -> ReleaseGrant:
    """Log all of a gate's release-gate reads of ``manifest``'s split at once (``SplitManager.reserve``: one
    locked step, all or none) and issue a grant for exactly the new ones (outcome ``read``; a ``re-read`` shows a
    stored run and is not evaluated), each logged as ``reserved-read``. Private: only ``evalgate.gate.reads`` calls
    it, inside a gate's decision, which revokes the grant when it ends.

    Args:
        gate: the gate policy's name. manager, manifest, actor: the split manager, decision split, who.
        reads: one dict per read (see ``SplitManager.reserve``); at least one.
        refusal: the message when the budget cannot cover them (``{left}``, ``{used}`` filled in).

    Raises:
        RefusedByPolicy: the budget cannot cover them (logged; nothing spent).
        ValueError: no reads.
    """
    if not reads:
        raise ValueError("a release grant needs at least one read")
    manager.reserve(manifest, actor, RELEASE_GATE, reads, refusal)
    new = sum(1 for r in reads if r.get("outcome", "read") == "read")
    grant = ReleaseGrant(gate, manifest.name, new, reserved=True)
    with _LOCK:
        _READS_LEFT[grant] = new
    return grant


def _reserve_release_reads_all(manager: SplitManager, actor: str,
                               entries: list[tuple[str, Manifest, list[dict[str, Any]], str, bool]],
                               whole: str) -> list[ReleaseGrant | None]:
    """``_reserve_release_reads`` for a suite gate's members at once: every member's reads of its decision split in
    one locked step (``SplitManager.reserve_all``: within every split's budget, or none), then one grant per member
    that evaluates new reads. Private: only ``evalgate.gate.reads.commit`` calls it, inside a suite's decision,
    which revokes the grants when it ends.

    Args:
        entries: per member, (gate name, decision split manifest, its reads, its refusal message, whether it
            evaluates: a grant is issued when it does and has new reads).
        whole: the suite, for the refusal rows (``"suite S"``).

    Returns:
        Per entry, its grant (None: no new read to evaluate).

    Raises:
        RefusedByPolicy: a member's budget cannot cover its reads (logged on every member's split; nothing spent).
    """
    manager.reserve_all([(m, reads, refusal) for _, m, reads, refusal, _ in entries], actor, RELEASE_GATE, whole)
    out: list[ReleaseGrant | None] = []
    for gate, manifest, reads, _, evaluates in entries:
        new = sum(1 for r in reads if r.get("outcome", "read") == "read")
        grant = ReleaseGrant(gate, manifest.name, new, reserved=True) if evaluates and new else None
        if grant is not None:
            with _LOCK:
                _READS_LEFT[grant] = new
        out.append(grant)
    return out


def revoke(grant: ReleaseGrant | None) -> None:
    """End ``grant`` (the gate calls this when its decision ends): its unused reads are void."""
    if grant is not None:
        with _LOCK:
            _READS_LEFT.pop(grant, None)


def refusal_ahead(grant: ReleaseGrant | None, split: str) -> str | None:
    """Why ``grant`` would not admit one more release-gate read of ``split`` (None: it would), using no read: for
    a caller that refuses before costly work (``check_release_purpose`` decides, and logs)."""
    return _refusal(grant, split, use=False)


def _refusal(grant: ReleaseGrant | None, split: str, use: bool = True) -> str | None:
    """Why ``grant`` does not admit one more release-gate read of ``split`` (None: it does; one read is used
    unless ``use`` is False)."""
    reserved = (f"purpose {RELEASE_GATE!r} is reserved for 'evalgate gate': split {split} is read for it only "
                "under a grant the gate issues after its policy and budget checks")
    with _LOCK:
        left = _READS_LEFT.get(grant) if grant is not None else None
        if grant is None:
            return f"{reserved}; run 'evalgate gate --policy FILE' (no grant was given)"
        if left is None:
            return f"{reserved}; this grant was not issued by a gate's decision, or that decision has ended"
        if grant.split != split:
            return f"{reserved}; the grant of gate {grant.gate} covers split {grant.split}, not {split}"
        if left < 1:
            return f"{reserved}; the grant of gate {grant.gate} has used all its {grant.reads} read(s)"
        if use:
            _READS_LEFT[grant] = left - 1
    return None


def check_release_purpose(purpose: str, grant: ReleaseGrant | None, split: str, manager: SplitManager, actor: str,
                          checkpoint_digest: str | None = None, protocol_hash: str | None = None) -> bool:
    """Admit a read for ``purpose``: any purpose but ``release-gate`` passes; ``release-gate`` needs a grant issued
    for ``split`` with a read left (one is used).

    Returns:
        True when the read was reserved (and counted) when the grant was issued: pass it on to
        ``SplitManager.check(reserved=...)``.

    Raises:
        BadInput: unknown split (nothing logged: there is no split to log against).
        RefusedByPolicy: no grant, a grant not issued by the gate, for another split or used up (logged as a
            refused read first).
    """
    if purpose != RELEASE_GATE:
        return False
    refusal = _refusal(grant, split)
    if refusal is None:
        return bool(grant and grant.reserved)
    manager.refuse(split, purpose, actor, refusal, checkpoint_digest=checkpoint_digest, protocol_hash=protocol_hash)
