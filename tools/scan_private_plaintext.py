"""Scan files for plain text of private and human-audit items: the store (``$EVALGATE_HOME/evalgate.duckdb`` and its
write-ahead log) and any report files given, for every string field (``id`` aside) of every item of those splits
that is at least ``--min-chars`` long (short values such as a two-digit gold answer occur in any binary by chance).
A value that is an item's id under another name (``task_id``) is skipped as ``id`` is (the store keeps item ids), and
a text counts only as a whole token: ``HumanEval/15`` inside ``HumanEval/157`` is another id, not a hit.

Usage: ``python tools/scan_private_plaintext.py [--min-chars 8] [FILE ...]`` with ``EVALGATE_HOME``,
``EVALGATE_SPLITS`` and the private key (``EVALGATE_PRIVATE_KEY`` or the key file) set as for evalgate. Prints one
line per hit and a summary; exits 1 when anything was found.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from evalgate.core.environment import Environment
from evalgate.keys.sealing import SEALED_TIERS
from evalgate.splits.data import read_unlogged
from evalgate.splits.discovery import list_manifests


def private_texts(min_chars: int) -> set[str]:
    """Every string or integer field of every private and human-audit item, at least ``min_chars`` long, that is not
    the item's id (``id`` itself or the same value under another key, e.g. HumanEval's ``task_id``)."""
    out: set[str] = set()
    for m in list_manifests():
        if m.tier not in SEALED_TIERS:
            continue
        for it in read_unlogged(m):
            out |= {str(v) for k, v in it.items() if k != "id" and isinstance(v, str | int)
                    and str(v) != str(it.get("id")) and len(str(v)) >= min_chars}
    return out


def token_pattern(text: str) -> re.Pattern[bytes]:
    """``text`` as UTF-8 bytes, matched only where it is not part of a longer word: a text starting (ending) with a
    letter, digit or ``_`` must not follow (precede) one."""
    raw = text.encode()
    head = rb"(?<![\w])" if re.match(rb"\w", raw[:1]) else b""
    tail = rb"(?![\w])" if re.match(rb"\w", raw[-1:]) else b""
    return re.compile(head + re.escape(raw) + tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="report files to scan besides the store")
    ap.add_argument("--min-chars", type=int, default=8)
    args = ap.parse_args()
    db = Environment.from_env().home / "evalgate.duckdb"
    files = [p for p in (db, Path(str(db) + ".wal"), *args.files) if p.is_file()]
    texts = private_texts(args.min_chars)
    data = {p: p.read_bytes() for p in files}
    hits = [(p, t) for p in files for t in sorted(texts) if token_pattern(t).search(data[p])]
    for p, t in hits:
        print(f"{p}: {t[:70]!r}")
    print(f"{len(hits)} hit(s) of {len(texts)} private/human-audit text(s) in {len(files)} file(s): "
          + ", ".join(str(p) for p in files))
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
