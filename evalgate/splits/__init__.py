"""Split manifests, tiers and their access policies, encryption of private data, and logged reads.

The tiers, their purposes and budgets (the private tier: ``release-gate`` only, 4 reads / 30 days), and the
contamination check's own budget: docs/AUDIT.md, "Tiers and budgets". The package, by job (layered, an import-linter
contract): ``manifest``, ``discovery``, ``data``, ``sources``, ``twins``, ``owners``, ``write``, ``tiering``,
``guard`` (``SplitManager``), ``contamination``. The names below are importable from here, each on first use;
evalgate's own modules import from the submodules.
"""

from typing import Any

from evalgate.core import lazy

_WHERE = {  # name -> the submodule (or module) that defines it
    "parse_jsonl": "data", "read_items": "data", "list_manifests": "discovery", "load_manifest": "discovery",
    "scan_manifests": "discovery", "SEALED_TIERS": "evalgate.keys.sealing", "key_file": "evalgate.keys.sealing",
    "load_key": "evalgate.keys.sealing", "CONTAMINATION_CHECK": "evalgate.store.access", "OpenedSplit": "guard",
    "SplitManager": "guard", "ADD_PURPOSE": "manifest", "DEFAULT_POLICIES": "manifest", "LIBRARY_READ": "manifest",
    "Manifest": "manifest", "Policy": "manifest", "RELEASE_GATE": "manifest", "TIERS": "manifest", "Tier": "manifest",
    "actor_name": "manifest", "splits_dir": "manifest", "ContentOwner": "owners", "SHARED_TIERS": "owners",
    "content_owner": "owners", "PARTITION_SALT": "tiering", "SMOKE_SIZE": "tiering", "import_tiered": "tiering",
    "partition": "tiering", "NEAR_DUPLICATE_SHARE": "twins", "add_split": "write", "write_split": "write",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _WHERE, name, globals())
