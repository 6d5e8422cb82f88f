"""Private-copy detection: a new split whose items repeat a private split (its very content, any item by normalised
text, or enough items by id) is refused under any other name or tier, since a split's read budget belongs to its
content.

The comparison is with every private content the store has seen (``store.contents``: keyed fingerprints recorded
when a private split is added, replaced or imported, and when a check finds a private manifest on disk that the
store does not know yet), so a private split's items stay refused after its manifest left the disk or its data was
replaced. The fingerprints are HMACs under a key derived from the private split key (``Sealer.item_print``) of each
item's id, normalised text and long field values: the same normalisation the comparison used on decrypted items.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.access import log as accesslog
from evalgate.core.enums import Tier
from evalgate.core.environment import Environment
from evalgate.core.errors import EvalgateError, RefusedByPolicy
from evalgate.core.text import as_read
from evalgate.keys.sealing import Sealer, load_key
from evalgate.splits.data import dump_jsonl, read_unlogged, sha256_hex
from evalgate.splits.discovery import list_manifests
from evalgate.splits.manifest import ADD_PURPOSE, Manifest
from evalgate.store import AccessLogRepo
from evalgate.store.contents import NO_KEY, PrivateContentRepo

PRIVATE = Tier.PRIVATE.value
SEEN_ON_DISK = "seen on disk"
"""How a private content found on disk by a copy check, unknown to the store until then, is recorded."""

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
    """A field value as compared: JSON for a non-string, read as a reader sees it (``core.text.as_read``: NFKC,
    what is drawn as nothing removed, look-alike letters of other scripts as the Latin ones), case folded, white
    space runs made one space."""
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)
    return " ".join(as_read(text.casefold()).casefold().split())


def _norm_nfkc_only(v: Any) -> str:
    """``_norm`` as fingerprints were made before look-alike characters were folded (NFKC, case, white space
    only): a private content a store recorded then is still found (``ItemPrints.earlier``). Equal to ``_norm`` on
    ASCII text."""
    text = v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _item_text(item: dict[str, Any]) -> str:
    """An item's content without its id, normalised (``_norm``) to catch re-formatted copies."""
    return _text_and_values(item)[0]


def _text_and_values(item: dict[str, Any], how: Callable[[Any], str] | None = None) -> tuple[str, set[str]]:
    """An item's normalised text (``_item_text``) and its normalised field values (its id left out) of at least
    ``MIN_VALUE_CHARS`` characters: a copy with a column added (``pad: 1``) or a field renamed (``question`` ->
    ``problem``) still holds those. Each value is normalised once (``how``, default ``_norm``)."""
    how = how or _norm
    norm = {k: how(item[k]) for k in sorted(item) if k != "id"}
    return "\x1f".join(f"{k}={v}" for k, v in norm.items()), {v for v in norm.values() if len(v) >= MIN_VALUE_CHARS}


@dataclass(frozen=True)
class ItemPrints:
    """A list of items' content hash and keyed fingerprints (``Sealer.item_print``), per item, in order.

    Attributes:
        content_sha256: the sha256 of the items' JSONL (``data.dump_jsonl``; a manifest's ``content_sha256``).
        key_fingerprint: the fingerprint of the key they are under (``Sealer.fingerprint``).
        ids: each item's id.
        texts: each item's normalised text (``_item_text``).
        values: each item's long field values (``_text_and_values``).
        earlier: each item's text and long values under the normalisation before look-alikes were folded
            (``_norm_nfkc_only``) where it differs: compared, never recorded.
    """

    content_sha256: str
    key_fingerprint: str
    ids: list[str]
    texts: list[str]
    values: list[frozenset[str]]
    earlier: list[frozenset[str]]

    def by_kind(self) -> dict[str, list[str]]:
        """``{"id": [...], "text": [...], "value": [...]}``, every digest once per item (as the store keeps them)."""
        return {"id": self.ids, "text": self.texts, "value": [v for vs in self.values for v in vs]}


