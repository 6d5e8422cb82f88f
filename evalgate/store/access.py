"""The hash-chained access log (``access_log``), its verified head and its signed head, and the budget rule.

The budget rule is defined here once, above the SQL: ``Counted`` says which access-log rows a budget counts
(by outcome and purpose); ``AccessLogRepo.append`` renders it into the SQL that counts the stored rows and applies
it in Python to the rows being appended, in one transaction, and ``evalgate.splits`` asks ``count`` with the same
rule. It lives in the store rather than in ``evalgate.splits`` because the store is the layer below the splits
(the import-linter contract in pyproject.toml): the splits decide *whether* a read may happen, the store counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from evalgate.core.enums import Outcome
from evalgate.store.db import Connection, Repository, insert_values
from evalgate.store.dialect import POSTGRESQL, dialect
from evalgate.store.rows import AccessRow

CONTAMINATION_CHECK = "contamination-check"
"""The purpose of ``evalgate splits contamination``'s reads: allowed on every tier, counted by a budget of its own
(``CONTAMINATION_CHECKS``), never by the read budget."""

ACCESS_COLUMNS = ("seq", "ts", "actor", "ci", "split", "tier", "purpose", "outcome", "cached",
                  "checkpoint_digest", "protocol_hash", "run_id", "detail", "prev_hash", "row_hash")
"""The access_log columns, in table order."""


@dataclass(frozen=True)
class Counted:
    """Which access-log rows a budget counts: outcome in ``outcomes``, and purpose in ``purposes`` (None: any)
    and not in ``except_purposes``."""

    outcomes: tuple[str, ...]
    purposes: tuple[str, ...] | None = None
    except_purposes: tuple[str, ...] = ()

    def counts(self, row: Mapping[str, Any]) -> bool:
        """Whether ``row`` (access-log columns) counts."""
        return (row["outcome"] in self.outcomes and (self.purposes is None or row["purpose"] in self.purposes)
                and row["purpose"] not in self.except_purposes)

    def sql(self) -> tuple[str, list[str]]:
        """The rule as a SQL condition over ``access_log`` columns, and its parameters."""
        clauses, params = [f"outcome IN ({', '.join('?' * len(self.outcomes))})"], list(self.outcomes)
        if self.purposes is not None:
            clauses.append(f"purpose IN ({', '.join('?' * len(self.purposes))})")
            params += self.purposes
        if self.except_purposes:
            clauses.append(f"purpose NOT IN ({', '.join('?' * len(self.except_purposes))})")
            params += self.except_purposes
        return " AND ".join(clauses), params


READS = Counted(outcomes=(Outcome.READ.value, Outcome.OVERRIDE.value), except_purposes=(CONTAMINATION_CHECK,))
"""What a read budget (``Policy.max_reads``) counts: permitted reads (``read``, or ``override`` of a soft budget),
cached or not, except contamination checks. ``reserved-read`` rows are not counted: ``reserve`` logged and counted
each as ``read`` before."""

CONTAMINATION_CHECKS = Counted(outcomes=(Outcome.READ.value,), purposes=(CONTAMINATION_CHECK,))
"""What the sealed tiers' contamination-check budget (``Policy.max_contamination_checks``) counts."""


@dataclass(frozen=True)
class BudgetLimit:
    """Append only while the ``counted`` rows of ``splits`` with ``ts >= since``, plus those being appended, stay
    within ``max_rows``.

    Attributes:
        splits: the split names that share the budget (one content known under several names, ``evalgate.splits``).
        since: the start of the budget window (UTC).
        max_rows: the budget (reads, or contamination checks, per window).
        counted: the rule (``READS`` or ``CONTAMINATION_CHECKS``).
    """

    splits: tuple[str, ...]
    since: datetime
    max_rows: int
    counted: Counted = READS


@dataclass(frozen=True)
class ChainLink:
    """A row's place in the hash chain: its ``seq`` and ``row_hash``."""

    seq: int
    row_hash: str


@dataclass(frozen=True)
class VerifiedHead:
    """The last verified head of the chain, and the first bad row found (None while the chain is intact)."""

    seq: int
    row_hash: str
    broken_seq: int | None
    broken_reason: str | None


@dataclass(frozen=True)
class SignedHead:
    """The newest signed head: row ``seq`` with hash ``row_hash``, signed (hex) with the Ed25519 ``public_key``."""

    seq: int
    row_hash: str
    public_key: str
    signature: str
    signed_at: datetime


