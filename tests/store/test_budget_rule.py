"""The budget rule (``store.access.Counted``): which access-log rows a read budget and a contamination-check budget
count, by hand, in SQL (``AccessLogRepo.count``) and in Python (``Counted.counts``, used on the rows being appended);
and the append's limit, which counts both in one transaction; on each backend (a DuckDB file, a PostgreSQL server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evalgate.store import CONTAMINATION_CHECKS, READS, BudgetLimit, Store

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server
T0 = datetime(2026, 11, 1, tzinfo=UTC)
# (outcome, purpose) -> (counted by READS, counted by CONTAMINATION_CHECKS), by hand from the rules in
# evalgate/splits/__init__.py: permitted reads spend the read budget (cached or not, soft-budget overrides too);
# reserved reads were counted when reserved; refusals, re-reads and additions spend nothing; a contamination check
# spends only its own budget.
CASES = {
    ("read", "tuning"): (True, False),
    ("override", "trend"): (True, False),
    ("reserved-read", "release-gate"): (False, False),
    ("refused", "tuning"): (False, False),
    ("re-read", "report"): (False, False),
    ("added", "add-split"): (False, False),
    ("read", "contamination-check"): (False, True),
    ("refused", "contamination-check"): (False, False),
}


def _rows(split: str, ts: datetime, start: int = 1) -> list[dict]:
    """One row per case from ``seq`` ``start`` on, chained as a server store requires (migration 49): row ``n``'s
    hash is ``n`` in 64 digits, its prev_hash row ``n - 1``'s (64 zeros before the first)."""
    return [{"seq": start + i, "ts": ts, "actor": "a", "ci": False, "split": split, "tier": "public",
             "purpose": purpose, "outcome": outcome, "cached": False, "checkpoint_digest": None,
             "protocol_hash": None, "run_id": None, "detail": None, "prev_hash": f"{start + i - 1:064d}",
             "row_hash": f"{start + i:064d}"} for i, (outcome, purpose) in enumerate(CASES)]


def test_reads_and_contamination_checks_count_what_the_rules_say_in_sql_and_in_python(backend_store: Store) -> None:
    repo = backend_store
    rows = _rows("s", T0)
    assert repo.append(rows)
    assert [READS.counts(r) for r in rows] == [c[0] for c in CASES.values()]
    assert [CONTAMINATION_CHECKS.counts(r) for r in rows] == [c[1] for c in CASES.values()]
    assert repo.count(["s"], T0, READS) == 2 and repo.count(["s"], T0, CONTAMINATION_CHECKS) == 1
    assert repo.count(["s"], T0 + timedelta(seconds=1), READS) == 0  # before the window
    assert repo.count(["other"], T0, READS) == 0 and repo.count([], T0, READS) == 0


def test_a_limit_counts_stored_and_new_rows_of_every_name_and_refuses_all_or_nothing(backend_store: Store) -> None:
    repo = backend_store
    assert repo.append(_rows("a", T0))  # 2 reads of "a"
    new = _rows("b", T0, start=len(CASES) + 1)  # 2 more reads, under the other name of the same content
    assert not repo.append(new, BudgetLimit(("a", "b"), T0, 3))  # 2 stored + 2 new > 3
    assert repo.count(["a", "b"], T0, READS) == 2  # nothing of the refused rows was stored
    assert repo.append(new, BudgetLimit(("a", "b"), T0, 4))
    assert repo.count(["a", "b"], T0, READS) == 4
    assert repo.append([], BudgetLimit(("a",), T0, 0)) is False  # the window is already over budget
    assert repo.append([], BudgetLimit(("a",), T0 + timedelta(days=1), 0))  # nothing in this window
