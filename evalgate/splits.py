"""Split manifests, tiers and their access policies, encryption of private data, and logged reads.

A split is a named item set with a tier (``smoke``, ``dev``, ``public``, ``private``, ``human-audit``). Its
manifest (``<splits dir>/<name>.yaml``) records the data file, the file's sha256, the item count, provenance and
policy overrides; a data file whose bytes no longer match is refused. Private data is encrypted at rest (Fernet,
from ``cryptography``). Every read, cached re-read and refusal appends a row to the hash-chained access log in the
store.

Default tier policies (a manifest may only tighten them):

============  =================================  ==========================================================
tier          purposes                           budget
============  =================================  ==========================================================
smoke         any                                none
dev           any                                none
public        any                                soft: 20 reads / 30 days; warn from 80 %; beyond that refused
                                                 unless an override reason is given (and logged)
private       ``release-gate`` only              hard: 4 reads / 30 days
human-audit   any                                none
============  =================================  ==========================================================

Purpose ``contamination-check`` (``evalgate splits contamination`` only; any other reader giving it is refused)
may read every tier, whatever its purposes, and never counts against the read budget, in ``SplitManager`` or in
the store's atomic count. A budget limits how often people learn a model's score on a held-out set, because every
score they see and act on makes the set less held-out (adaptive overfitting; Dwork et al. 2015, "The reusable
holdout"). A contamination check shows no model output and no item text; and the private split is the one whose
contamination matters most for a release. But its answer is about the items' text, and the corpus is the caller's:
a corpus holding a guess answers whether the guess is in the split. So on the sealed tiers (private, human-audit) a
check answers one bit per item (flagged or not, ``evalgate.contamination``) and has a budget of its own,
``max_contamination_checks`` per ``window_days`` (default 4 per 30 days, hard), counted atomically like reads and
shown by ``evalgate audit``. Every check is logged like any read, so ``evalgate audit`` shows who checked what,
with which corpus.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalgate import accesslog, splits_sources
from evalgate.enums import Outcome
from evalgate.environment import active
from evalgate.errors import BadInput, EvalgateError, RefusedByPolicy
from evalgate.fileio import atomic_write, iter_jsonl, read_text
from evalgate.sealing import SEALED_TIERS, key_file, load_key  # noqa: F401 - key_file: part of this module's API
from evalgate.store import Store
from evalgate.userfiles import format_validation_error, load_yaml_mapping

Tier = Literal["smoke", "dev", "public", "private", "human-audit"]  # = the values of enums.Tier (a test checks)
TIERS: tuple[str, ...] = ("smoke", "dev", "public", "private", "human-audit")
RELEASE_GATE = "release-gate"
ADD_PURPOSE = "add-split"
"""The purpose logged when a split is added (outcome ``added``) or an addition is refused."""
CONTAMINATION_CHECK = "contamination-check"  # allowed on every tier, never spends a budget (see above)
LIBRARY_READ = "library-read"
"""The purpose logged when ``read_items`` refuses a private or human-audit split."""
PARTITION_SALT = "evalgate-partition-v1"
SMOKE_SIZE = 8


class Policy(BaseModel):
    """A tier's access policy."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    purposes: list[str] | None = None
    """Purposes allowed to read; None allows any."""
    max_reads: int | None = Field(None, ge=0)
    """Reads allowed per window; None for no budget."""
    window_days: int = Field(30, ge=1)
    """Budget window, days. Default: 30."""
    hard: bool = False
    """Hard budget: refuse beyond it, no override. Soft: refuse unless an override reason is given."""
    warn_at: float = Field(0.8, gt=0, le=1)
    """Share of the budget from which reads warn. Default: 0.8."""
    max_contamination_checks: int | None = Field(None, ge=0)
    """Contamination checks (``evalgate splits contamination``) allowed per window, refused beyond (hard); None for
    no budget. Default: 4 on the private and human-audit tiers, none elsewhere."""


DEFAULT_POLICIES: dict[str, Policy] = {
    "smoke": Policy(),
    "dev": Policy(),
    "public": Policy(max_reads=20, window_days=30, hard=False),
    "private": Policy(purposes=[RELEASE_GATE], max_reads=4, window_days=30, hard=True, max_contamination_checks=4),
    "human-audit": Policy(max_contamination_checks=4),
}


