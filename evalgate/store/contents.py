"""Every private content a store has seen (``private_contents``) and its items' keyed fingerprints
(``private_fingerprints``), migration 35: what ``splits.twins`` compares a new split with besides the manifests on
disk, so a private split's items stay refused after its manifest left the disk or its data was replaced.

The fingerprints are HMACs under a key derived from the private split key (``sealing.Sealer.item_print``), never
bare hashes: whoever holds the DuckDB file cannot confirm a guessed item against them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from evalgate.store.db import Repository

NO_KEY = ""
"""The ``key_fingerprint`` of a content recorded without the key: its content hash only, no item fingerprints."""


@dataclass(frozen=True)
class PrivateContent:
    """One private content a store has seen.

    Attributes:
        split: the split's name when it was recorded.
        content_sha256: the sha256 of its plaintext JSONL (the manifest's ``content_sha256``).
        key_fingerprint: the fingerprint of the key its item fingerprints are under (``Sealer.fingerprint``), or
            ``NO_KEY``.
        items: its item count.
        how: ``added``, ``replaced``, ``imported`` (with the access-log row of that name) or ``seen on disk`` (a
            manifest a copy check found, e.g. a split added before migration 35 or written without a log row).
        recorded_at: when (UTC).
    """

    split: str
    content_sha256: str
    key_fingerprint: str
    items: int
    how: str
    recorded_at: datetime


class PrivateContentRepo(Repository):
    """The private contents a store has seen and their items' keyed fingerprints (``splits.twins``)."""

    def private_contents(self) -> list[PrivateContent]:
        """Every recorded private content, oldest first."""
        with self.connect() as con:
            rows = con.execute("SELECT split, content_sha256, key_fingerprint, items, how, recorded_at "
                               "FROM private_contents ORDER BY recorded_at, split").fetchall()
        return [PrivateContent(*r) for r in rows]

    def record_private_content(self, split: str, content_sha256: str, items: int, how: str,
                               key_fingerprint: str = NO_KEY,
                               prints: Mapping[str, Sequence[str]] | None = None) -> bool:
        """Record a private content and, under ``key_fingerprint``, its items' fingerprints (``{kind: [digest,
        ...]}``), in one transaction (joining the caller's: ``splits.write`` records with the access-log row). The
        fingerprints of a content already fingerprinted under that key are not stored twice.

        Returns:
            False when ``(split, content_sha256, key_fingerprint)`` was recorded already (nothing written).
        """
        with self.connect() as con:
            if con.execute("SELECT count(*) FROM private_contents WHERE split=? AND content_sha256=? AND "
                           "key_fingerprint=?", [split, content_sha256, key_fingerprint]).fetchone() != (0,):
                return False
            con.execute("INSERT INTO private_contents VALUES (?, ?, ?, ?, ?, ?)",
                        [split, content_sha256, key_fingerprint, items, how, self.clock()])
            have = con.execute("SELECT count(*) FROM private_fingerprints WHERE content_sha256=? AND "
                               "key_fingerprint=?", [content_sha256, key_fingerprint]).fetchone()
            if key_fingerprint != NO_KEY and have == (0,):
                for kind, digests in (prints or {}).items():
                    if digests:
                        con.execute("INSERT INTO private_fingerprints SELECT ?, ?, ?, unnest(?::VARCHAR[])",
                                    [content_sha256, key_fingerprint, kind, sorted(set(digests))])
        return True

    def private_print_matches(self, key_fingerprint: str, digests: Sequence[str]) -> dict[str, set[str]]:
        """The recorded contents that hold any of ``digests`` under ``key_fingerprint``: ``{content_sha256: the
        digests of ``digests`` it holds}``."""
        if not digests:
            return {}
        with self.connect() as con:
            rows = con.execute("SELECT DISTINCT content_sha256, digest FROM private_fingerprints WHERE "
                               "key_fingerprint=? AND digest IN (SELECT unnest(?::VARCHAR[]))",
                               [key_fingerprint, sorted(set(digests))]).fetchall()
        out: dict[str, set[str]] = {}
        for content, digest in rows:
            out.setdefault(content, set()).add(digest)
        return out
