"""The demo's guard: XSTest's safe prompts (Röttger et al. 2024), real data read from ``shared/data`` beside the
checkout, gated beside the addition target by ``gates/demo-suite.yaml`` (docs/DEMO.md, "The guard").

``guard_split`` writes the private split ``xstest-safe-demo``: the first ``GUARD_ITEMS`` items of XSTest's safe
prompts in the order of evalgate's tier partition (``splits.tiering.partition``: the same items, in the same order,
as the head of the ``xstest-safe-private`` split ``evalgate splits import xstest-safe`` writes). Nothing is
downloaded: without the file the demo stops before it trains (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput
from evalgate.splits.manifest import Policy

XSTEST_CSV = Path("xstest") / "xstest_prompts.csv"
"""XSTest's prompts file, relative to the data folder (``shared/data``)."""
GUARD_SPLIT = "xstest-safe-demo"
GUARD_ITEMS = 20
"""Items of the guard's decision split: evaluated on the base model and each seed's shipped checkpoint."""


def find_data(given: Path | None = None, start: Path | None = None) -> Path:
    """The data folder that holds ``XSTEST_CSV``.

    Args:
        given: the folder named on the command line (``--data``); used as is.
        start: where to look from when none is given (default: the working directory): the nearest folder at or
            above it with ``shared/data`` (a clone next to ``shared/``, or a worktree a level further down).

    Returns:
        The folder (``.../shared/data``).

    Raises:
        BadInput: no folder with ``XSTEST_CSV`` (names where it looked and how to pass one).
    """
    if given is not None:
        candidates = [given]
    else:
        here = (start or Path.cwd()).resolve()
        candidates = [p / "shared" / "data" for p in (here, *here.parents)]
    for d in candidates:
        if (d / XSTEST_CSV).is_file():
            return d
    where = str(given) if given is not None else f"shared/data in {candidates[0].parent.parent} or a folder above it"
    raise BadInput(f"the demo's guard needs XSTest's prompts ({XSTEST_CSV}) and found none in {where}; pass "
                   "--data DIR (make demo DATA=DIR), the folder holding xstest/xstest_prompts.csv (nothing is "
                   "downloaded; ../shared/data/PROVENANCE.md says where it comes from)")


def guard_split(data: Path, n: int = GUARD_ITEMS, label: Literal["safe", "unsafe"] = "safe",
                policy: Policy | None = None, env: Environment | None = None) -> Path:
    """Write the private split ``xstest-<label>-demo`` (``GUARD_SPLIT`` for the safe prompts): the first ``n``
    prompts of ``data/XSTEST_CSV`` with that label in tier-partition order (the head of ``xstest-<label>-private``),
    with the file's provenance (name, sha256) and how the items were chosen.

    Args:
        policy: the split's access policy (default: the private tier's).
        env: whose splits directory and key (default the process's, ``or_from_env``).

    Returns:
        The split's manifest path.

    Raises:
        BadInput: the file is missing or malformed (``datasets.xstest.xstest_records``).
    """
    from evalgate.datasets.xstest import SAFE, UNSAFE
    from evalgate.splits.tiering import PARTITION_SALT, partition
    from evalgate.splits.write import write_split

    items, provenance = (SAFE if label == "safe" else UNSAFE).load(data / XSTEST_CSV)
    by_id = {i["id"]: i for i in items}
    ids = partition(list(by_id))["private"][:n]
    provenance = {**provenance, "subset": f"the first {len(ids)} ids of the private tier of sha256('{PARTITION_SALT}:'"
                                          " + id) order (splits.tiering.partition), for the demo's time budget"}
    return write_split(f"xstest-{label}-demo", "private", [by_id[i] for i in ids], provenance, policy=policy,
                       env=env)