class Manifest(BaseModel):
    """A split manifest file (``<splits dir>/<name>.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Split name, unique in the splits directory."""
    tier: Tier
    """One of smoke, dev, public, private, human-audit."""
    data: str
    """Data file, relative to the manifest: JSONL with an ``id`` per record (``.enc`` when encrypted)."""
    sha256: str
    """sha256 of the data file's bytes as stored; a mismatch refuses every read."""
    content_sha256: str
    """sha256 of the plaintext JSONL (the split's identity, recorded by runs)."""
    count: int = Field(ge=0)
    """Number of items."""
    encrypted: bool = False
    """Whether the data file is Fernet-encrypted (required for the private tier)."""
    provenance: dict[str, Any] = {}
    """Where the data came from: source, license, partition rule."""
    policy: Policy | None = None
    """Overrides of the tier's default policy; may only tighten it."""

    @model_validator(mode="after")
    def _private_is_encrypted(self) -> Manifest:
        # Tier and encryption are bound: editing a private manifest's tier to escape its policy is refused.
        if (self.tier == "private") != self.encrypted:
            raise ValueError(f"tier {self.tier} with encrypted={self.encrypted}: private splits, and only they, "
                             "are encrypted; re-import the split instead of editing its manifest")
        return self

    def effective_policy(self) -> Policy:
        """The tier default with the manifest's overrides applied (fields the manifest sets replace the default's).

        An override may only tighten: fewer purposes, fewer reads, a longer window, an earlier warning, a hard
        budget instead of a soft one.

        Raises:
            BadInput: an override loosens the tier default.
        """
        base = DEFAULT_POLICIES[self.tier]
        if self.policy is None:
            return base
        p = base.model_copy(update={k: getattr(self.policy, k) for k in self.policy.model_fields_set})
        fewer_purposes = p.purposes is not None and set(p.purposes) <= set(base.purposes or p.purposes)
        loosened = [what for what, bad in (
            ("purposes", base.purposes is not None and not fewer_purposes),
            ("max_reads", base.max_reads is not None and (p.max_reads is None or p.max_reads > base.max_reads)),
            ("window_days", (base.max_reads is not None or base.max_contamination_checks is not None)
             and p.window_days < base.window_days),
            ("max_contamination_checks", base.max_contamination_checks is not None
             and (p.max_contamination_checks is None or p.max_contamination_checks > base.max_contamination_checks)),
            ("warn_at", p.warn_at > base.warn_at),
            ("hard", base.hard and not p.hard),
        ) if bad]
        if loosened:
            raise BadInput(f"split {self.name}: the manifest's policy loosens the {self.tier} tier's default in "
                           f"{', '.join(loosened)} (default {base.model_dump()}); a manifest may only tighten it")
        return p


@dataclass
class OpenedSplit:
    """The result of a permitted read: manifest, items in file order, and any budget warning."""

    manifest: Manifest
    items: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


def splits_dir() -> Path:
    """The active splits directory (``evalgate.environment``: the workspace's, else ``$EVALGATE_SPLITS``, default
    ``./splits``)."""
    return active().splits


def actor_name(explicit: str | None = None) -> str:
    """The actor: ``explicit`` (``--actor``), else the active one (the workspace's, else ``$EVALGATE_ACTOR``), else
    the OS user."""
    return explicit or active().actor_name


# -- encryption --------------------------------------------------------------------------------------------------
def _fernet(create: bool = False):  # noqa: ANN202 - cryptography type stays lazy
    from cryptography.fernet import Fernet

    try:
        return Fernet(load_key(create))
    except ValueError as e:
        raise BadInput(f"the private split key is not a valid Fernet key ({e}); check EVALGATE_PRIVATE_KEY") from e


# -- manifests and data ------------------------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_jsonl(data: bytes, where: str) -> list[dict[str, Any]]:
    """Parse JSONL records, each an object with a unique ``id``: a non-empty string, or an integer, which becomes
    its decimal text (``1`` -> ``"1"``, as user data often numbers its items) so every id in evalgate is a string.

    Raises:
        BadInput: naming the line of the first bad record (an id of another type, e.g. ``1.5`` or ``true``; ids
            that are equal as text, e.g. ``1`` and ``"1"``, are duplicates).
    """
    items, seen = [], set()
    for i, rec in iter_jsonl(data, where):
        if not isinstance(rec, dict):
            raise BadInput(f"{where}:{i}: each record must be a JSON object with a non-empty string or integer 'id'")
        if isinstance(rec.get("id"), int) and not isinstance(rec["id"], bool):
            rec["id"] = str(rec["id"])
        if not isinstance(rec.get("id"), str) or not rec["id"]:
            got = "no 'id'" if "id" not in rec else f"'id' {json.dumps(rec['id'])} ({type(rec['id']).__name__})"
            raise BadInput(f"{where}:{i}: each record must be a JSON object with a non-empty string or integer "
                           f"'id'; this one has {got}")
        if rec["id"] in seen:
            raise BadInput(f"{where}:{i}: duplicate id {rec['id']!r}; ids must be unique within a split")
        seen.add(rec["id"])
        items.append(rec)
    return items


