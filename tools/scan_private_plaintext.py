"""Scan files for plain text of private and human-audit items: the store (``$EVALGATE_HOME/evalgate.duckdb`` and its
write-ahead log) and any report files given, for every string field (``id`` aside) of every item of those splits
that is at least ``--min-chars`` long (short values such as a two-digit gold answer occur in any binary by chance).

Usage: ``python tools/scan_private_plaintext.py [--min-chars 8] [FILE ...]`` with ``EVALGATE_HOME``,
``EVALGATE_SPLITS`` and the private key (``EVALGATE_PRIVATE_KEY`` or the key file) set as for evalgate. Prints one
line per hit and a summary; exits 1 when anything was found.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalgate.sealing import SEALED_TIERS
from evalgate.splits import _read_items, list_manifests
from evalgate.store import home


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="report files to scan besides the store")
    ap.add_argument("--min-chars", type=int, default=8)
    args = ap.parse_args()
    db = home() / "evalgate.duckdb"
    files = [p for p in (db, Path(str(db) + ".wal"), *args.files) if p.is_file()]
    texts = {str(v) for m in list_manifests() if m.tier in SEALED_TIERS for it in _read_items(m)
             for k, v in it.items() if k != "id" and isinstance(v, str | int) and len(str(v)) >= args.min_chars}
    data = {p: p.read_bytes() for p in files}
    hits = [(p, t) for p in files for t in sorted(texts) if t.encode() in data[p]]
    for p, t in hits:
        print(f"{p}: {t[:70]!r}")
    print(f"{len(hits)} hit(s) of {len(texts)} private/human-audit text(s) in {len(files)} file(s): "
          + ", ".join(str(p) for p in files))
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