class AccessLogRepo(Repository):
    """The access log's rows (appended already chained by ``evalgate.access.log``), and its verified and signed
    heads."""

    def append(self, rows: Sequence[Mapping[str, Any]], limit: BudgetLimit | Sequence[BudgetLimit] | None = None,
               signature: tuple[int, str, str, str] | None = None) -> bool:
        """Insert access-log rows as given (already chained) in one transaction.

        Args:
            rows: the chained rows (``ACCESS_COLUMNS``).
            limit: insert only within this budget (or within every one of several: a suite gate's reservation
                over its members' splits), counted in the same transaction as the insert (concurrent readers cannot
                overdraw it).
            signature: ``(seq, row_hash, public_key, signature)`` of the new head, stored in the same transaction
                (``evalgate.keys.signing``), so no row is ever committed without the signature meant for it.

        Returns:
            False when ``limit`` refused the rows (nothing inserted), else True.
        """
        with self.connect() as con:
            for lim in ([] if limit is None else [limit] if isinstance(limit, BudgetLimit) else limit):
                new = sum(1 for r in rows if r["split"] in lim.splits and lim.counted.counts(r))
                if self._count(con, lim) + new > lim.max_rows:
                    return False
            insert_values(con, f"INSERT INTO access_log ({', '.join(ACCESS_COLUMNS)})",
                          [[r[c] for c in ACCESS_COLUMNS] for r in rows])
            if signature is not None:
                self._sign(con, *signature)
        return True

    def count(self, splits: Sequence[str], since: datetime, counted: Counted = READS) -> int:
        """The ``counted`` rows of ``splits`` with ``ts >= since``: a budget's use."""
        with self.connect() as con:
            return self._count(con, BudgetLimit(tuple(splits), since, 0, counted))

    @staticmethod
    def _count(con: Connection, limit: BudgetLimit) -> int:
        if not limit.splits:
            return 0
        cond, params = limit.counted.sql()
        r = con.execute(f"SELECT count(*) FROM access_log WHERE split IN ({', '.join('?' * len(limit.splits))}) "
                        f"AND ts>=? AND {cond}", [*limit.splits, limit.since, *params]).fetchone()
        return int(r[0]) if r else 0

    def access_log_last(self) -> ChainLink | None:
        """The last access-log row's ``seq`` and ``row_hash``, or None for an empty log.

        By ``max(seq)``, not ``ORDER BY seq DESC LIMIT 1``: in a memory database (DuckDB 2.0.1) that has seen some
        50 transactions, the Top-N scan missed a row appended after a delete, so the next row took its ``seq``
        (a duplicate key: tests/store/test_memory.py).
        """
        with self.connect() as con:
            r = con.execute("SELECT seq, row_hash FROM access_log WHERE seq = (SELECT max(seq) FROM access_log)"
                            ).fetchone()
        return ChainLink(*r) if r else None

    def access_first_seq(self, splits: Sequence[str]) -> dict[str, int]:
        """The ``seq`` of each split's first access-log row (splits without a row are left out)."""
        if not splits:
            return {}
        with self.connect() as con:
            cur = con.execute(f"SELECT split, min(seq) FROM access_log WHERE split IN ({', '.join('?' * len(splits))})"
                              " GROUP BY split", list(splits))
            return {r[0]: int(r[1]) for r in cur.fetchall()}

    def access_content_changes(self) -> list[AccessRow]:
        """The access-log rows (``AccessRow``s) that record a split's data being added or replaced (outcome
        ``added`` or ``replaced``; their detail names the content hashes), in sequence order."""
        with self.connect() as con:
            return AccessRow.from_cursor(con.execute("SELECT * FROM access_log WHERE outcome IN (?, ?) ORDER BY seq",
                                                     [Outcome.ADDED.value, Outcome.REPLACED.value]))

    def access_log_count(self, up_to_seq: int) -> int:
        """Number of access-log rows with ``seq <= up_to_seq``."""
        with self.connect() as con:
            r = con.execute("SELECT count(*) FROM access_log WHERE seq <= ?", [up_to_seq]).fetchone()
        return int(r[0]) if r else 0

    def access_rows(self, split: str | None = None, since: datetime | None = None,
                    from_seq: int | None = None) -> list[AccessRow]:
        """Access-log rows (``AccessRow``s) in sequence order, optionally for one split, from a time on (``ts >=
        since``), from a ``seq`` on."""
        sql, args = "SELECT * FROM access_log WHERE TRUE", list[Any]()
        if split:
            sql += " AND split=?"
            args.append(split)
        if since:
            sql += " AND ts>=?"
            args.append(since)
        if from_seq is not None:
            sql += " AND seq>=?"
            args.append(from_seq)
        with self.connect() as con:
            return AccessRow.from_cursor(con.execute(sql + " ORDER BY seq", args))

    def access_log_head(self) -> VerifiedHead | None:
        """The last verified head and the first bad row found; None before the first check."""
        with self.connect() as con:
            r = con.execute("SELECT seq, row_hash, broken_seq, broken_reason FROM access_log_head").fetchone()
        return VerifiedHead(*r) if r else None

    def access_log_heads(self) -> tuple[VerifiedHead | None, SignedHead | None]:
        """``access_log_head()`` and ``access_log_signature()`` read in one statement (an append needs both)."""
        with self.connect() as con:
            r = con.execute("SELECT h.seq, h.row_hash, h.broken_seq, h.broken_reason, s.seq, s.row_hash, "
                            "s.public_key, s.signature, s.signed_at FROM (SELECT 1) AS one "
                            "LEFT JOIN access_log_head h ON TRUE LEFT JOIN access_log_signature s ON TRUE").fetchone()
        assert r is not None  # the one row of (SELECT 1)
        return (VerifiedHead(*r[:4]) if r[0] is not None else None,
                SignedHead(*r[4:]) if r[4] is not None else None)

    def set_access_log_head(self, seq: int, row_hash: str) -> None:
        """Record that the chain up to row ``seq`` (hash ``row_hash``) was verified intact (nothing for a role that
        may not write it: ``_may_record``)."""
        with self.connect() as con:
            if not _may_record(con):
                return
            _replace_row(con, "access_log_head", ("seq", "row_hash", "broken_seq", "broken_reason", "checked_at"),
                         [seq, row_hash, None, None, self.clock()])

    def mark_access_log_broken(self, seq: int, reason: str) -> None:
        """Record the first bad row found (kept until a full verify finds the chain intact; nothing for a role that
        may not write it: ``_may_record``)."""
        with self.connect() as con:
            if not _may_record(con):
                return
            if con.execute("SELECT count(*) FROM access_log_head").fetchone() == (0,):
                con.execute("INSERT INTO access_log_head VALUES (0, ?, NULL, NULL, ?)",
                            ["0" * 64, self.clock()])
            con.execute("UPDATE access_log_head SET broken_seq=?, broken_reason=?, checked_at=?",
                        [seq, reason, self.clock()])

    def access_log_signature(self) -> SignedHead | None:
        """The newest signed head, or None."""
        with self.connect() as con:
            r = con.execute("SELECT seq, row_hash, public_key, signature, signed_at FROM access_log_signature"
                            ).fetchone()
        return SignedHead(*r) if r else None

    def set_access_log_signature(self, seq: int, row_hash: str, public_key: str, signature: str) -> None:
        """Replace the newest signed head (``evalgate.keys.signing``)."""
        with self.connect() as con:
            self._sign(con, seq, row_hash, public_key, signature)

    def _sign(self, con: Connection, seq: int, row_hash: str, public_key: str, signature: str) -> None:
        """Replace the signed head; on a PostgreSQL store through ``evalgate_sign_head`` (migration 47), which moves
        it only forward and only to the log's last row, the one change of it the server allows an evaluator."""
        if dialect(con) == POSTGRESQL:
            con.execute("SELECT evalgate_sign_head(?, ?, ?, ?, ?)", [seq, row_hash, public_key, signature,
                                                                     self.clock()])
            return
        _replace_row(con, "access_log_signature", ("seq", "row_hash", "public_key", "signature", "signed_at"),
                     [seq, row_hash, public_key, signature, self.clock()])


def _replace_row(con: Connection, table: str, columns: Sequence[str], values: Sequence[Any]) -> None:
    """Make ``values`` the one row of ``table`` (a head: empty before its first write): ``UPDATE`` every row, and
    ``INSERT`` only where there was none; one statement per append where ``DELETE`` then ``INSERT`` took two
    (bench/accesslog_statements.py)."""
    sets = ", ".join(f"{c}=?" for c in columns)
    if con.execute(f"UPDATE {table} SET {sets} RETURNING 1", list(values)).fetchone() is None:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                    list(values))


def _may_record(con: Connection) -> bool:
    """Whether this connection may write the verified head (``access_log_head``): always on a file; on a
    PostgreSQL store not for a role granted only reads (``evalgate_auditor``), whose ``audit verify`` checks the
    chain without recording what it found (the record only spares an evaluator's next append a full check)."""
    if dialect(con) != POSTGRESQL:
        return True
    row = con.execute("SELECT has_table_privilege('access_log_head', 'INSERT') AND "
                      "has_table_privilege('access_log_head', 'DELETE') AND "
                      "has_table_privilege('access_log_head', 'UPDATE')").fetchone()
    return bool(row and row[0])
