"""Protocol operations that touch the store: freezing a protocol and recording ``name@version -> hash``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.fileio import atomic_write
from evalgate.protocol import load_protocol, lock_document, lock_problem
from evalgate.store import Store


def freeze(path: str | Path, store: Store | None = None) -> dict[str, Any]:
    """Hash a protocol, record ``name@version -> sha256`` in the store, and write ``<path>.lock`` atomically.

    Re-freezing unchanged content is a no-op that keeps the first ``frozen_at``; a lock whose fields disagree
    (``lock_problem``, e.g. an edited ``resolved``) is rewritten from the protocol file.

    Returns:
        The lock document.

    Raises:
        BadInput: invalid protocol, or changed content under a version the store already holds (bump the version).
    """
    lp = load_protocol(path)
    (store or Store()).record_protocol(lp.spec.name, lp.spec.version, lp.sha256, lp.resolved)
    if lp.lock_path.is_file():
        try:
            old = json.loads(lp.lock_path.read_text())
            if old.get("sha256") == lp.sha256 and lock_problem(old) is None:
                return old
        except (json.JSONDecodeError, KeyError, AttributeError):
            pass
    doc = lock_document(lp)
    atomic_write(lp.lock_path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return doc