def item_prints(items: list[dict[str, Any]], sealer: Sealer | None) -> ItemPrints | None:
    """The content hash and keyed fingerprints of ``items`` under ``sealer``'s key (``key_sealer``; about 4 HMACs
    per item, some 40 ms for 1,300 items here); None without a key."""
    if sealer is None:
        return None
    p, ids, texts, values, earlier = sealer.item_print, [], [], [], []
    for it in items:
        text, long_values = _text_and_values(it)
        ids.append(p("id", str(it["id"])))
        texts.append(p("text", text))
        values.append(frozenset(p("value", v) for v in long_values))
        old_text, old_values = _text_and_values(it, _norm_nfkc_only)
        earlier.append(frozenset(([p("text", old_text)] if old_text != text else [])
                                 + [p("value", v) for v in old_values - long_values]))
    return ItemPrints(sha256_hex(dump_jsonl(items)), sealer.fingerprint, ids, texts, values, earlier)


def key_sealer(env: Environment) -> Sealer | None:
    """``env``'s private split key's ``Sealer``, or None without a key (the comparison is then by content hash
    only)."""
    try:
        return Sealer(load_key(env=env))
    except RefusedByPolicy:
        return None


def contents_repo(store: AccessLogRepo | PrivateContentRepo) -> PrivateContentRepo:
    """The private-content repository over ``store``'s database (``store`` itself when it is one, e.g. a
    ``Store``), so its writes join the caller's transaction."""
    return store if isinstance(store, PrivateContentRepo) else PrivateContentRepo(store.db, env=store.env)


def remember_private(store: AccessLogRepo | PrivateContentRepo, name: str, items: list[dict[str, Any]], how: str,
                     prints: ItemPrints | None = None) -> None:
    """Record private split ``name``'s content and its items' keyed fingerprints in ``store``
    (``PrivateContentRepo.record_private_content``; nothing when recorded already): ``splits add``, ``import`` and
    ``init`` call it in the transaction of their ``added``/``replaced`` row. ``prints``: the items' fingerprints
    when the caller has them (``item_prints``; taken when under the current key).

    Raises:
        RefusedByPolicy: no private split key (a private split's writer has just created it).
    """
    sealer = Sealer(load_key(env=store.env))
    if prints is None or prints.key_fingerprint != sealer.fingerprint:
        prints = item_prints(items, sealer)
    assert prints is not None  # a sealer was given
    contents_repo(store).record_private_content(name, prints.content_sha256, len(items), how, prints.key_fingerprint,
                                                prints.by_kind())


def _learn_on_disk(on_disk: list[Manifest], repo: PrivateContentRepo, sealer: Sealer | None) -> None:
    """Record the private manifests on disk that ``repo`` does not know under this key (a store from before
    migration 35, a split written without a log row or pulled from elsewhere): decrypted in memory, nothing shown.
    Without the key, their content hashes only."""
    kf = sealer.fingerprint if sealer else NO_KEY
    known = {(c.split, c.content_sha256, c.key_fingerprint) for c in repo.private_contents()}
    hashed = {(split, content) for split, content, _ in known}
    for m in on_disk:
        if (m.name, m.content_sha256, kf) in known or (sealer is None and (m.name, m.content_sha256) in hashed):
            continue
        if sealer is None:
            repo.record_private_content(m.name, m.content_sha256, m.count, SEEN_ON_DISK)
            continue
        try:
            theirs = read_unlogged(m, env=repo.env)
        except EvalgateError:  # unreadable here (another key, a changed file): as before, not compared
            continue
        remember_private(repo, m.name, theirs, SEEN_ON_DISK, item_prints(theirs, sealer))


@dataclass(frozen=True)
class Twin:
    """The private content a new split repeats.

    Attributes:
        name: the private split's name (as recorded).
        content_sha256: the content repeated.
        shared: how many of the new items repeat it (same id or same text).
        where: ``""`` when the manifest on disk holds that content, else what became of it (for the message).
        by_text: how many of those repeat an item's text or a long value (the rest match by id alone).
    """

    name: str
    content_sha256: str
    shared: int
    where: str
    by_text: int

    def how(self) -> str:
        """How the items repeat it, for the message: by text, by id alone (ids coincide across unrelated data), or
        both."""
        if self.by_text == self.shared:
            return "same text"
        if self.by_text == 0:
            return ("same id only: ids such as 0 or 1 coincide across unrelated data; if these items are not a copy, "
                    "give them ids of their own, e.g. --map id=COLUMN")
        return f"{self.by_text} by text, {self.shared - self.by_text} by id alone"


