"""The guard: ``SplitManager`` opens splits under their tier policies (purposes, read budgets, overrides,
contamination checks, reservations) and logs every read and refusal to the store's access log, under the split
that owns the content (``owners.content_owner``). The rules are described in ``evalgate.splits``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from evalgate.access import log as accesslog
from evalgate.core.enums import Outcome, Tier
from evalgate.core.errors import BadInput, EvalgateError, RefusedByPolicy
from evalgate.keys.sealing import SEALED_TIERS, load_key
from evalgate.splits.data import read_unlogged, sha256_hex
from evalgate.splits.discovery import load_manifest
from evalgate.splits.manifest import RELEASE_GATE, Manifest, Policy
from evalgate.splits.owners import ContentOwner, content_owner
from evalgate.store import AccessLogRepo
from evalgate.store.access import CONTAMINATION_CHECK, CONTAMINATION_CHECKS, READS, BudgetLimit, Counted

_RESULT_SHA256 = re.compile(r"result sha256 ([0-9a-f]{64})")  # ``log_result``'s detail


@dataclass
class OpenedSplit:
    """The result of a permitted read: manifest, items in file order, and any budget warning."""

    manifest: Manifest
    items: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


class SplitManager:
    """Opens splits under their tier policies and logs every read and refusal to the store's access log.

    Use ``check`` (logs refusals), then ``read``, then ``log_read``; or ``open`` for all three. Budget windows
    are measured on ``store.clock``.

    Args:
        store: the access log (``AccessLogRepo``; a ``Store`` is one).
        directory: splits directory (default the store's, ``store.env.splits``); the key and the actor are the
            store's environment's too.
    """

    def __init__(self, store: AccessLogRepo, directory: Path | None = None):
        self.store = store
        self.directory = directory or store.env.splits
        self._overridden: set[str] = set()  # splits whose budget ``check`` let an override reason exceed
        self._reserved: set[str] = set()  # splits ``check`` admitted for a read ``reserve`` already logged
        self._admitted: set[str] = set()  # splits ``check`` admitted: ``read`` returns sealed tiers' items only then
        self._owners: dict[tuple[str, str], ContentOwner] = {}

    def owner(self, m: Manifest) -> ContentOwner:
        """``content_owner`` of ``m`` (computed once per manager)."""
        key = (m.name, m.content_sha256)
        if key not in self._owners:
            self._owners[key] = content_owner(m, self.store, self.directory)
        return self._owners[key]

    def window_start(self, policy: Policy) -> datetime:
        """Start of the policy's budget window, on the store's clock."""
        return self.store.clock() - timedelta(days=policy.window_days)

    def reads_in_window(self, split: str | tuple[str, ...], policy: Policy) -> int:
        """What the read budget counts (``store.access.READS``: permitted reads, cached or not, except contamination
        checks) of ``split`` (a name, or every name of one content: ``ContentOwner.names``) in the window."""
        return self.store.count((split,) if isinstance(split, str) else split, self.window_start(policy), READS)

    def contamination_checks_in_window(self, split: str | tuple[str, ...], policy: Policy) -> int:
        """What the contamination-check budget counts (``store.access.CONTAMINATION_CHECKS``) of ``split`` (a name,
        or every name of one content) in the window."""
        return self.store.count((split,) if isinstance(split, str) else split, self.window_start(policy),
                                CONTAMINATION_CHECKS)

    def budget(self, own: ContentOwner, policy: Policy, counted: Counted = READS) -> BudgetLimit:
        """The limit an append of ``own``'s rows must keep: the policy's ``max_reads`` (``READS``) or
        ``max_contamination_checks`` (``CONTAMINATION_CHECKS``) over every name of the content, in the window."""
        cap = policy.max_contamination_checks if counted == CONTAMINATION_CHECKS else policy.max_reads
        return BudgetLimit(own.names, self.window_start(policy), cap or 0, counted)

    def check(self, name: str, purpose: str, actor: str, override_reason: str | None = None,
              checkpoint_digest: str | None = None, protocol_hash: str | None = None, *,
              contamination_check: bool = False, reserved: bool = False) -> tuple[Manifest, list[str]]:
        """Decide whether ``actor`` may read split ``name`` for ``purpose``; log a refusal as such.

        ``reserved=True`` (the runner passes it for a read under a grant that ``runner.grant`` issued):
        the read was logged and counted by ``reserve`` before; the budget is not checked again and ``log_read``
        logs it as ``reserved-read``, which no budget counts.

        ``contamination_check=True`` (only ``evalgate.splits.contamination`` passes it, with purpose
        ``contamination-check``) reads any tier without spending the read budget, within the tier's
        ``max_contamination_checks`` (hard); any other reader giving that purpose is refused, so ``run --purpose
        contamination-check`` cannot read a score for free.

        Refused (and logged as ``refused``): a purpose the tier does not allow; an exhausted budget (a soft
        budget accepts ``override_reason``, then logged as ``override``); a data file that no longer matches
        its manifest; an encrypted split with no key available.

        Returns:
            (manifest, warnings); a warning from ``warn_at`` of the budget on, or when an override is used.

        Raises:
            BadInput: unknown split or invalid manifest; data file missing or changed (logged as refused).
            RefusedByPolicy: the policy refuses the read, or no key (the refusal is logged first).
        """
        m = self.manifest(name)
        own = self.owner(m)
        policy = own.manifest.effective_policy()
        self._overridden.discard(name)
        self._reserved.discard(name)
        self._admitted.discard(name)
        ruling = rule_read(own.manifest, policy, purpose, self._counter(own, policy),
                           contamination_check=contamination_check, reserved=reserved, override_reason=override_reason,
                           read_as=name)
        refusal = ruling.refusal
        if ruling.overridden:
            self._overridden.add(name)
        error: EvalgateError | None = RefusedByPolicy(refusal) if refusal else self._unreadable(m)
        if error:
            self._log(m, actor, purpose, "refused", False, checkpoint_digest, protocol_hash, None, error.message)
            raise error
        if reserved:
            self._reserved.add(name)
        self._admitted.add(name)
        return m, list(ruling.warnings)

    def _counter(self, own: ContentOwner, policy: Policy) -> Callable[[Counted], int]:
        """Counts, on demand, what a budget of ``own``'s content counts in ``policy``'s window."""
        return lambda counted: self.store.count(own.names, self.window_start(policy), counted)

    def refusal_ahead(self, name: str, purpose: str) -> str | None:
        """Why ``check`` would refuse a read of split ``name`` for ``purpose`` by its tier's purposes or a hard read
        budget already spent, decided without logging anything; None when those allow it (``check`` still decides,
        and logs).

        For a caller with costly work between choosing a split and reading it (the runner re-hashes or
        re-converts a checkpoint before a read that trust decisions rest on): a read bound to be refused is
        refused first. Purpose ``contamination-check`` and a budget with room are left to ``check``.

        Raises:
            BadInput: unknown split or invalid manifest.
        """
        m = self.manifest(name)
        own = self.owner(m)
        policy = own.manifest.effective_policy()
        if purpose == CONTAMINATION_CHECK:
            return None
        ruling = rule_read(own.manifest, policy, purpose, self._counter(own, policy),
                           reserved=purpose == RELEASE_GATE)
        return None if ruling.overridable else ruling.refusal

    def reserve(self, manifest: Manifest, actor: str, purpose: str, reads: list[dict[str, Any]],
                refusal: str) -> list[dict[str, Any]]:
        """Log every read a caller will make of a budgeted split, before any is made, in one locked step: all of
        them if the budget's window has room for all, else none and one ``refused`` row (two gates at
        once must not drain a budget and both fail; one decides, the other is refused having spent nothing).

        Each row has outcome ``read`` (it counts against the budget like any read); the reads made afterwards are
        admitted with ``check(reserved=True)`` and logged as ``reserved-read`` (not counted again). A reservation
        the caller does not use up stays spent.

        Args:
            manifest: the split's manifest (its purposes and readability checked with ``check`` before).
            actor, purpose: who reads and what for.
            reads: one dict per read: ``checkpoint_digest``, ``protocol_hash``, ``run_id``, ``cached``, ``detail``
                (each optional).
            refusal: the message when the budget cannot cover them; ``{left}`` and ``{used}`` are filled in.

        Returns:
            The logged rows, in order.

        Raises:
            RefusedByPolicy: the window has too few reads left (the refusal is logged; nothing is spent).
        """
        own = self.owner(manifest)
        policy = own.manifest.effective_policy()
        limit = self.budget(own, policy) if policy.max_reads is not None else None
        rows = [accesslog.entry(actor=actor, split=own.manifest.name, tier=own.manifest.tier, purpose=purpose,
                                outcome=r.get("outcome", "read"), cached=bool(r.get("cached")),
                                checkpoint_digest=r.get("checkpoint_digest"), protocol_hash=r.get("protocol_hash"),
                                run_id=r.get("run_id"), detail=_as_alias(manifest, own, r.get("detail")))
                for r in reads]
        with self.store.session():  # the count, the rows and a refusal under one lock
            logged = accesslog.append_many(self.store, rows, limit)
            if logged is None:
                used = self.reads_in_window(own.names, policy)
                msg = refusal.format(left=max(0, (policy.max_reads or 0) - used), used=used)
                self._log(manifest, actor, purpose, "refused", False, None, None, None, msg)
                raise RefusedByPolicy(msg)
        return logged

    def reserve_all(self, entries: list[tuple[Manifest, list[dict[str, Any]], str]], actor: str, purpose: str,
                    whole: str) -> list[list[dict[str, Any]]]:
        """``reserve`` for several splits at once (a suite gate's members): every entry's rows in one locked step,
        within every split's budget (one content's names share one), or none of them.

        Args:
            entries: per member, (decision split manifest, its reads as for ``reserve``, its refusal message with
                ``{left}`` and ``{used}``).
            actor, purpose: who reads and what for.
            whole: what is refused, for the rows logged on the splits whose budget would have covered their reads
                (``"suite S"``).

        Returns:
            Per entry, its logged rows, in order.

        Raises:
            RefusedByPolicy: some split's window has too few reads left: one ``refused`` row is logged on every
                entry's split (the short ones with their own message, the others naming the short ones); nothing
                is spent on any.
        """
        rows, owners, limits = [], [], {}
        for manifest, reads, _ in entries:
            own = self.owner(manifest)
            owners.append(own)
            pol = own.manifest.effective_policy()
            if pol.max_reads is not None:
                limits[own.names] = self.budget(own, pol)
            rows += [accesslog.entry(actor=actor, split=own.manifest.name, tier=own.manifest.tier, purpose=purpose,
                                     outcome=r.get("outcome", "read"), cached=bool(r.get("cached")),
                                     checkpoint_digest=r.get("checkpoint_digest"),
                                     protocol_hash=r.get("protocol_hash"), run_id=r.get("run_id"),
                                     detail=_as_alias(manifest, own, r.get("detail"))) for r in reads]
        with self.store.session():  # the counts, the rows and the refusals under one lock
            logged = accesslog.append_many(self.store, rows, list(limits.values()))
            if logged is None:
                self._refuse_all(entries, owners, actor, purpose, whole)
        assert logged is not None
        out, i = [], 0
        for _, reads, _ in entries:
            out.append(logged[i:i + len(reads)])
            i += len(reads)
        return out

    def _refuse_all(self, entries: list[tuple[Manifest, list[dict[str, Any]], str]], owners: list[ContentOwner],
                    actor: str, purpose: str, whole: str) -> NoReturn:
        """Log why ``reserve_all`` refused on every entry's split and raise it (nothing was appended)."""
        need: dict[tuple[str, ...], int] = {}
        for (_, reads, _), own in zip(entries, owners, strict=True):
            need[own.names] = need.get(own.names, 0) + sum(1 for r in reads if r.get("outcome", "read") == "read")
        short, msgs = [], {}
        for (manifest, _, refusal), own in zip(entries, owners, strict=True):
            pol = own.manifest.effective_policy()
            if pol.max_reads is None:
                continue
            used = self.reads_in_window(own.names, pol)
            if used + need[own.names] > pol.max_reads:
                short.append(manifest.name)
                msgs[manifest.name] = refusal.format(left=max(0, pol.max_reads - used), used=used)
        names = ", ".join(dict.fromkeys(short)) or "a member's split"
        for manifest, _, _ in entries:
            why = msgs.get(manifest.name) or (f"{whole} is refused as a whole: the budget of {names} cannot cover "
                                              "its reads, and a suite reads all its members or none; nothing was "
                                              "read or spent on any member")
            self._log(manifest, actor, purpose, "refused", False, None, None, None, why)
        raise RefusedByPolicy(f"{whole}: the budget of {names} cannot cover the suite's reads ("
                              + "; ".join(msgs.values()) + "); a suite reads all its members or none: nothing was "
                              "read or spent on any member")

    def check_purpose(self, name: str, purpose: str, actor: str) -> Manifest:
        """Refuse, before any work, a command whose purpose split ``name``'s tier policy never allows (``watch`` or
        ``sweep`` on a private split): such a command must not start, nor reuse the complete runs others made
        there. The budget is not checked here; each read checks it.

        Returns:
            The split's manifest.

        Raises:
            BadInput: unknown split or invalid manifest.
            RefusedByPolicy: the tier's policy does not list ``purpose`` (the refusal is logged first).
        """
        m = self.manifest(name)
        own = self.owner(m).manifest
        refusal = _purpose_refusal(own, own.effective_policy(), purpose)
        if refusal:
            self.refuse(name, purpose, actor, refusal)
        return m

    def refuse(self, name: str, purpose: str, actor: str, reason: str, error: type[EvalgateError] = RefusedByPolicy,
               checkpoint_digest: str | None = None, protocol_hash: str | None = None) -> NoReturn:
        """Log a refused attempt on split ``name`` (who, what, why) and raise it: for refusals decided outside
        ``check`` (a purpose reserved for the gate, a command that needs another tier).

        Raises:
            ``error`` (default RefusedByPolicy) with ``reason``, after the row is appended; BadInput for an unknown
            split (nothing to log it under).
        """
        m = self.manifest(name)
        self._log(m, actor, purpose, "refused", False, checkpoint_digest, protocol_hash, None, reason)
        raise error(reason)

    def _unreadable(self, m: Manifest) -> EvalgateError | None:
        """Why the data cannot be read: BadInput for a missing or changed file, RefusedByPolicy for no key."""
        path = self.directory / m.data
        if not path.is_file():
            return BadInput(f"split {m.name}: data file {path} is missing; re-import the split")
        digest = sha256_hex(path.read_bytes())
        if digest != m.sha256:
            return BadInput(f"split {m.name}: data file {path} changed since its manifest was written (sha256 "
                            f"{digest[:12]} != {m.sha256[:12]}); restore it or re-import the split")
        if m.encrypted:
            try:
                load_key(env=self.store.env)
            except RefusedByPolicy as e:
                return RefusedByPolicy(f"split {m.name}: {e.message}")
        try:  # the key decrypts it and the content is the manifest's (a manifest may not claim another content)
            read_unlogged(m, self.directory, env=self.store.env)
        except EvalgateError as e:
            return e
        return None

    def manifest(self, name: str) -> Manifest:
        return load_manifest(name, self.directory)

    def read(self, manifest: Manifest) -> list[dict[str, Any]]:
        """The split's items (not logged by itself; pair with ``log_read``).

        Raises:
            RefusedByPolicy: a private or human-audit split that ``check`` has not admitted on this manager (a
                library caller must not read sealed items past the policy and the log).
        """
        if manifest.tier in SEALED_TIERS and manifest.name not in self._admitted:
            raise RefusedByPolicy(f"split {manifest.name} (tier {manifest.tier}) is read only after "
                                  "SplitManager.check admits it (and log_read logs it); call check first")
        return read_unlogged(manifest, self.directory, env=self.store.env)

    def log_read(self, manifest: Manifest, actor: str, purpose: str, cached: bool,
                 checkpoint_digest: str | None = None, protocol_hash: str | None = None, run_id: str | None = None,
                 override_reason: str | None = None, detail: str | None = None) -> dict[str, Any]:
        """Append the access-log row for a read that ``check`` permitted.

        The outcome is ``override`` when ``check`` let ``override_reason`` exceed a soft budget (the reason is
        the row's detail), ``reserved-read`` when ``check`` admitted it as reserved (``reserve`` logged and counted
        it before; not counted again), else ``read``. A budgeted read is counted and appended atomically: if
        concurrent readers used the budget up since ``check``, the read is logged as ``refused`` instead.

        Raises:
            RefusedByPolicy: the budget was used up between ``check`` and this call.
        """
        own = self.owner(manifest)
        policy = own.manifest.effective_policy()
        overridden = manifest.name in self._overridden and bool(override_reason)
        reserved = manifest.name in self._reserved
        limit = None
        contamination = purpose == CONTAMINATION_CHECK
        if policy.max_reads is not None and not overridden and not reserved and not contamination:
            limit = self.budget(own, policy)
        elif contamination and policy.max_contamination_checks is not None:
            limit = self.budget(own, policy, CONTAMINATION_CHECKS)
        outcome = (Outcome.OVERRIDE if overridden else Outcome.RESERVED_READ if reserved else Outcome.READ).value
        row = self._log(manifest, actor, purpose, outcome, cached, checkpoint_digest,
                        protocol_hash, run_id, override_reason if overridden else detail, limit)
        if row is None:
            refusal = (_contamination_refusal(own.manifest, policy, policy.max_contamination_checks or 0)
                       if contamination else _budget_refusal(own.manifest, policy, policy.max_reads or 0))
            self._log(manifest, actor, purpose, "refused", False, checkpoint_digest, protocol_hash, run_id, refusal)
            raise RefusedByPolicy(refusal)
        return row

    def log_judge_read(self, manifest: Manifest, actor: str, purpose: str, cached: bool, checkpoint_digest: str,
                       protocol_hash: str, run_id: str, detail: str) -> dict[str, Any] | None:
        """Append the row for an LLM judge shown the items and checkpoint ``checkpoint_digest``'s completions in
        run ``run_id``, whose own read was admitted and logged (``log_read``): outcome ``judge-read``, not charged
        against the budget again (it is that run's read); logged before the judge sees anything. ``detail`` names
        the judge; ``cached``: every verdict comes from the generation cache (the judge is shown nothing)."""
        return self._log(manifest, actor, purpose, Outcome.JUDGE_READ.value, cached, checkpoint_digest, protocol_hash,
                         run_id, detail)

    def open(self, name: str, purpose: str, actor: str, cached: bool = False,
             override_reason: str | None = None, detail: str | None = None, *,
             contamination_check: bool = False) -> OpenedSplit:
        """Check, read and log in one step (for readers that do not use the generation cache)."""
        m, warnings = self.check(name, purpose, actor, override_reason, contamination_check=contamination_check)
        items = self.read(m)
        self.log_read(m, actor, purpose, cached, override_reason=override_reason, detail=detail)
        return OpenedSplit(m, items, warnings)

    def log_event(self, manifest: Manifest, actor: str, purpose: str, outcome: str, *, cached: bool = False,
                  protocol_hash: str | None = None, detail: str | None = None, run_id: str | None = None,
                  checkpoint_digest: str | None = None) -> None:
        """Append one access-log row that no budget limits, for an event decided outside ``check``: a gate that
        reused earlier decision runs (outcome ``reused``), a broken hash chain accepted by the policy, a release-gate
        run's stored ``result``. The row goes to the content's owner, like every row of this manager.
        """
        self._log(manifest, actor, purpose, outcome, cached, checkpoint_digest, protocol_hash, run_id, detail)

    def log_result(self, manifest: Manifest, actor: str, run_id: str, checkpoint_digest: str, protocol_hash: str,
                   result_sha256: str) -> None:
        """Append the ``result`` row of a release-gate run: the sha256 of its stored result
        (``RunRepo.result_sha256``) as a gate was shown it (when the run completed, or when a gate first took it
        from the store), which ``recorded_result`` reads back. Not charged."""
        self.log_event(manifest, actor, RELEASE_GATE, Outcome.RESULT.value, protocol_hash=protocol_hash,
                       run_id=run_id, checkpoint_digest=checkpoint_digest,
                       detail=f"result sha256 {result_sha256} of run {run_id}, as the gate was shown it")

    def recorded_result(self, manifest: Manifest, run_id: str) -> str | None:
        """The result sha256 the access log recorded for run ``run_id`` (``log_result``) under any name of the
        split's content, or None when it recorded none."""
        with self.store.session():
            found = [m.group(1) for n in self.owner(manifest).names for r in self.store.access_rows(n)
                     if r.outcome == Outcome.RESULT.value and r.run_id == run_id
                     and (m := _RESULT_SHA256.search(r.detail or ""))]
        return found[-1] if found else None

    def _log(self, m: Manifest, actor: str, purpose: str, outcome: str, cached: bool, checkpoint_digest: str | None,
             protocol_hash: str | None, run_id: str | None, detail: str | None,
             limit: BudgetLimit | None = None) -> dict[str, Any] | None:
        own = self.owner(m)  # the row goes to the content's owner, whatever manifest named it
        return accesslog.append(self.store, accesslog.entry(
            actor=actor, split=own.manifest.name, tier=own.manifest.tier, purpose=purpose, outcome=outcome,
            cached=cached, checkpoint_digest=checkpoint_digest, protocol_hash=protocol_hash, run_id=run_id,
            detail=_as_alias(m, own, detail)), limit)