def _dump_jsonl(items: Iterable[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(it, ensure_ascii=False, sort_keys=True) + "\n" for it in items).encode("utf-8")


def write_split(name: str, tier: str, items: list[dict[str, Any]], provenance: dict[str, Any],
                directory: Path | None = None, policy: Policy | None = None) -> Path:
    """Write a split's data file and manifest (private tier: encrypted; private and human-audit tiers: the key
    is created when missing, since their runs' outputs are encrypted with it). Existing files are replaced atomically.

    Returns:
        The manifest path.

    Raises:
        BadInput: unknown tier or bad name.
    """
    if tier not in TIERS:
        raise BadInput(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    d = directory or splits_dir()
    d.mkdir(parents=True, exist_ok=True)
    plain = _dump_jsonl(items)
    encrypted = tier == "private"
    stored = _fernet(create=True).encrypt(plain) if encrypted else plain
    if tier in SEALED_TIERS and not encrypted:  # its runs' outputs are encrypted in the store with the same key
        load_key(create=True)
    data_name = f"{name}.jsonl.enc" if encrypted else f"{name}.jsonl"
    try:
        manifest = Manifest(name=name, tier=tier, data=data_name, sha256=_sha256(stored),  # type: ignore[arg-type]
                            content_sha256=_sha256(plain), count=len(items), encrypted=encrypted,
                            provenance=provenance, policy=policy)
    except ValidationError as e:
        raise BadInput(f"split {name!r}: {e.errors()[0]['msg']}") from e
    manifest.effective_policy()  # refuse a policy that loosens the tier's default before writing anything
    for path, content in ((d / data_name, stored),
                          (d / f"{name}.yaml", yaml.safe_dump(
                              manifest.model_dump(mode="json", exclude_none=True, exclude_unset=True),
                              sort_keys=False).encode())):
        atomic_write(path, content)
    return d / f"{name}.yaml"


def add_split(name: str, tier: str, file: Path, source: str | None = None, policy: dict[str, Any] | None = None,
              replace: bool = False, store: Store | None = None, actor: str | None = None,
              fmt: str | None = None, mapping: list[str] | None = None, row_ids: bool = False) -> Path:
    """Add a split from a JSONL, CSV or Parquet file or a ``datasets`` folder (``evalgate splits add``).

    An existing split is never replaced silently: ``replace`` must be given, the tier must stay the same (a
    private split can never become a dev one), and the replacement is logged in the access log (outcome
    ``replaced``, with the old and new content hashes). Every addition is logged too (outcome ``added``).

    A split's read budget belongs to its content, not its name: items that repeat a private split (its very
    content, or at least ``NEAR_DUPLICATE_SHARE`` of the new items matching its items by id or normalised text)
    are refused under any other name and any tier, and the attempt is logged as ``refused`` under both names.

    Args:
        name: split name.
        tier: one of ``TIERS``.
        file: JSONL, one object with a unique string or integer ``id`` per line (integers are stored as text);
            or, through ``splits_sources.read_items``, a CSV or Parquet file or a ``datasets`` folder.
        source: provenance text (default: the file path).
        policy: policy fields that tighten the tier's default (``Policy`` fields), or None.
        replace: replace an existing split of the same tier.
        store: store for the access log (default ``Store()``).
        actor: who (default ``actor_name()``).
        fmt: ``splits_sources.FORMATS`` name, or None to detect it from the path.
        mapping: ``FIELD=COLUMN`` strings (``splits_sources.Mapping``): the item's fields, or None for every column.
        row_ids: number items by row where the data has no ``id``.

    Returns:
        The manifest path.

    Raises:
        BadInput: missing or empty file, bad record (with its line), a mapping naming a missing column (with the
            columns there are), unknown format, invalid policy, or an existing split without ``replace`` / with
            another tier. Nothing is written.
        RefusedByPolicy: the items repeat another private split (logged).
    """
    if fmt is None and not mapping and not row_ids and file.suffix.lower() in (".jsonl", ".ndjson"):
        if not file.is_file():
            raise BadInput(f"{file} not found; pass a JSONL file with --file")
        items = parse_jsonl(file.read_bytes(), str(file))
    else:
        items = splits_sources.read_items(file, fmt, splits_sources.Mapping.parse(mapping or []), row_ids)
    if not items:
        raise BadInput(f"{file} holds no records; a split needs at least one JSONL object with an 'id'")
    try:
        pol = Policy.model_validate(policy) if policy else None
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in er['loc'])}: {er['msg']}" for er in e.errors())
        raise BadInput(f"split {name}: invalid policy option ({errs})") from e
    store, who = store or Store(), actor_name(actor)
    old = _check_existing(name, tier, replace, store, who)
    _refuse_private_copy(name, tier, items, file, store, who)
    path = write_split(name, tier, items, {"source": source or str(file)}, policy=pol)
    new = load_manifest(name)
    accesslog.append(store, accesslog.entry(
        actor=who, split=name, tier=tier, purpose="replace-data" if old else ADD_PURPOSE,
        outcome="replaced" if old else "added",
        detail=(f"data replaced: sha256 {old.content_sha256[:12]} ({old.count} items) -> " if old else "added: sha256 ")
        + f"{new.content_sha256[:12]} ({new.count} items) from {file}"))
    return path


