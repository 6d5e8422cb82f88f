"""A pytest plugin for tests/test_store_suite.py (``-p tests.helpers.collect_backends``): once collection ends, one
line per collected test on stdout, ``STORE-SUITE<TAB>nodeid<TAB>marker<TAB>reason`` (``-`` where the test has no
``file_only`` / ``server_only`` marker)."""

from __future__ import annotations

import pytest

from tests.helpers.store_suite import ONLY


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        mark = next((m for name in ONLY if (m := item.get_closest_marker(name)) is not None), None)
        marker, reason = (mark.name, str(mark.args[0]) if mark.args else "") if mark else ("-", "-")
        print(f"STORE-SUITE\t{item.nodeid}\t{marker}\t{reason}")
