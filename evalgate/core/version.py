"""evalgate's distribution name and installed version.

The import name is ``evalgate``; the distribution (what ``pip`` installs and ``importlib.metadata`` knows) is
``evalgate-gate``, because ``evalgate`` on the Python Package Index is an unrelated project (as are
``evalgate-ci``, ``evalgate-cli`` and ``evalgate-sdk``). Metadata is looked up under ``DISTRIBUTION`` only: a
lookup under the bare name would report that other project's version when it is installed.
"""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "evalgate-gate"


def installed_version() -> str | None:
    """The installed version of this project (``DISTRIBUTION``'s metadata), None when it is not installed (a
    checkout on ``PYTHONPATH``)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_hint(extra: str) -> str:
    """How to add an optional extra: from the checkout, by path (never ``pip install 'evalgate[...]'``, which would
    fetch the unrelated project of that name from the index)."""
    return f"pip install '<evalgate checkout>[{extra}]' (by path; 'evalgate' on PyPI is another project)"