def _check_existing(name: str, tier: str, replace: bool, store: Store, who: str) -> Manifest | None:
    """The split ``add_split`` would replace, if any; refuses (logged) a replacement without ``replace`` or with
    another tier."""
    if not (splits_dir() / f"{name}.yaml").is_file():
        return None
    old = load_manifest(name)
    why = None
    if not replace:
        why = (f"split {name} already exists (tier {old.tier}, {old.count} items); pass --replace to replace its "
               "data (logged in the access log), or choose another name")
    elif old.tier != tier:
        why = f"split {name} is tier {old.tier}; a split's tier never changes. Create a new split for tier {tier}"
    if why:
        accesslog.append(store, accesslog.entry(actor=who, split=name, tier=old.tier, outcome="refused",
                                                purpose="replace-data" if replace else ADD_PURPOSE, detail=why))
        raise BadInput(why)
    return old


def _refuse_private_copy(name: str, tier: str, items: list[dict[str, Any]], file: Path, store: Store,
                         who: str) -> None:
    """Refuse (logged under both names) items that repeat another private split (``_private_twin``)."""
    twin = _private_twin(name, items)
    if twin is None:
        return
    m, shared = twin
    why = (f"{shared} of the {len(items)} items of {file} repeat private split {m.name} (same id or same text); "
           f"its read budget belongs to its content, so a copy under another name is refused. Read "
           f"{m.name} itself (through 'evalgate gate'), or remove those items")
    for split_name, split_tier in ((m.name, m.tier), (name, tier)):
        accesslog.append(store, accesslog.entry(actor=who, split=split_name, tier=split_tier,
                                                purpose=ADD_PURPOSE, outcome="refused", detail=why))
    raise RefusedByPolicy(why)


NEAR_DUPLICATE_SHARE = 0.5
"""A new split repeats a private split when at least this share of its items match that split's items by id or by
normalised text (or when both hold the very same content)."""


def _item_text(item: dict[str, Any]) -> str:
    """An item's content without its id, normalised (NFKC, case, whitespace) to catch re-formatted copies."""
    def norm(v: Any) -> str:
        text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)
        return " ".join(unicodedata.normalize("NFKC", text).lower().split())

    return "\x1f".join(f"{k}={norm(item[k])}" for k in sorted(item) if k != "id")


def _private_twin(name: str, items: list[dict[str, Any]]) -> tuple[Manifest, int] | None:
    """The private split (other than ``name``) whose content ``items`` repeat, with the number of repeated items.

    Compares with each private split's decrypted items in memory (nothing is written or shown, so this is not a
    logged read); without the key only an identical content hash is recognised.
    """
    content = _sha256(_dump_jsonl(items))
    ids, texts = [str(it["id"]) for it in items], [_item_text(it) for it in items]
    for m in list_manifests():
        if m.tier != "private" or m.name == name:
            continue
        if m.content_sha256 == content:
            return m, len(items)
        try:
            theirs = _read_items(m)
        except EvalgateError:
            continue
        their_ids, their_texts = {str(it["id"]) for it in theirs}, {_item_text(it) for it in theirs}
        shared = sum(1 for i, t in zip(ids, texts, strict=True) if i in their_ids or t in their_texts)
        if shared and shared >= NEAR_DUPLICATE_SHARE * len(items):
            return m, shared
    return None


def load_manifest(name: str, directory: Path | None = None) -> Manifest:
    """Load ``<splits dir>/<name>.yaml``.

    Raises:
        BadInput: unknown split (listing the known ones) or invalid manifest.
    """
    d = directory or splits_dir()
    path = d / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []
        hint = f"known splits: {', '.join(known)}" if known else "no splits yet: run 'evalgate splits import humaneval'"
        raise BadInput(f"unknown split {name!r} (no {path}); {hint}")
    text = read_text(path)
    try:
        return Manifest.model_validate(load_yaml_mapping(path, text, "split manifest"))
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, Manifest, "split manifest")) from e


