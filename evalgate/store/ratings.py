"""Human-audit scores and blind rating in the browser: raters, batches, one-time form tokens, ratings
(``human_scores``, ``raters``, ``rater_sessions``, ``audit_batches``, ``audit_batch_items``, ``audit_rater_seeds``,
``audit_ratings``, ``audit_rating_events``, ``form_tokens``; ``evalgate.human.rating`` and ``evalgate.human.web``
use them).

The policy lives in ``evalgate.human.rating`` (how long a form token is valid, ``rating.FORM_TOKEN_TTL``, is given to
the calls that need it); raters' notes are sealed (``evalgate.store.codec``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.store.codec import note_codec, open_read
from evalgate.store.db import Repository, insert_values, records, upsert
from evalgate.store.rows import BatchItem, BatchRow, HumanScore, RaterRow, RatingEvent, RatingRow

_HUMAN_SCORE_COLUMNS = ("split", "item_id", "run_id", "sample_index", "rater", "score", "auto_score", "note",
                        "source_sha256", "imported_by", "imported_at")
HUMAN_SCORES_KEY = ("split", "item_id", "run_id", "sample_index", "rater")
"""``human_scores``' primary key (migration 2)."""
AUDIT_RATINGS_COLUMNS = ("batch_id", "rater", "item_id", "sample_index", "score", "skipped", "note", "rated_at",
                         "submissions")
"""``audit_ratings``' columns in table order, its primary key first (migration 12)."""


