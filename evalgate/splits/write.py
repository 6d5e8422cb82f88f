"""Writing splits: ``write_split`` (data file and manifest, atomically), and ``add_split`` (``evalgate splits add``:
from the user's file, a replacement only when asked and within the tier, private copies refused, every addition
and refusal logged)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from evalgate.access import log as accesslog
from evalgate.core.enums import Tier
from evalgate.core.environment import Environment, or_from_env
from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write
from evalgate.keys.sealing import SEALED_TIERS, load_key
from evalgate.splits.data import dump_jsonl, fernet, parse_jsonl, sha256_hex
from evalgate.splits.discovery import load_manifest
from evalgate.splits.gold import GOLD_RULES, extract_gold, looks_like
from evalgate.splits.manifest import ADD_PURPOSE, TIERS, Manifest, Policy, actor_name
from evalgate.splits.sources import Mapping
from evalgate.splits.sources import read_items as read_source
from evalgate.splits.twins import item_prints, key_sealer, refuse_private_copy, remember_private
from evalgate.store import AccessLogRepo


class GoldNote(UserWarning):
    """``add_split``'s note that the items' gold answers look like worked solutions of a known convention
    (``splits.gold.looks_like``) and were kept as written; ``splits add`` prints it on stderr."""


def write_split(name: str, tier: str, items: list[dict[str, Any]], provenance: dict[str, Any],
                directory: Path | None = None, policy: Policy | None = None, *, env: Environment | None = None) -> Path:
    """Write a split's data file and manifest (private tier: encrypted; private and human-audit tiers: the key
    is created when missing, since their runs' outputs are encrypted with it). Existing files are replaced atomically.
    ``env``: whose splits directory (unless ``directory`` is given) and key (default the process's, ``or_from_env``).

    Returns:
        The manifest path.

    Raises:
        BadInput: unknown tier or bad name.
    """
    if tier not in TIERS:
        raise BadInput(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}")
    env = or_from_env(env)
    d = directory or env.splits
    d.mkdir(parents=True, exist_ok=True)
    plain = dump_jsonl(items)
    encrypted = tier == Tier.PRIVATE
    stored = fernet(env, create=True).encrypt(plain) if encrypted else plain
    if tier in SEALED_TIERS and not encrypted:  # its runs' outputs are encrypted in the store with the same key
        load_key(create=True, env=env)
    data_name = f"{name}.jsonl.enc" if encrypted else f"{name}.jsonl"
    try:
        manifest = Manifest(name=name, tier=tier, data=data_name, sha256=sha256_hex(stored),  # type: ignore[arg-type]
                            content_sha256=sha256_hex(plain), count=len(items), encrypted=encrypted,
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
              replace: bool = False, *, store: AccessLogRepo, actor: str | None = None,
              fmt: str | None = None, mapping: list[str] | None = None, row_ids: bool = False,
              gold: str | None = None) -> Path:
    """Add a split from a JSONL, CSV or Parquet file or a ``datasets`` folder (``evalgate splits add``).

    An existing split is never replaced silently: ``replace`` must be given, the tier must stay the same (a
    private split can never become a dev one), and the replacement is logged in the access log (outcome
    ``replaced``, with the old and new content hashes). Every addition is logged too (outcome ``added``).

    A split's read budget belongs to its content, not its name: items that repeat a private split (its very
    content, any item matching one of its items by normalised text or long field value, or at least
    ``NEAR_DUPLICATE_SHARE`` of the new items matching its items by id) are refused under any other name and any
    tier, and the attempt is logged as ``refused`` under both names. The private splits compared are every one the
    store has seen (``twins.private_twin``), so the content of a private split whose manifest left the disk, or
    that was replaced, stays refused; a private split's content is recorded (keyed fingerprints) in the
    transaction of its ``added``/``replaced`` row.

    Args:
        name: split name.
        tier: one of ``TIERS``.
        file: JSONL, one object with a unique string or integer ``id`` per line (integers are stored as text);
            or, through ``splits.sources.read_items``, a CSV or Parquet file or a ``datasets`` folder.
        source: provenance text (default: the file path).
        policy: policy fields that tighten the tier's default (``Policy`` fields), or None.
        replace: replace an existing split of the same tier.
        store: the access log (a ``Store`` is one: ``Workspace.store``); its environment's splits directory, key
            and actor are used.
        actor: who (default the store's environment's, ``actor_name``).
        fmt: ``splits.sources.FORMATS`` name, or None to detect it from the path.
        mapping: ``FIELD=COLUMN`` strings (``splits.sources.Mapping``): the item's fields, or None for every column.
        row_ids: number items by row where the data has no ``id``.
        gold: a ``splits.gold.GOLD_RULES`` name (``gsm8k``: the number after the final ``####`` of ``answer``;
            ``boxed``: the last ``\\boxed{}`` of ``solution``) whose answer becomes ``answer``, the worked solution
            ``solution``; recorded in the manifest's provenance. None keeps the fields as written, and warns
            (``GoldNote``) when every ``answer`` is a GSM8K solution.

    Returns:
        The manifest path.

    Raises:
        BadInput: missing or empty file, bad record (with its line), a mapping naming a missing column (with the
            columns there are), unknown format, an item that does not follow ``gold``'s convention, invalid policy,
            or an existing split without ``replace`` / with another tier. Nothing is written.
        RefusedByPolicy: the items repeat another private split (logged).
    """
    if fmt is None and not mapping and not row_ids and file.suffix.lower() in (".jsonl", ".ndjson"):
        if not file.is_file():
            raise BadInput(f"{file} not found; pass a JSONL file with --file")
        items = parse_jsonl(file.read_bytes(), str(file))
    else:
        items = read_source(file, fmt, Mapping.parse(mapping or []), row_ids)
    if not items:
        raise BadInput(f"{file} holds no records; a split needs at least one JSONL object with an 'id'")
    provenance: dict[str, Any] = {"source": source or str(file)}
    if gold is not None:
        items = extract_gold(items, gold, str(file))
        provenance["gold"] = GOLD_RULES[gold].help
    elif looks_like(items) == "gsm8k":
        warnings.warn(GoldNote(f"every item's 'answer' in {file} is a worked solution ending '#### N' (GSM8K's "
                               "format), kept as written: an answer scorer refuses such a gold; add the split again "
                               "with --replace --gold gsm8k to keep N as 'answer' and the text as 'solution'"),
                      stacklevel=2)
    try:
        pol = Policy.model_validate(policy) if policy else None
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(str(x) for x in er['loc'])}: {er['msg']}" for er in e.errors())
        raise BadInput(f"split {name}: invalid policy option ({errs})") from e
    who = actor_name(actor, env=store.env)
    # once, for the copy check and, for a private split, the store's record
    prints = item_prints(items, key_sealer(store.env))
    with store.session():  # one connection (a file's open and close cost 4-12 ms each); the writes are short
        old = _check_existing(name, tier, replace, store, who)
        refuse_private_copy(name, tier, items, file, store, who, prints)
        path = write_split(name, tier, items, provenance, policy=pol, env=store.env)
        new = load_manifest(name, store.env.splits)
        outcome = "replaced" if old else "added"
        with store.connect():  # the row and the private content's fingerprints: both or neither
            accesslog.append(store, accesslog.entry(
                actor=who, split=name, tier=tier, purpose="replace-data" if old else ADD_PURPOSE, outcome=outcome,
                detail=(f"data replaced: sha256 {old.content_sha256[:12]} ({old.count} items) -> " if old else
                        "added: sha256 ") + f"{new.content_sha256[:12]} ({new.count} items) from {file}"))
            if tier == Tier.PRIVATE:
                remember_private(store, name, items, outcome, prints)
    return path


def _check_existing(name: str, tier: str, replace: bool, store: AccessLogRepo, who: str) -> Manifest | None:
    """The split ``add_split`` would replace, if any; refuses (logged) a replacement without ``replace`` or with
    another tier."""
    if not (store.env.splits / f"{name}.yaml").is_file():
        return None
    old = load_manifest(name, store.env.splits)
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
