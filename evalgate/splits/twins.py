"""Private-copy detection: a new split whose items repeat a private split (its very content, any item by normalised
text, or enough items by id) is refused under any other name, since a split's read budget belongs to its content."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

from evalgate import accesslog
from evalgate.errors import EvalgateError, RefusedByPolicy
from evalgate.splits.data import dump_jsonl, read_unlogged, sha256_hex
from evalgate.splits.discovery import list_manifests
from evalgate.splits.manifest import ADD_PURPOSE, Manifest
from evalgate.store import AccessLogRepo

NEAR_DUPLICATE_SHARE = 0.5
"""A new split repeats a private split when at least this share of its items match that split's items by id (ids
such as ``0``, ``1`` coincide across unrelated data), when any of its items matches one by normalised text or holds
one of its long field values (``MIN_VALUE_CHARS``), or when both hold the very same content. A share of text
matches alone was defeated by padding (20 private items and 21 filler items made a dev split of the whole private
set), whole-item text by a column added or a field renamed."""


MIN_VALUE_CHARS = 16
"""A field value of at least this many characters (normalised) that equals one of a private item's values makes the
item a repeat, whatever the field is called and whatever other fields it has (a question is not a coincidence; a
short answer such as ``42`` may be)."""


def _norm(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _item_text(item: dict[str, Any]) -> str:
    """An item's content without its id, normalised (NFKC, case, whitespace) to catch re-formatted copies."""
    return "\x1f".join(f"{k}={_norm(item[k])}" for k in sorted(item) if k != "id")


def _long_values(item: dict[str, Any]) -> set[str]:
    """An item's normalised field values (its id left out) of at least ``MIN_VALUE_CHARS`` characters: a copy with a
    column added (``pad: 1``) or a field renamed (``question`` -> ``problem``) still holds them."""
    return {v for k, val in item.items() if k != "id" and len(v := _norm(val)) >= MIN_VALUE_CHARS}


def private_twin(name: str, items: list[dict[str, Any]]) -> tuple[Manifest, int] | None:
    """The private split (other than ``name``) whose content ``items`` repeat (``NEAR_DUPLICATE_SHARE``), with the
    number of repeated items.

    Compares with each private split's decrypted items in memory (nothing is written or shown, so this is not a
    logged read); without the key only an identical content hash is recognised.

    Returns:
        (the private split's manifest, how many of ``items`` repeat it), or None when none does.

    Raises:
        BadInput: a manifest in the splits directory does not load (``list_manifests``).
    """
    content = sha256_hex(dump_jsonl(items))
    ids, texts = [str(it["id"]) for it in items], [_item_text(it) for it in items]
    for m in list_manifests():
        if m.tier != "private" or m.name == name:
            continue
        if m.content_sha256 == content:
            return m, len(items)
        try:
            theirs = read_unlogged(m)
        except EvalgateError:
            continue
        their_ids, their_texts = {str(it["id"]) for it in theirs}, {_item_text(it) for it in theirs}
        their_values = set().union(*(_long_values(it) for it in theirs))
        same = [t in their_texts or bool(_long_values(it) & their_values) for it, t in zip(items, texts, strict=True)]
        same_text = sum(same)
        shared = sum(1 for i, t in zip(ids, same, strict=True) if i in their_ids or t)
        if same_text or (shared and shared >= NEAR_DUPLICATE_SHARE * len(items)):
            return m, shared
    return None


def refuse_private_copy(name: str, tier: str, items: list[dict[str, Any]], file: Path | str,
                        store: AccessLogRepo | None, who: str) -> None:
    """Refuse (logged under both names, in ``store``, default ``AccessLogRepo()`` opened only then) items that repeat
    another private split (``private_twin``).

    Raises:
        RefusedByPolicy: ``items`` (read from ``file``, a path or a description of the source, to be added as
            split ``name`` of ``tier``) repeat a private split; one ``refused`` row is appended under each of the
            two names first.
    """
    twin = private_twin(name, items)
    if twin is None:
        return
    m, shared = twin
    why = (f"{shared} of the {len(items)} items of {file} repeat private split {m.name} (same id or same text); "
           f"its read budget belongs to its content, so a copy under another name is refused. Read "
           f"{m.name} itself (through 'evalgate gate'), or remove those items")
    store = store or AccessLogRepo()
    for split_name, split_tier in ((m.name, m.tier), (name, tier)):
        accesslog.append(store, accesslog.entry(actor=who, split=split_name, tier=split_tier,
                                                purpose=ADD_PURPOSE, outcome="refused", detail=why))
    raise RefusedByPolicy(why)