def _as_alias(m: Manifest, own: ContentOwner, detail: str | None) -> str | None:
    """A row's detail, saying which manifest was read when it is not the owner's."""
    if own.manifest.name == m.name:
        return detail
    note = (f"read as split {m.name} ({m.name}.yaml), whose content is split {own.manifest.name}'s: its budget and "
            "audit rows are that split's")
    return f"{note}; {detail}" if detail else note


@dataclass(frozen=True)
class ReadRuling:
    """What a split's tier policy rules on one read (``rule_read``).

    Attributes:
        refusal: why the read is refused; None when the policy admits it.
        overridable: the refusal is a soft budget spent, which an override reason would lift.
        overridden: admitted past a spent soft budget on the override reason given (logged as ``override``).
        warnings: budget warnings for the reader (``warn_at`` reached, an override used).
    """

    refusal: str | None = None
    overridable: bool = False
    overridden: bool = False
    warnings: tuple[str, ...] = ()


def rule_read(m: Manifest, policy: Policy, purpose: str, used: Callable[[Counted], int], *,
              contamination_check: bool = False, reserved: bool = False,
              override_reason: str | None = None, read_as: str | None = None) -> ReadRuling:
    """The one place that decides whether a read of split ``m`` (the content's owner) for ``purpose`` is refused by
    its tier ``policy``, and why: purposes, the read budget, the contamination-check budget. Logs nothing, reads no
    data; ``SplitManager.check`` (which then logs, and checks the data file) and ``SplitManager.refusal_ahead`` both
    call it.

    Args:
        m, policy: the content owner's manifest and its effective policy.
        purpose: what the read is for.
        used: counts what a budget counts in the window (``READS`` or ``CONTAMINATION_CHECKS``); called only when a
            budget applies.
        contamination_check: the reader is ``evalgate.splits.contamination`` (purpose ``contamination-check``
            reads free of the read budget, within ``max_contamination_checks``).
        reserved: the read was counted by ``reserve`` before; the read budget is not checked again.
        override_reason: lifts a spent soft budget.
        read_as: the name the reader gave (an alias of ``m``'s content), for the warnings; default ``m.name``.

    Returns:
        The ruling (``ReadRuling``).
    """
    free = contamination_check and purpose == CONTAMINATION_CHECK  # see evalgate.splits' docstring
    if purpose == CONTAMINATION_CHECK and not free:
        return ReadRuling(f"purpose {purpose!r} is reserved for 'evalgate splits contamination', whose output holds "
                          "no item text and no score; give another purpose")
    if not free and (purpose_refusal := _purpose_refusal(m, policy, purpose)):
        return ReadRuling(purpose_refusal)
    if free:
        if policy.max_contamination_checks is not None \
                and (checks := used(CONTAMINATION_CHECKS)) >= policy.max_contamination_checks:
            return ReadRuling(_contamination_refusal(m, policy, checks))
        return ReadRuling()
    if policy.max_reads is None or reserved:
        return ReadRuling()
    reads, name = used(READS), read_as or m.name
    if reads >= policy.max_reads:
        if policy.hard or not override_reason:
            return ReadRuling(_budget_refusal(m, policy, reads), overridable=not policy.hard)
        return ReadRuling(overridden=True, warnings=(
            f"split {name}: budget of {policy.max_reads} reads per {policy.window_days} days used up ({reads}); "
            f"reading under override ({override_reason!r}, logged)",))
    if reads + 1 >= policy.warn_at * policy.max_reads:
        return ReadRuling(warnings=(f"split {name}: this is read {reads + 1} of {policy.max_reads} allowed per "
                                    f"{policy.window_days} days",))
    return ReadRuling()


def _purpose_refusal(m: Manifest, policy: Policy, purpose: str) -> str | None:
    """Why ``purpose`` may not read split ``m`` under ``policy`` (None when it may)."""
    if policy.purposes is None or purpose in policy.purposes:
        return None
    return (f"split {m.name} (tier {m.tier}) may be read only for purpose {', '.join(policy.purposes)}, not "
            f"{purpose!r}" + ("; private splits are read by 'evalgate gate'" if m.tier == Tier.PRIVATE
                              else "; its manifest's policy sets the purposes"))


def _budget_refusal(m: Manifest, policy: Policy, used: int) -> str:
    return (f"split {m.name} (tier {m.tier}) has used its budget of {policy.max_reads} reads per "
            f"{policy.window_days} days ({used} used); "
            + ("wait for the window to pass" if policy.hard else "pass --override-reason TEXT to read anyway (logged)"))


def _contamination_refusal(m: Manifest, policy: Policy, used: int) -> str:
    return (f"split {m.name} (tier {m.tier}) has used its budget of {policy.max_contamination_checks} contamination "
            f"checks per {policy.window_days} days ({used} used): each check answers a bit per item about its text, "
            "so they are budgeted like reads; wait for the window to pass, or check a dev or public copy")