def list_manifests(directory: Path | None = None) -> list[Manifest]:
    """Every split manifest in ``directory`` (default ``splits_dir()``), sorted by name.

    Raises:
        BadInput: a manifest does not load (naming its file and line). Strict on purpose: callers that check
            content across splits (a private split re-added under another name shares its budget) must not miss
            one. ``scan_manifests`` lists the loadable ones beside the errors, for display.
    """
    good, bad = scan_manifests(directory)
    if len(bad) == 1:
        raise bad[0]
    if bad:  # every broken file named, so fixing one does not reveal the next only on the next run
        raise BadInput(f"{len(bad)} split manifests do not load:\n  " + "\n  ".join(e.message for e in bad))
    return good


def scan_manifests(directory: Path | None = None) -> tuple[list[Manifest], list[BadInput]]:
    """The manifests that load, sorted by name, and one ``BadInput`` per manifest that does not (for ``splits
    list``: one broken file must not hide every other split)."""
    d = directory or splits_dir()
    good: list[Manifest] = []
    bad: list[BadInput] = []
    for p in sorted(d.glob("*.yaml")) if d.is_dir() else []:
        try:
            good.append(load_manifest(p.stem, d))
        except BadInput as e:
            bad.append(e)
    return good, bad


def read_items(manifest: Manifest, directory: Path | None = None) -> list[dict[str, Any]]:
    """Read and check a split's items, for the tiers whose items may be looked at freely (smoke, dev, public).
    Not logged by itself: reads that count go through ``SplitManager`` (``open``, or ``check``/``read``/``log_read``).

    Items of the private and human-audit tiers are never returned here (issue 27: a library call must not hand out
    private plaintext without a log row): they are read through ``SplitManager``, under the tier's policy, logged.
    The refusal is logged in the default store. In-process Python cannot be sandboxed, so this is a rule of the
    library, not a wall: whoever holds the key file can decrypt the data file directly; the key file is the
    boundary (docs/SECURITY.md).

    Raises:
        BadInput: data file missing or changed since the manifest was written (bytes or decrypted content).
        RefusedByPolicy: a private or human-audit split (logged as refused); encrypted data and no key.
    """
    if manifest.tier in SEALED_TIERS:
        why = (f"split {manifest.name} is tier {manifest.tier}: its items are read only through SplitManager under "
               "the tier's policy (logged); " + ("the private tier is read by 'evalgate gate'" if
                                                 manifest.tier == "private" else "raters get them with "
                                                 f"'evalgate splits export-audit {manifest.name}'"))
        accesslog.append(Store(), accesslog.entry(actor=actor_name(), split=manifest.name, tier=manifest.tier,
                                                  purpose=LIBRARY_READ, outcome="refused", detail=why))
        raise RefusedByPolicy(why)
    return _read_items(manifest, directory)


def _read_items(manifest: Manifest, directory: Path | None = None) -> list[dict[str, Any]]:
    """``read_items`` for every tier, unlogged: for ``SplitManager`` (which logs) and comparisons that show nothing
    (``_private_twin``, the plaintext scan)."""
    d = directory or splits_dir()
    path = d / manifest.data
    if not path.is_file():
        raise BadInput(f"split {manifest.name}: data file {path} is missing; re-import the split")
    stored = path.read_bytes()
    if _sha256(stored) != manifest.sha256:
        raise BadInput(f"split {manifest.name}: data file {path} changed since its manifest was written (sha256 "
                       f"{_sha256(stored)[:12]} != {manifest.sha256[:12]}); restore it or re-import the split")
    if manifest.encrypted:
        from cryptography.fernet import InvalidToken

        try:
            stored = _fernet().decrypt(stored)
        except InvalidToken as e:
            raise RefusedByPolicy(f"split {manifest.name}: the private key does not decrypt {path}; "
                                  "use the key the split was imported with") from e
    if _sha256(stored) != manifest.content_sha256:  # the split's identity: a manifest may not claim another's
        raise BadInput(f"split {manifest.name}: the content of {path} (sha256 {_sha256(stored)[:12]}) is not the "
                       f"manifest's content_sha256 {manifest.content_sha256[:12]}; restore the manifest or re-import "
                       "the split")
    return parse_jsonl(stored, str(path))


def partition(ids: list[str], smoke_size: int = SMOKE_SIZE) -> dict[str, list[str]]:
    """Deterministic tier partition of item ids.

    Ids are ordered by ``sha256(PARTITION_SALT + ":" + id)``; the first ``smoke_size`` form ``smoke`` and the
    rest are dealt round-robin to ``dev``, ``public``, ``private`` (sizes differ by at most one).

    Returns:
        ``{"smoke": [...], "dev": [...], "public": [...], "private": [...]}``, each in hash order.
    """
    order = sorted(ids, key=lambda i: hashlib.sha256(f"{PARTITION_SALT}:{i}".encode()).hexdigest())
    out: dict[str, list[str]] = {"smoke": order[:smoke_size], "dev": [], "public": [], "private": []}
    for j, i in enumerate(order[smoke_size:]):
        out[("dev", "public", "private")[j % 3]].append(i)
    return out