class RatingRepo(Repository):
    """Human scores, raters, rating batches, form tokens and ratings."""

    def put_human_scores(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace human scores (``human_scores`` columns) in one transaction. Raters' notes may quote
        the human-audit item, so they are stored encrypted (``evalgate.store.codec``).

        Raises:
            RefusedByPolicy: a note and no private key (nothing is written)."""
        if not rows:  # DuckDB's executemany refuses an empty list
            return
        cols = _HUMAN_SCORE_COLUMNS
        with self.connect() as con:
            codec = note_codec(con, any(r.get("note") for r in rows), self.env)
            # executemany, not insert_values: two rows with one key in a file must replace (last wins); one
            # multi-row INSERT keeps the first of them instead (DuckDB 1.x, checked), or fails (PostgreSQL)
            con.executemany(upsert("human_scores", cols, HUMAN_SCORES_KEY),
                            [list(codec.row("human_scores", {c: r[c] for c in cols}).values()) for r in rows])

    def human_scores(self, split: str, run_id: str | None = None) -> list[HumanScore]:
        """Human scores of a split (optionally of one run), ordered by item, run, sample index and rater."""
        sql, args = "SELECT * FROM human_scores WHERE split=?", [split]
        if run_id is not None:
            sql += " AND run_id=?"
            args.append(run_id)
        with self.connect() as con:
            rows = records(con, sql + " ORDER BY item_id, run_id, sample_index, rater", args)
        return HumanScore.from_dicts(open_read("human_scores", rows, self.env))

    def put_rater(self, name: str, token_sha256: str, role: str, created_by: str) -> bool:
        """Add a rater or give an existing one a new token (the old token stops working at once).

        Returns:
            True when the rater existed (its token was replaced).
        """
        with self.connect() as con:
            existed = con.execute("SELECT count(*) FROM raters WHERE name=?", [name]).fetchone() != (0,)
            con.execute("DELETE FROM raters WHERE name=?", [name])
            con.execute("INSERT INTO raters VALUES (?, ?, ?, ?, ?)",
                        [name, token_sha256, role, self.clock(), created_by])
            # the browser sessions opened with the old token end with it
            con.execute("UPDATE rater_sessions SET ended_at=? WHERE rater=? AND ended_at IS NULL",
                        [self.clock(), name])
        return existed

    def start_session(self, session_sha256: str, rater: str) -> None:
        """Record a browser session of ``rater`` (the store keeps only the session id's sha256)."""
        with self.connect() as con:
            con.execute("INSERT INTO rater_sessions VALUES (?, ?, ?, NULL)", [session_sha256, rater, self.clock()])

    def session_rater(self, session_sha256: str, started_after: datetime) -> RaterRow | None:
        """The rater (``name``, ``role``) of the session with this sha256 if it has not ended and started after
        ``started_after`` (the caller's time-to-live, ``rating.SESSION_TTL``), else None."""
        with self.connect() as con:
            r = con.execute("SELECT r.name, r.role FROM rater_sessions s JOIN raters r ON r.name=s.rater WHERE "
                            "s.session_sha256=? AND s.ended_at IS NULL AND s.created_at > ?",
                            [session_sha256, started_after]).fetchone()
        return RaterRow(r[0], r[1]) if r else None

    def end_session(self, session_sha256: str) -> bool:
        """End a session (logout); returns whether one was open."""
        with self.connect() as con:
            return bool(con.execute("UPDATE rater_sessions SET ended_at=? WHERE session_sha256=? AND ended_at IS "
                                    "NULL RETURNING rater", [self.clock(), session_sha256]).fetchall())

    def rater_names(self) -> list[str]:
        """Every rater name the store holds: web raters, and the raters of imported human scores and ratings
        (sorted)."""
        with self.connect() as con:
            rows = con.execute("SELECT name FROM raters UNION SELECT rater FROM human_scores UNION "
                               "SELECT rater FROM audit_ratings").fetchall()
        return sorted(str(r[0]) for r in rows if r[0] is not None)

    def rater_by_token(self, token_sha256: str) -> RaterRow | None:
        """The rater (``name``, ``role``) holding the token with this sha256, or None."""
        with self.connect() as con:
            r = con.execute("SELECT name, role FROM raters WHERE token_sha256=?", [token_sha256]).fetchone()
        return RaterRow(r[0], r[1]) if r else None

    def create_batch(self, batch: dict[str, Any], items: Sequence[dict[str, Any]]) -> None:
        """Insert a rating batch (``audit_batches`` columns) and its samples (``audit_batch_items`` columns) in one
        transaction."""
        with self.connect() as con:
            con.execute(f"INSERT INTO audit_batches ({', '.join(batch)}) VALUES ({', '.join('?' * len(batch))})",
                        list(batch.values()))
            insert_values(con, "INSERT INTO audit_batch_items",
                          [[batch["batch_id"], i["sample_key"], i["position"], i["item_id"], i["sample_index"]]
                           for i in items])

    def batches(self, batch_id: str | None = None) -> list[BatchRow]:
        """Rating batches (all, or the one with ``batch_id``), oldest first, with ``n_items``."""
        with self.connect() as con:
            rows = records(con, "SELECT b.*, (SELECT count(*) FROM audit_batch_items i WHERE i.batch_id=b.batch_id) "
                           "AS n_items FROM audit_batches b WHERE ? IS NULL OR b.batch_id=? ORDER BY b.created_at",
                           [batch_id, batch_id])
        return BatchRow.from_dicts(rows)

    def batch_items(self, batch_id: str) -> list[BatchItem]:
        """A batch's samples (sample_key, position, item_id, sample_index) in position order."""
        with self.connect() as con:
            cur = con.execute("SELECT sample_key, position, item_id, sample_index FROM audit_batch_items "
                              "WHERE batch_id=? ORDER BY position", [batch_id])
            return [BatchItem(*r) for r in cur.fetchall()]

    def rater_seed(self, batch_id: str, rater: str, new_seed: int) -> int:
        """The rater's shuffle seed for a batch; ``new_seed`` is recorded (and returned) on the first call."""
        with self.connect() as con:
            r = con.execute("SELECT seed FROM audit_rater_seeds WHERE batch_id=? AND rater=?",
                            [batch_id, rater]).fetchone()
            if r:
                return int(r[0])
            con.execute("INSERT INTO audit_rater_seeds VALUES (?, ?, ?, ?)", [batch_id, rater, new_seed, self.clock()])
        return new_seed

    def ratings(self, batch_id: str | None = None, rater: str | None = None) -> list[RatingRow]:
        """Current ratings (one per batch, rater and sample), optionally of one batch and one rater."""
        with self.connect() as con:
            rows = records(con, "SELECT * FROM audit_ratings WHERE (? IS NULL OR batch_id=?) AND (? IS NULL OR "
                           "rater=?) ORDER BY batch_id, rater, item_id, sample_index",
                           [batch_id, batch_id, rater, rater])
        return RatingRow.from_dicts(rows)

    def rating_events(self, batch_id: str) -> list[RatingEvent]:
        """Every submission to a batch (``action`` ``scored``, ``replaced`` or ``skipped``), in time order."""
        with self.connect() as con:
            rows = records(con, "SELECT * FROM audit_rating_events WHERE batch_id=? ORDER BY ts", [batch_id])
        return RatingEvent.from_dicts(rows)

    def issue_form_token(self, token_sha256: str, rater: str, purpose: str, ttl: timedelta) -> None:
        """Record a one-time form token issued to ``rater`` for ``purpose``, and drop tokens issued more than
        ``ttl`` ago (expired whether spent or not: a replay of a dropped one is refused as unknown)."""
        ts = self.clock()
        with self.connect() as con:
            con.execute("DELETE FROM form_tokens WHERE issued_at < ?", [ts - ttl])
            con.execute("INSERT INTO form_tokens VALUES (?, ?, ?, ?, NULL)", [token_sha256, rater, purpose, ts])

    def submit_rating(self, *, form_token_sha256: str, purpose: str, ttl: timedelta, batch_id: str, rater: str,
                      sample_key: str, score: float | None, note: str | None,
                      human_score: dict[str, Any] | None) -> str:
        """Spend a form token (issued less than ``ttl`` ago) and store one rating, all in one transaction: a refused
        submission writes nothing.

        ``score`` None is a skip (kept only while the sample has no score). A score replaces the rater's earlier
        one; every submission is also appended to ``audit_rating_events``. ``human_score`` (``human_scores``
        columns less item_id, sample_index and score) mirrors the score into ``human_scores``.

        Returns:
            The action: ``scored``, ``replaced`` or ``skipped``.

        Raises:
            RefusedByPolicy: the form token is unknown, expired, another rater's or already used (a replayed
                form); a note and no private key (nothing is written).
            BadInput: ``sample_key`` is not a sample of ``batch_id``.
        """
        ts = self.clock()
        with self.connect() as con:
            # a note may quote the item or the completion: sealed like every text derived from human-audit items
            note = note_codec(con, bool(note), self.env).value("audit_ratings", "note", note)
            spent = con.execute("UPDATE form_tokens SET used_at=? WHERE token_sha256=? AND rater=? AND purpose=? "
                                "AND used_at IS NULL AND issued_at >= ? RETURNING rater",
                                [ts, form_token_sha256, rater, purpose, ts - ttl])
            if not spent.fetchall():
                raise RefusedByPolicy("this form was already submitted, has expired (forms are valid for "
                                      f"{ttl.total_seconds() / 3600:g} h) or was not issued to you (a "
                                      "replayed or forged form); nothing was stored. Reload the page and submit again")
            item = con.execute("SELECT item_id, sample_index FROM audit_batch_items WHERE batch_id=? AND "
                               "sample_key=?", [batch_id, sample_key]).fetchone()
            if item is None:
                raise BadInput(f"sample {sample_key!r} is not in batch {batch_id}; nothing was stored. Reload the "
                               "batch's page")
            return _put_rating(con, batch_id, rater, item, score, note, human_score, ts)

    def import_ratings(self, batch_id: str, rows: Sequence[dict[str, Any]], human_score: dict[str, Any]) -> int:
        """Store scores people gave in a file (``evalgate splits import-audit``) as ratings of a batch, exactly as
        ``submit_rating`` stores a form's (``audit_ratings``, an ``audit_rating_events`` row each, mirrored into
        ``human_scores``), all in one transaction: a bad row writes nothing.

        Args:
            rows: ``{"sample_key", "rater", "score", "note", "auto_score"}`` per rating.
            human_score: the ``human_scores`` columns every row shares (``split``, ``run_id``, ``source_sha256``,
                ``imported_by``).

        Returns:
            How many ratings were stored.

        Raises:
            BadInput: a ``sample_key`` that is not a sample of the batch.
            RefusedByPolicy: a note and no private key.
        """
        ts = self.clock()
        with self.connect() as con:
            codec = note_codec(con, any(r.get("note") for r in rows), self.env)
            for r in rows:
                item = con.execute("SELECT item_id, sample_index FROM audit_batch_items WHERE batch_id=? AND "
                                   "sample_key=?", [batch_id, r["sample_key"]]).fetchone()
                if item is None:
                    raise BadInput(f"sample {r['sample_key']!r} is not in batch {batch_id}; nothing was stored. "
                                   "Import the file 'evalgate splits export-audit' wrote, unchanged but for "
                                   "human_score, rater and note")
                note = codec.value("audit_ratings", "note", r.get("note"))
                _put_rating(con, batch_id, r["rater"], item, r["score"], note,
                            {**human_score, "rater": r["rater"], "auto_score": r["auto_score"]}, ts)
        return len(rows)


def _put_rating(con: Any, batch_id: str, rater: str, item: tuple[str, int], score: float | None, note: str | None,
                human_score: dict[str, Any] | None, ts: datetime) -> str:
    """One rating of a batch's sample (``item``: item id, sample index) in an open transaction: the event row, the
    current rating (a skip never erases a score) and its ``human_scores`` mirror; returns the action."""
    old = con.execute("SELECT score, submissions FROM audit_ratings WHERE batch_id=? AND rater=? AND "
                      "item_id=? AND sample_index=?", [batch_id, rater, *item]).fetchone()
    action = "skipped" if score is None else ("replaced" if old and old[0] is not None else "scored")
    con.execute("INSERT INTO audit_rating_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [batch_id, rater, *item, score, score is None, note, old[0] if old else None, action, ts])
    if score is None and old and old[0] is not None:
        return action
    con.execute(upsert("audit_ratings", AUDIT_RATINGS_COLUMNS, AUDIT_RATINGS_COLUMNS[:4]),
                [batch_id, rater, *item, score, score is None, note, ts, (old[1] if old else 0) + 1])
    if score is not None and human_score is not None:
        row = {**human_score, "item_id": item[0], "sample_index": item[1], "score": score, "note": note,
               "imported_at": ts}
        con.execute(upsert("human_scores", list(row), HUMAN_SCORES_KEY), list(row.values()))
    return action
