"""The store test suite (``tests/helpers/store_suite.py``, docs/STORE.md) runs on both backends: every test of every
module it lists is collected once as ``[duckdb-file]`` and once as ``[postgresql]``, or, where it is one backend's
by nature, with that backend's id alone and a ``file_only`` / ``server_only`` marker giving the reason; so a new
store test cannot run on one backend only without saying why. In the modules of ``MEMORY_TWINS`` a two-backend test
is also collected as ``[duckdb-memory]`` (the fast lane's stand-in for its file id), unless a ``not_in_memory``
marker says why not; the ids carry the markers that choose each lane. Every module of tests/store and tests/accesslog
is listed, and docs/STORE.md lists the same modules."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict

from tests.conftest import REPO
from tests.helpers.store_suite import BACKENDS, MEMORY, MEMORY_TWINS, NOT_IN_MEMORY, ONLY, STORE_SUITE

BACKEND_ID = re.compile(r"(?<=[\[-])(duckdb-file|duckdb-memory|postgresql)(?=[\]-])")
"""A backend id among a test id's parameter ids (``test_x[duckdb-file]``, ``test_x[a-postgresql]``)."""


def without_backend(nodeid: str) -> tuple[str, str | None]:
    """A test id without its backend id (``m.py::t[a-postgresql]`` -> ``m.py::t[a]``), and that backend id."""
    found = BACKEND_ID.search(nodeid)
    if found is None:
        return nodeid, None
    rest = nodeid[:found.start()] + nodeid[found.end():]
    return rest.replace("[-", "[").replace("-]", "]").replace("--", "-").replace("[]", ""), found.group(1)


def backends_by_test(nodeids: list[str]) -> dict[str, set[str]]:
    """Test id without its backend id -> the backend ids it was collected with (empty where it has none)."""
    out: dict[str, set[str]] = defaultdict(set)
    for nodeid in nodeids:
        test, backend = without_backend(nodeid)
        out[test].update([backend] if backend else [])
    return dict(out)


def test_backends_by_test_pairs_the_two_ids_of_one_test() -> None:
    got = backends_by_test(["m.py::t[duckdb-file]", "m.py::t[postgresql]", "m.py::u[a-postgresql]",
                            "m.py::u[a-duckdb-file]", "m.py::v[postgresql-b]", "m.py::w",
                            "m.py::x[postgresql:/alice@host/db]", "m.py::y[duckdb-memory-c]", "m.py::y[duckdb-file-c]"])
    assert got == {"m.py::t": {"duckdb-file", "postgresql"}, "m.py::u[a]": {"duckdb-file", "postgresql"},
                   "m.py::v[b]": {"postgresql"}, "m.py::w": set(), "m.py::x[postgresql:/alice@host/db]": set(),
                   "m.py::y[c]": {"duckdb-file", "duckdb-memory"}}


def test_every_store_suite_test_is_collected_on_both_backends_or_says_why_not() -> None:
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-p",
                        "no:cacheprovider", "-p", "tests.helpers.collect_backends", *STORE_SUITE], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [ln.split("\t") for ln in r.stdout.splitlines() if ln.startswith("STORE-SUITE\t")]
    got = backends_by_test([nodeid for _, nodeid, _, _, _ in lines])
    marker_of = {without_backend(nodeid)[0]: (marker, reason) for _, nodeid, marker, reason, _ in lines}
    assert {test.split("::")[0] for test in got} == set(STORE_SUITE)  # every listed module has tests
    assert set(MEMORY_TWINS) <= set(STORE_SUITE) and any(MEMORY in b for b in got.values())
    one_backend = {test: sorted(b) for test, b in got.items() if len(b) < len(BACKENDS)}
    assert one_backend, "no test is one backend's by nature: the check below would check nothing"
    wrong = {test: (backends, *marker_of[test]) for test, backends in one_backend.items()
             if len(backends) != 1 or ONLY.get(marker_of[test][0]) != backends[0] or not marker_of[test][1].strip()}
    assert wrong == {}  # test -> (its backends, its marker, the reason): one backend, named by a reasoned marker
    both = {test: b for test, b in got.items() if len(b) >= len(BACKENDS)}
    twin = {test: b == {*BACKENDS, MEMORY} if test.split("::")[0] in MEMORY_TWINS else b == set(BACKENDS)
            for test, b in both.items()}
    out_of_memory = {test for test, b in both.items() if b == set(BACKENDS) and test.split("::")[0] in MEMORY_TWINS}
    assert out_of_memory, "no test of a twin module is marked not_in_memory: the check below would check nothing"
    wrong = {test: (sorted(both[test]), *marker_of[test]) for test, ok in twin.items()
             if not ok and not (test in out_of_memory and marker_of[test][0] == NOT_IN_MEMORY
                                and marker_of[test][1].strip())}
    assert wrong == {}  # in a twin module every two-backend test runs in memory too, or a marker says why not
    lanes = {nodeid: set(lane.split(",")) - {"-"} for _, nodeid, _, _, lane in lines}
    expected = {nodeid: {"integration"} if backend == "postgresql" else {"store_memory"} if backend == MEMORY
                else {"store_file"} if backend == "duckdb-file" and MEMORY in got[test] else set()
                for nodeid in lanes for test, backend in [without_backend(nodeid)] if backend}
    store_lanes = {"store_memory", "store_file"}  # integration may also be a test's own (several processes)
    assert {n: lanes[n] for n in expected if not expected[n] <= lanes[n] or lanes[n] & store_lanes
            != expected[n] & store_lanes} == {}  # what each lane selects on
    assert [n for n in lanes if {"integration", "store_memory"} <= lanes[n]] == []  # an id neither lane runs


def test_the_suite_lists_every_store_and_access_log_module_and_the_docs_list_it() -> None:
    here = {str(p.relative_to(REPO)) for d in ("tests/store", "tests/accesslog") for p in (REPO / d).glob("test_*.py")}
    assert here - set(STORE_SUITE) == set()
    assert len(set(STORE_SUITE)) == len(STORE_SUITE) and all((REPO / m).is_file() for m in STORE_SUITE)
    section = (REPO / "docs" / "STORE.md").read_text().split("## The store test suite", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^- `(tests/[\w/]+\.py)`", section, re.M) == list(STORE_SUITE)