def import_tiered(prefix: str, items: list[dict[str, Any]], provenance: dict[str, Any],
                  directory: Path | None = None, smoke_size: int = SMOKE_SIZE) -> list[Path]:
    """Split ``items`` (each with an ``id``) into ``<prefix>-smoke|dev|public|private`` with ``partition``."""
    by_id = {it["id"]: it for it in items}
    parts = partition(list(by_id), smoke_size)
    prov = {**provenance, "partition": f"sha256('{PARTITION_SALT}:' + id) order; first {smoke_size} smoke, "
                                       "rest round-robin dev/public/private"}
    paths = [write_split(f"{prefix}-{tier}", tier, [by_id[i] for i in ids], prov, directory)
             for tier, ids in parts.items()]
    store = Store()
    for path in paths:  # every addition is logged
        m = load_manifest(path.stem, path.parent)
        accesslog.append(store, accesslog.entry(actor=actor_name(), split=m.name, tier=m.tier, purpose=ADD_PURPOSE,
                                                outcome="added", detail=f"imported: sha256 {m.content_sha256[:12]} "
                                                                        f"({m.count} items)"))
    return paths


# -- one content, several names ---------------------------------------------------------------------------------
SHARED_TIERS = ("private", "human-audit", "public")
"""Tiers whose reads belong to the content, not the name: a budget or an audit that a copied manifest must not
escape."""


@dataclass(frozen=True)
class ContentOwner:
    """The split whose policy, budget and audit rows a manifest's reads take (issue 27).

    Attributes:
        manifest: the owning split's manifest (the manifest itself unless its content is another split's).
        names: every split name whose reads count for this content, the owner's first.
    """

    manifest: Manifest
    names: tuple[str, ...]


def _same_content(a: Manifest, b: Manifest, directory: Path) -> bool:
    return (a.content_sha256 == b.content_sha256 or a.sha256 == b.sha256
            or (directory / a.data).resolve() == (directory / b.data).resolve())


def content_owner(m: Manifest, store: Store, directory: Path | None = None) -> ContentOwner:
    """Whose split ``m``'s reads are: a split's budget and audit belong to its content, whatever manifest named it.

    The content's names are ``m`` and every other manifest of ``m``'s tier on disk with the same
    ``content_sha256``, the same stored bytes (``sha256``) or the same data file, plus any split of that tier whose
    ``added``/``replaced`` access-log rows name ``m``'s content hash (a replaced split whose old data file was copied
    under a new name). For a tier in ``SHARED_TIERS`` the owner is the split whose data file bears its name (as
    ``write_split`` names it), then the name the access log saw first (splits added by ``splits add`` or ``import``
    have an ``added`` row), then the first by name; its policy applies, and every read is logged and counted under
    its name (the detail names the manifest actually read), so deleting the copy later refunds nothing.

    Copies under another tier are not grouped here: a private split's data file is encrypted, so another tier's
    manifest cannot read it, and a plaintext copy needs the key (the boundary; ``splits add`` refuses such a copy,
    ``_private_twin``).

    Returns:
        The owner and every name of the content (``(m, (m.name,))`` when nothing else shares it).
    """
    d = directory or splits_dir()
    on_disk = {o.name: o for o in scan_manifests(d)[0]}
    if m.tier not in SHARED_TIERS:
        return ContentOwner(m, (m.name,))
    group = {o.name: o for o in on_disk.values()
             if o.name != m.name and o.tier == m.tier and _same_content(o, m, d)}
    group[m.name] = m
    prefix = m.content_sha256[:12]
    for r in store.access_content_changes():
        if r["split"] in on_disk and on_disk[r["split"]].tier == m.tier and prefix in re.findall(
                r"\b[0-9a-f]{12}\b", r["detail"] or ""):
            group.setdefault(r["split"], on_disk[r["split"]])
    if len(group) == 1:
        return ContentOwner(m, (m.name,))
    first = store.access_first_seq(sorted(group))
    # the split whose data file bears its own name (as write_split names it) first: a copy pointing at another
    # split's file never owns it, so deleting the copy later leaves every row with the original
    order = sorted(group.values(), key=lambda o: (Path(o.data).name.split(".")[0] != o.name,
                                                  first.get(o.name, float("inf")), o.name))
    return ContentOwner(order[0], tuple(o.name for o in order))


