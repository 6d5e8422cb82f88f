"""One content, several names: the split whose policy, budget and audit rows a manifest's reads take
(``content_owner``), so a copied or renamed manifest cannot escape its content's budget."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evalgate.core.enums import Tier
from evalgate.splits.discovery import scan_manifests
from evalgate.splits.manifest import Manifest
from evalgate.store import AccessLogRepo

SHARED_TIERS = (Tier.PRIVATE, Tier.HUMAN_AUDIT, Tier.PUBLIC)
"""Tiers whose reads belong to the content, not the name: a budget or an audit that a copied manifest must not
escape."""


@dataclass(frozen=True)
class ContentOwner:
    """The split whose policy, budget and audit rows a manifest's reads take.

    Attributes:
        manifest: the owning split's manifest (the manifest itself unless its content is another split's).
        names: every split name whose reads count for this content, the owner's first.
    """

    manifest: Manifest
    names: tuple[str, ...]


def _same_content(a: Manifest, b: Manifest, directory: Path) -> bool:
    return (a.content_sha256 == b.content_sha256 or a.sha256 == b.sha256
            or (directory / a.data).resolve() == (directory / b.data).resolve())


def content_owner(m: Manifest, store: AccessLogRepo, directory: Path | None = None) -> ContentOwner:
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
    ``twins.private_twin``).

    Returns:
        The owner and every name of the content (``(m, (m.name,))`` when nothing else shares it).
    """
    if m.tier not in SHARED_TIERS:  # before the scan: it parses every manifest on disk
        return ContentOwner(m, (m.name,))
    d = directory or store.env.splits
    on_disk = {o.name: o for o in scan_manifests(d)[0]}
    group = {o.name: o for o in on_disk.values()
             if o.name != m.name and o.tier == m.tier and _same_content(o, m, d)}
    group[m.name] = m
    prefix = m.content_sha256[:12]
    for r in store.access_content_changes():
        if r.split in on_disk and on_disk[r.split].tier == m.tier and prefix in re.findall(
                r"\b[0-9a-f]{12}\b", r.detail or ""):
            group.setdefault(r.split, on_disk[r.split])
    if len(group) == 1:
        return ContentOwner(m, (m.name,))
    first = store.access_first_seq(sorted(group))
    # the split whose data file bears its own name (as write_split names it) first: a copy pointing at another
    # split's file never owns it, so deleting the copy later leaves every row with the original
    order = sorted(group.values(), key=lambda o: (Path(o.data).name.split(".")[0] != o.name,
                                                  first.get(o.name, float("inf")), o.name))
    return ContentOwner(order[0], tuple(o.name for o in order))
