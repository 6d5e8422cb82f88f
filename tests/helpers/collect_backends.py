"""A pytest plugin for tests/test_store_suite.py (``-p tests.helpers.collect_backends``): once collection ends, one
line per collected test on stdout, ``STORE-SUITE<TAB>nodeid<TAB>marker<TAB>reason<TAB>lanes``: the test's
``file_only`` / ``server_only`` / ``not_in_memory`` marker and its reason (``-`` where it has none), and the markers
that choose its lane among ``integration``, ``store_memory``, ``store_file`` (comma-separated, ``-`` for none)."""

from __future__ import annotations

import pytest

from tests.helpers.store_suite import NOT_IN_MEMORY, ONLY

LANE_MARKERS = ("integration", "store_memory", "store_file")
"""The markers that decide which of ``make test`` and ``make test-fast`` runs a store-suite id."""


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        mark = next((m for name in (*ONLY, NOT_IN_MEMORY) if (m := item.get_closest_marker(name)) is not None), None)
        marker, reason = (mark.name, str(mark.args[0]) if mark.args else "") if mark else ("-", "-")
        lanes = ",".join(m for m in LANE_MARKERS if item.get_closest_marker(m) is not None) or "-"
        print(f"STORE-SUITE\t{item.nodeid}\t{marker}\t{reason}\t{lanes}")