# -- the manager -------------------------------------------------------------------------------------------------
class SplitManager:
    """Opens splits under their tier policies and logs every read and refusal to the store's access log.

    Use ``check`` (logs refusals), then ``read``, then ``log_read``; or ``open`` for all three. Budget windows
    are measured on ``store.clock``.

    Args:
        store: the Store holding the access log.
        directory: splits directory (default ``splits_dir()``).
    """

    def __init__(self, store: Store, directory: Path | None = None):
        self.store = store
        self.directory = directory or splits_dir()
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
        """Permitted reads (cached or not, outcome ``read`` or ``override``) of ``split`` (a name, or every name of
        one content: ``ContentOwner.names``) in the budget window, except contamination checks."""
        return sum(1 for name in ((split,) if isinstance(split, str) else split)
                   for r in self.store.access_rows(name, self.window_start(policy))
                   if r["outcome"] in (Outcome.READ, Outcome.OVERRIDE) and r["purpose"] != CONTAMINATION_CHECK)

    def contamination_checks_in_window(self, split: str | tuple[str, ...], policy: Policy) -> int:
        """Contamination checks (outcome ``read``, purpose ``contamination-check``) of ``split`` (a name, or every
        name of one content) in the window."""
        return sum(1 for name in ((split,) if isinstance(split, str) else split)
                   for r in self.store.access_rows(name, self.window_start(policy))
                   if r["outcome"] == "read" and r["purpose"] == CONTAMINATION_CHECK)

    def check(self, name: str, purpose: str, actor: str, override_reason: str | None = None,
              checkpoint_digest: str | None = None, protocol_hash: str | None = None, *,
              contamination_check: bool = False, reserved: bool = False) -> tuple[Manifest, list[str]]:
        """Decide whether ``actor`` may read split ``name`` for ``purpose``; log a refusal as such.

        ``reserved=True`` (the runner passes it for a read under a grant that ``runner.grant`` issued):
        the read was logged and counted by ``reserve`` before; the budget is not checked again and ``log_read``
        logs it as ``reserved-read``, which no budget counts.

        ``contamination_check=True`` (only ``evalgate.contamination`` passes it, with purpose
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
        warnings: list[str] = []
        refusal = None
        self._overridden.discard(name)
        self._reserved.discard(name)
        self._admitted.discard(name)
        free = contamination_check and purpose == CONTAMINATION_CHECK  # see the module docstring
        if purpose == CONTAMINATION_CHECK and not free:
            refusal = (f"purpose {purpose!r} is reserved for 'evalgate splits contamination', whose output holds no "
                       "item text and no score; give another purpose")
        elif not free and (purpose_refusal := _purpose_refusal(own.manifest, policy, purpose)):
            refusal = purpose_refusal
        elif free and policy.max_contamination_checks is not None:
            used = self.contamination_checks_in_window(own.names, policy)
            if used >= policy.max_contamination_checks:
                refusal = _contamination_refusal(own.manifest, policy, used)
        elif policy.max_reads is not None and not free and not reserved:
            used = self.reads_in_window(own.names, policy)
            if used >= policy.max_reads:
                if policy.hard or not override_reason:
                    refusal = _budget_refusal(own.manifest, policy, used)
                else:
                    self._overridden.add(name)
                    warnings.append(f"split {name}: budget of {policy.max_reads} reads per {policy.window_days} "
                                    f"days used up ({used}); reading under override ({override_reason!r}, logged)")
            elif used + 1 >= policy.warn_at * policy.max_reads:
                warnings.append(f"split {name}: this is read {used + 1} of {policy.max_reads} allowed per "
                                f"{policy.window_days} days")
        error: EvalgateError | None = RefusedByPolicy(refusal) if refusal else self._unreadable(m)
        if error:
            self._log(m, actor, purpose, "refused", False, checkpoint_digest, protocol_hash, None, error.message)
            raise error
        if reserved:
            self._reserved.add(name)
        self._admitted.add(name)
        return m, warnings

    def reserve(self, manifest: Manifest, actor: str, purpose: str, reads: list[dict[str, Any]],
                refusal: str) -> list[dict[str, Any]]:
        """Log every read a caller will make of a budgeted split, before any is made, in one locked step: all of
        them if the budget's window has room for all, else none and one ``refused`` row (issue 13: two gates at
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
        budget = (self.window_start(policy), policy.max_reads) if policy.max_reads is not None else None
        rows = [accesslog.entry(actor=actor, split=own.manifest.name, tier=own.manifest.tier, purpose=purpose,
                                outcome=r.get("outcome", "read"), cached=bool(r.get("cached")),
                                checkpoint_digest=r.get("checkpoint_digest"), protocol_hash=r.get("protocol_hash"),
                                run_id=r.get("run_id"), detail=_as_alias(manifest, own, r.get("detail")))
                for r in reads]
        with self.store.session():  # the count, the rows and a refusal under one lock
            logged = accesslog.append_many(self.store, rows, budget, own.names)
            if logged is None:
                used = self.reads_in_window(own.names, policy)
                msg = refusal.format(left=max(0, (policy.max_reads or 0) - used), used=used)
                self._log(manifest, actor, purpose, "refused", False, None, None, None, msg)
                raise RefusedByPolicy(msg)
        return logged

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
        digest = _sha256(path.read_bytes())
        if digest != m.sha256:
            return BadInput(f"split {m.name}: data file {path} changed since its manifest was written (sha256 "
                            f"{digest[:12]} != {m.sha256[:12]}); restore it or re-import the split")
        if m.encrypted:
            try:
                load_key()
            except RefusedByPolicy as e:
                return RefusedByPolicy(f"split {m.name}: {e.message}")
        try:  # the key decrypts it and the content is the manifest's (a manifest may not claim another content)
            _read_items(m, self.directory)
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
        return _read_items(manifest, self.directory)

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
        budget = None
        contamination = purpose == CONTAMINATION_CHECK
        if policy.max_reads is not None and not overridden and not reserved and not contamination:
            budget = (self.window_start(policy), policy.max_reads)
        elif contamination and policy.max_contamination_checks is not None:
            budget = (self.window_start(policy), policy.max_contamination_checks)
        outcome = (Outcome.OVERRIDE if overridden else Outcome.RESERVED_READ if reserved else Outcome.READ).value
        row = self._log(manifest, actor, purpose, outcome, cached, checkpoint_digest,
                        protocol_hash, run_id, override_reason if overridden else detail, budget)
        if row is None:
            refusal = (_contamination_refusal(own.manifest, policy, policy.max_contamination_checks or 0)
                       if contamination else _budget_refusal(own.manifest, policy, policy.max_reads or 0))
            self._log(manifest, actor, purpose, "refused", False, checkpoint_digest, protocol_hash, run_id, refusal)
            raise RefusedByPolicy(refusal)
        return row

    def open(self, name: str, purpose: str, actor: str, cached: bool = False,
             override_reason: str | None = None, detail: str | None = None, *,
             contamination_check: bool = False) -> OpenedSplit:
        """Check, read and log in one step (for readers that do not use the generation cache)."""
        m, warnings = self.check(name, purpose, actor, override_reason, contamination_check=contamination_check)
        items = self.read(m)
        self.log_read(m, actor, purpose, cached, override_reason=override_reason, detail=detail)
        return OpenedSplit(m, items, warnings)

    def _log(self, m: Manifest, actor: str, purpose: str, outcome: str, cached: bool, checkpoint_digest: str | None,
             protocol_hash: str | None, run_id: str | None, detail: str | None,
             budget: tuple[datetime, int] | None = None) -> dict[str, Any] | None:
        own = self.owner(m)  # the row goes to the content's owner, whatever manifest named it
        return accesslog.append(self.store, accesslog.entry(
            actor=actor, split=own.manifest.name, tier=own.manifest.tier, purpose=purpose, outcome=outcome,
            cached=cached, checkpoint_digest=checkpoint_digest, protocol_hash=protocol_hash, run_id=run_id,
            detail=_as_alias(m, own, detail)), budget, own.names, contamination=purpose == CONTAMINATION_CHECK)


