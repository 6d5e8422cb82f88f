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
check answers one bit per item (flagged or not, ``evalgate.splits.contamination``) and has a budget of its own,
``max_contamination_checks`` per ``window_days`` (default 4 per 30 days, hard), counted atomically like reads and
shown by ``evalgate audit``. Every check is logged like any read, so ``evalgate audit`` shows who checked what,
with which corpus.

The package, by job: ``manifest`` (the ``Manifest`` and ``Policy`` models, tiers, purposes, the active splits
directory and actor), ``discovery`` (load, list and scan manifests), ``data`` (JSONL, Fernet, reading a data file),
``write`` (``write_split``, ``add_split``), ``sources`` (CSV, Parquet, ``datasets`` folders for ``splits add``),
``twins`` (private-copy detection), ``tiering`` (``partition``, ``import_tiered``), ``owners`` (one content under
several names), ``guard`` (``SplitManager``). The names below are re-exported here; evalgate's own modules import
from the submodules.
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