def private_twin(name: str, tier: str, items: list[dict[str, Any]], store: AccessLogRepo,
                 prints: ItemPrints | None = None) -> Twin | None:
    """The private content (other than split ``name``'s own when ``tier`` is private: a replacement or reimport)
    that ``items`` repeat (``NEAR_DUPLICATE_SHARE``), with the number of repeated items.

    Compared with every private content ``store`` has seen (its keyed fingerprints) and every private manifest on
    disk, which is recorded first when the store does not know it yet (its items decrypted in memory; nothing is
    shown, so this is not a logged read). Without the key only an identical content hash is recognised; contents
    fingerprinted under another key are compared by content hash only. ``prints``: the items' fingerprints when
    the caller has them (``item_prints``), else they are computed here.

    Returns:
        The twin with the largest number of repeated items, or None when none is repeated.

    Raises:
        BadInput: a manifest in the splits directory does not load (``list_manifests``).
    """
    repo = contents_repo(store)
    with repo.session():  # one connection for the few queries (a file's open and close cost 4-12 ms each)
        return _twin(name, tier, items, repo, prints)


def _twin(name: str, tier: str, items: list[dict[str, Any]], repo: PrivateContentRepo,
          prints: ItemPrints | None) -> Twin | None:
    """``private_twin`` in the caller's session."""
    sealer = key_sealer(repo.env)
    if prints is not None and (sealer is None or prints.key_fingerprint != sealer.fingerprint):
        prints = None
    on_disk = [m for m in list_manifests(repo.env.splits) if m.tier == PRIVATE]
    _learn_on_disk(on_disk, repo, sealer)

    def other(split: str) -> bool:
        return split != name or tier != PRIVATE

    names: dict[str, str] = {m.content_sha256: m.name for m in reversed(on_disk) if other(m.name)}
    for c in repo.private_contents():
        if other(c.split):
            names.setdefault(c.content_sha256, c.split)
    current = {m.name: m.content_sha256 for m in on_disk}

    def twin(content: str, shared: int, by_text: int) -> Twin:
        split = names[content]
        where = ("" if current.get(split) == content else f" (the data it held before a replacement, sha256 "
                 f"{content[:12]})" if split in current else f" (sha256 {content[:12]}; its manifest is no longer "
                 f"in {repo.env.splits})")
        return Twin(split, content, shared, where, by_text)

    content = prints.content_sha256 if prints else sha256_hex(dump_jsonl(items))
    if content in names:
        return twin(content, len(items), len(items))
    if sealer is None:
        return None
    prints = prints or item_prints(items, sealer)
    assert prints is not None  # a sealer was given
    found: list[Twin] = []
    digests = [d for ds in prints.by_kind().values() for d in ds] + [d for ds in prints.earlier for d in ds]
    for theirs, got in repo.private_print_matches(prints.key_fingerprint, digests).items():
        if theirs not in names:
            continue
        same = [t in got or bool(v & got) or bool(e & got)
                for t, v, e in zip(prints.texts, prints.values, prints.earlier, strict=True)]
        shared = sum(1 for i, t in zip(prints.ids, same, strict=True) if i in got or t)
        if any(same) or (shared and shared >= NEAR_DUPLICATE_SHARE * len(items)):
            found.append(twin(theirs, shared, sum(same)))
    return max(found, key=lambda t: (t.shared, not t.where, t.name), default=None)


def refuse_private_copy(name: str, tier: str, items: list[dict[str, Any]], file: Path | str,
                        store: AccessLogRepo, who: str, prints: ItemPrints | None = None) -> None:
    """Refuse (logged under both names, in ``store``) items that repeat a private split
    under another name or tier (``private_twin``; ``prints``: the items' fingerprints, if the caller
    has them).

    Raises:
        RefusedByPolicy: ``items`` (read from ``file``, a path or a description of the source, to be added as
            split ``name`` of ``tier``) repeat a private split; one ``refused`` row is appended under each of the
            two names first.
    """
    twin = private_twin(name, tier, items, store, prints)
    if twin is None:
        return
    why = (f"{twin.shared} of the {len(items)} items of {file} repeat private split {twin.name}{twin.where} "
           f"({twin.how()}); its read budget belongs to its content, so a copy under another name or tier is "
           f"refused. Read {twin.name} itself (through 'evalgate gate'), or remove those items")
    for split_name, split_tier in ((twin.name, PRIVATE), (name, tier)):
        accesslog.append(store, accesslog.entry(actor=who, split=split_name, tier=split_tier,
                                                purpose=ADD_PURPOSE, outcome="refused", detail=why))
    raise RefusedByPolicy(why)