def _as_alias(m: Manifest, own: ContentOwner, detail: str | None) -> str | None:
    """A row's detail, saying which manifest was read when it is not the owner's."""
    if own.manifest.name == m.name:
        return detail
    note = (f"read as split {m.name} ({m.name}.yaml), whose content is split {own.manifest.name}'s: its budget and "
            "audit rows are that split's")
    return f"{note}; {detail}" if detail else note


def _purpose_refusal(m: Manifest, policy: Policy, purpose: str) -> str | None:
    """Why ``purpose`` may not read split ``m`` under ``policy`` (None when it may)."""
    if policy.purposes is None or purpose in policy.purposes:
        return None
    return (f"split {m.name} (tier {m.tier}) may be read only for purpose {', '.join(policy.purposes)}, not "
            f"{purpose!r}" + ("; private splits are read by 'evalgate gate'" if m.tier == "private"
                              else "; its manifest's policy sets the purposes"))


def _budget_refusal(m: Manifest, policy: Policy, used: int) -> str:
    return (f"split {m.name} (tier {m.tier}) has used its budget of {policy.max_reads} reads per "
            f"{policy.window_days} days ({used} used); "
            + ("wait for the window to pass" if policy.hard else "pass --override-reason TEXT to read anyway (logged)"))


def _contamination_refusal(m: Manifest, policy: Policy, used: int) -> str:
    return (f"split {m.name} (tier {m.tier}) has used its budget of {policy.max_contamination_checks} contamination "
            f"checks per {policy.window_days} days ({used} used): each check answers a bit per item about its text, "
            "so they are budgeted like reads; wait for the window to pass, or check a dev or public copy")
