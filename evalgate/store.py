"""The DuckDB store: schema migrations, all SQL, and a file lock for every connection.

DuckDB lets one process hold a database file open for writing, and a read-write connection excludes every other
process. So each operation here opens the file under ``filelock`` on ``<db>.lock``, runs one short transaction and
closes it: concurrent ``evalgate`` processes queue for a few milliseconds instead of failing, and nothing is lost.

Schema changes are numbered migrations in ``evalgate/migrations.py``, recorded in ``schema_migrations``; opening a store
applies the ones it has not seen.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock

from evalgate.errors import BadInput
from evalgate.migrations import MIGRATIONS


def home() -> Path:
    """``$EVALGATE_HOME`` (default ``./.evalgate``)."""
    return Path(os.environ.get("EVALGATE_HOME", ".evalgate"))


def now() -> datetime:
    return datetime.now(UTC)


_ACCESS_COLUMNS = ("seq", "ts", "actor", "ci", "split", "tier", "purpose", "outcome", "cached",
                   "checkpoint_digest", "protocol_hash", "run_id", "detail", "prev_hash", "row_hash")


# The access-log rows a budget counts: permitted reads, except contamination checks (see ``evalgate.splits``).
_COUNTED = "outcome IN ('read', 'override') AND purpose <> 'contamination-check'"

# The runs columns holding JSON.
_RUN_JSON_COLUMNS = ("backend_info", "effective_params", "metrics", "counts", "versions", "warnings")


def _json_values(row: dict[str, Any]) -> list[Any]:
    """A row's values for SQL parameters, dicts and lists encoded as JSON text."""
    return [json.dumps(v) if isinstance(v, dict | list) else v for v in row.values()]


def _dicts(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The rows of an executed query as dicts keyed by column name."""
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


class Store:
    """The evalgate database. Every method opens, uses and closes the DuckDB file under the lock (each call is one
    transaction), except inside ``session()``, where calls share one open connection.

    Args:
        path: database file; default ``$EVALGATE_HOME/evalgate.duckdb``.
        clock: returns the current UTC time; stamps access-log rows and anchors budget windows (tests inject one).
    """

    def __init__(self, path: str | Path | None = None, clock: Callable[[], datetime] = now):
        self.path = Path(path) if path else home() / "evalgate.duckdb"
        self.clock = clock
        self._lock = FileLock(str(self.path) + ".lock")
        self._session: duckdb.DuckDBPyConnection | None = None
        self._session_thread: int | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.connect():
                pass
        except OSError as e:  # the lock file cannot be created: a read-only or unwritable directory
            raise BadInput(f"cannot use the store {self.path}: {e}. evalgate writes there on every command (the "
                           "access log and its lock); set EVALGATE_HOME to a writable directory") from e

    @contextmanager
    def session(self) -> Iterator[None]:
        """Within the block, calls share one connection opened (under the lock) at its start; each call is still
        its own transaction, committed when it returns, so an exception loses nothing an earlier call wrote.

        Opening and closing DuckDB costs 15-50 ms per call here (the close checkpoints the write-ahead log), which
        is most of a fully cached run's store time. The lock is held for the whole block: use it around short,
        store-only work, never around generation. Nested sessions reuse the outer one. Only the thread that opened
        the session uses its connection (DuckDB connections are not for concurrent use); other threads wait for the
        lock as usual.

        Raises:
            EvalgateError: the database cannot be opened.
        """
        if self._session is not None and self._session_thread == threading.get_ident():
            yield
            return
        with self._lock:
            con = self._open()
            try:
                self._migrate(con)
                self._session, self._session_thread = con, threading.get_ident()
                yield
            finally:
                self._session, self._session_thread = None, None
                con.close()

    def _open(self) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(self.path))
        except duckdb.Error as e:
            raise BadInput(f"cannot open the store {self.path}: {type(e).__name__}: {e}. If the file is damaged, "
                           "restore it from a backup (the access log and the generation cache live in it), or set "
                           "EVALGATE_HOME to another directory to start a new store there") from e

    @contextmanager
    def _transaction(self, con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException as e:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass  # a damaged file can fail the rollback too; the error below says what happened
            if isinstance(e, duckdb.IOException):  # the file cannot be read: damaged or truncated
                raise BadInput(f"the store {self.path} cannot be read ({e}); it is damaged or truncated. Restore it "
                               "from a backup (the access log and the generation cache live in it), or set "
                               "EVALGATE_HOME to another directory to start a new store there") from e
            raise

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A locked connection inside one transaction; committed on success, rolled back on error."""
        if self._session is not None and self._session_thread == threading.get_ident():
            with self._transaction(self._session) as con:
                yield con
            return
        with self._lock:
            con = self._open()
            try:
                self._migrate(con)
                with self._transaction(con):
                    yield con
            finally:
                con.close()

    @staticmethod
    def _migrate(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMPTZ)")
        done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
        for version, name, fn in MIGRATIONS:
            if version not in done:
                con.execute("BEGIN TRANSACTION")
                fn(con)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, name, now()])
                con.execute("COMMIT")

    # -- protocols ---------------------------------------------------------------------------------------------
    def protocol_hash(self, name: str, version: str) -> str | None:
        """The hash frozen under ``name@version``, or None."""
        with self.connect() as con:
            row = con.execute("SELECT sha256 FROM protocols WHERE name=? AND version=?", [name, version]).fetchone()
        return row[0] if row else None

    def record_protocol(self, name: str, version: str, sha256: str, resolved: dict[str, Any]) -> None:
        """Remember ``name@version -> sha256``.

        Raises:
            BadInput: the version is already recorded with another hash (bump the version).
        """
        with self.connect() as con:
            row = con.execute("SELECT sha256 FROM protocols WHERE name=? AND version=?", [name, version]).fetchone()
            if row and row[0] != sha256:
                raise BadInput(
                    f"protocol {name}@{version} was already frozen with hash {row[0][:12]}; this content hashes to "
                    f"{sha256[:12]}. Bump 'version' in the protocol file, then freeze again"
                )
            if not row:
                con.execute("INSERT INTO protocols VALUES (?, ?, ?, ?, ?)",
                            [name, version, sha256, json.dumps(resolved), now()])

    # -- checkpoints and runs ----------------------------------------------------------------------------------
    def upsert_checkpoint(self, digest: str, path: str, kind: str, train_run: str | None,
                          train_seed: int | None, step: int | None) -> None:
        with self.connect() as con:
            con.execute("""INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?)
                           ON CONFLICT (digest) DO UPDATE SET path=excluded.path""",
                        [digest, path, kind, train_run, train_seed, step, now()])

    def create_run(self, row: dict[str, Any]) -> None:
        """Insert a run (``row``: runs columns to values, JSON columns as Python data; ``RunRecord.row``), stamped
        with its start time."""
        row = {"status": "running", **row, "started_at": now()}
        cols = ", ".join(row)
        with self.connect() as con:
            con.execute(f"INSERT INTO runs ({cols}) VALUES ({', '.join('?' * len(row))})", _json_values(row))

    def finish_run(self, row: dict[str, Any], samples: Sequence[dict[str, Any]]) -> None:
        """Write a run's scored samples, its record (``row``: run_id and the runs columns to set, as ``create_run``)
        and status ``complete``, in one transaction: a run is complete only when every sample row is stored."""
        run_id = row["run_id"]
        with self.connect() as con:
            con.execute("DELETE FROM samples WHERE run_id=?", [run_id])
            if samples:
                con.executemany(
                    "INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [[run_id, s["item_id"], s["sample_index"], s["seed"], s["score"], s["status"],
                      s.get("extracted"), s.get("detail"), s["cached"], json.dumps(s.get("behavior") or {})]
                     for s in samples])
            update = {**{k: v for k, v in row.items() if k != "run_id"}, "status": "complete", "finished_at": now()}
            con.execute(f"UPDATE runs SET {', '.join(f'{k}=?' for k in update)} WHERE run_id=?",
                        [*_json_values(update), run_id])

    def fail_run(self, run_id: str, error: str, status: str = "failed") -> None:
        """Mark a run ended without samples: ``failed``, or ``interrupted`` (stopped by the user; like a killed
        run, its stored generations are reused by the next identical run)."""
        with self.connect() as con:
            con.execute("UPDATE runs SET status=?, finished_at=?, error=? WHERE run_id=?",
                        [status, now(), error, run_id])

    def mark_interrupted_runs(self, host: str, is_alive: Callable[[int], bool]) -> list[str]:
        """Mark ``running`` runs started on ``host`` by a process that no longer exists as ``interrupted``.

        Their generations stay in the cache (a rerun resumes from them); they never get samples or metrics.
        Runs from other hosts, or from before the host/pid columns existed, are left alone.

        Returns:
            The run ids marked.
        """
        with self.connect() as con:
            rows = con.execute("SELECT run_id, pid FROM runs WHERE status='running' AND host=? AND pid IS NOT NULL",
                               [host]).fetchall()
            dead = [run_id for run_id, pid in rows if not is_alive(pid)]
            for run_id in dead:
                con.execute("UPDATE runs SET status='interrupted', error=? WHERE run_id=?",
                            ["the process running it ended without finishing it (killed or crashed); "
                             "its stored generations are reused by the next identical run", run_id])
        return dead

    def runs(self, **where: Any) -> list[dict[str, Any]]:
        """Runs matching column equalities (e.g. ``protocol_name=..., split=..., status='complete'``), oldest
        first, JSON columns decoded."""
        clause = " AND ".join(f"{k}=?" for k in where) or "TRUE"
        with self.connect() as con:
            cur = con.execute(f"SELECT * FROM runs WHERE {clause} ORDER BY started_at", list(where.values()))
            rows = _dicts(cur)
        for r in rows:
            for k in _RUN_JSON_COLUMNS:
                if isinstance(r.get(k), str):
                    r[k] = json.loads(r[k])
        return rows

    def samples(self, run_id: str) -> list[dict[str, Any]]:
        """A run's samples joined with their cached generations and prompts."""
        with self.connect() as con:
            cur = con.execute("""
                SELECT s.*, g.text, g.completion_tokens, g.prompt_tokens, g.finish_reason, p.text AS prompt
                FROM samples s JOIN runs r USING (run_id)
                LEFT JOIN run_prompts rp ON rp.run_id=s.run_id AND rp.item_id=s.item_id
                LEFT JOIN generations g ON g.checkpoint_digest=r.checkpoint_digest
                     AND g.protocol_hash=r.protocol_hash AND g.item_id=s.item_id
                     AND g.sample_index=s.sample_index AND g.seed=s.seed
                     AND (rp.prompt_sha256 IS NULL OR g.prompt_sha256=rp.prompt_sha256)
                     AND g.settings_sha256=coalesce(r.settings_sha256, '')
                LEFT JOIN prompts p ON p.sha256=g.prompt_sha256
                WHERE s.run_id=? ORDER BY s.item_id, s.sample_index""", [run_id])
            rows = _dicts(cur)
        for r in rows:
            r["behavior"] = json.loads(r["behavior"]) if r["behavior"] else {}
        return rows

    def put_run_prompts(self, run_id: str, rows: Sequence[dict[str, Any]], texts: dict[str, str]) -> None:
        """Record a run's rendered prompts: one ``run_prompts`` row per item (keys: item_id, prompt_sha256,
        prompt_tokens, bos_count, bos_added, system_merged) and each distinct text once in ``prompts``."""
        with self.connect() as con:
            con.executemany("INSERT INTO prompts VALUES (?, ?) ON CONFLICT DO NOTHING",
                            [[h, t] for h, t in texts.items()])
            con.executemany("INSERT INTO run_prompts VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [[run_id, r["item_id"], r["prompt_sha256"], r["prompt_tokens"], r["bos_count"],
                              r["bos_added"], r["system_merged"]] for r in rows])

    def run_prompts(self, run_id: str) -> list[dict[str, Any]]:
        """A run's rendered prompts by item id, with the prompt text (column ``text``)."""
        with self.connect() as con:
            cur = con.execute("""SELECT rp.*, p.text FROM run_prompts rp
                                 JOIN prompts p ON p.sha256=rp.prompt_sha256
                                 WHERE rp.run_id=? ORDER BY rp.item_id""", [run_id])
            return _dicts(cur)

    def reusable_prompts(self, checkpoint_digest: str, protocol_hash: str, split_sha256: str,
                         renderer: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The newest complete run whose prompts were rendered from the same inputs, and its prompt records.

        Same inputs: checkpoint digest (covers the tokenizer and the model's chat template), protocol hash
        (covers the templates and few-shot file), split content sha256, and ``backend_info.renderer`` (the
        evalgate and transformers versions that rendered them). A fully cached rerun uses these records instead of
        loading the tokenizer to render the prompts again.

        Returns:
            ``(run, records)``: the run's ``run_id`` and decoded ``backend_info``, and its ``run_prompts`` rows
            with ``text``; None when no such run recorded its prompts.
        """
        with self.connect() as con:
            rows = con.execute("""SELECT run_id, backend_info FROM runs
                                  WHERE status='complete' AND checkpoint_digest=? AND protocol_hash=?
                                        AND split_sha256=?
                                  ORDER BY finished_at DESC LIMIT 20""",
                               [checkpoint_digest, protocol_hash, split_sha256]).fetchall()
            for run_id, info in rows:
                info = json.loads(info) if isinstance(info, str) else (info or {})
                if info.get("renderer") != renderer:
                    continue
                cur = con.execute("""SELECT rp.*, p.text FROM run_prompts rp
                                     JOIN prompts p ON p.sha256=rp.prompt_sha256 WHERE rp.run_id=?""", [run_id])
                records = _dicts(cur)
                if records:
                    return {"run_id": run_id, "backend_info": info}, records
        return None

    # -- generation cache --------------------------------------------------------------------------------------
    def cached_generations(self, checkpoint_digest: str, protocol_hash: str,
                           keys: Sequence[tuple[str, int, int]], prompt_sha256: dict[str, str],
                           settings_sha256: str = "") -> dict[tuple[str, int, int], dict[str, Any]]:
        """Cached generations for ``(item_id, sample_index, seed)`` keys under one checkpoint and protocol, each
        generated from the prompt whose hash ``prompt_sha256[item_id]`` gives, under the generation settings whose
        hash is ``settings_sha256`` (``runner.settings``; ``""``: rows stored before migration 7). The full cache
        key is checkpoint digest, protocol hash, item, sample index, sampling seed, prompt hash and settings hash.
        Each value carries the ``run_id`` that generated it (None for rows from before migration 7)."""
        if not keys:
            return {}
        with self.connect() as con:
            con.execute("CREATE TEMP TABLE want (item_id VARCHAR, sample_index INTEGER, seed UBIGINT, "
                        "prompt_sha256 VARCHAR)")
            con.executemany("INSERT INTO want VALUES (?, ?, ?, ?)", [[*k, prompt_sha256[k[0]]] for k in keys])
            cur = con.execute("""
                SELECT g.item_id, g.sample_index, g.seed, g.text, g.completion_tokens, g.prompt_tokens,
                       g.finish_reason, g.prompt_sha256, g.run_id
                FROM generations g JOIN want w USING (item_id, sample_index, seed, prompt_sha256)
                WHERE g.checkpoint_digest=? AND g.protocol_hash=? AND g.settings_sha256=?""",
                              [checkpoint_digest, protocol_hash, settings_sha256])
            out = {(r[0], r[1], r[2]): {"text": r[3], "completion_tokens": r[4], "prompt_tokens": r[5],
                                        "finish_reason": r[6], "prompt_sha256": r[7], "run_id": r[8]}
                   for r in cur.fetchall()}
            con.execute("DROP TABLE want")
        return out

    def put_generations(self, checkpoint_digest: str, protocol_hash: str, rows: Sequence[dict[str, Any]],
                        prompts: dict[str, str], settings_sha256: str = "", run_id: str | None = None) -> None:
        """Store generations made by ``run_id`` under the settings hashed ``settings_sha256`` (and the prompts they
        came from, once per prompt hash) in one transaction."""
        with self.connect() as con:
            if prompts:
                con.executemany("INSERT INTO prompts VALUES (?, ?) ON CONFLICT DO NOTHING",
                                [[h, t] for h, t in prompts.items()])
            con.executemany(
                "INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [[checkpoint_digest, protocol_hash, r["item_id"], r["sample_index"], r["seed"], r["prompt_sha256"],
                  r["text"], r.get("prompt_tokens"), r["completion_tokens"], r["finish_reason"], now(),
                  settings_sha256, run_id]
                 for r in rows])

    # -- access log --------------------------------------------------------------------------------------------
    def access_log_last(self) -> dict[str, Any] | None:
        """The last access-log row's ``seq`` and ``row_hash``, or None for an empty log."""
        with self.connect() as con:
            r = con.execute("SELECT seq, row_hash FROM access_log ORDER BY seq DESC LIMIT 1").fetchone()
        return {"seq": r[0], "row_hash": r[1]} if r else None

    def insert_access_rows(self, rows: Sequence[dict[str, Any]],
                           budget: tuple[str, datetime, int] | None = None) -> bool:
        """Insert access-log rows as given (already chained by ``evalgate.accesslog``) in one transaction.

        Args:
            rows: the chained rows.
            budget: ``(split, window_start, max_reads)``: insert only if the split's permitted reads since
                ``window_start`` (as ``access_reads_since``) plus the permitted reads among ``rows`` stay within
                ``max_reads``; counted in the same transaction as the insert.

        Returns:
            False when ``budget`` refused the rows (nothing inserted), else True.
        """
        cols, chunk = [*_ACCESS_COLUMNS], 500  # multi-row VALUES: DuckDB's executemany inserts ~150 rows/s here
        one = f"({', '.join('?' * len(cols))})"
        with self.connect() as con:
            if budget is not None:
                split, start, max_reads = budget
                used = con.execute(f"SELECT count(*) FROM access_log WHERE split=? AND ts>=? AND {_COUNTED}",
                                   [split, start]).fetchone()
                new = sum(1 for r in rows if r["split"] == split and r["outcome"] in ("read", "override")
                          and r["purpose"] != "contamination-check")
                if (int(used[0]) if used else 0) + new > max_reads:
                    return False
            for i in range(0, len(rows), chunk):
                part = rows[i:i + chunk]
                con.execute(f"INSERT INTO access_log ({', '.join(cols)}) VALUES {', '.join([one] * len(part))}",
                            [r[c] for r in part for c in cols])
        return True

    def access_reads_since(self, split: str, start: datetime) -> int:
        """Permitted reads (outcome ``read`` or ``override``) of ``split`` with ``ts >= start``; a contamination check
        spends no budget (see ``evalgate.splits``)."""
        with self.connect() as con:
            r = con.execute(f"SELECT count(*) FROM access_log WHERE split=? AND ts>=? AND {_COUNTED}",
                            [split, start]).fetchone()
        return int(r[0]) if r else 0

    def access_log_count(self, up_to_seq: int) -> int:
        """Number of access-log rows with ``seq <= up_to_seq``."""
        with self.connect() as con:
            r = con.execute("SELECT count(*) FROM access_log WHERE seq <= ?", [up_to_seq]).fetchone()
        return int(r[0]) if r else 0

    def access_rows(self, split: str | None = None, since: datetime | None = None,
                    from_seq: int | None = None) -> list[dict[str, Any]]:
        """Access-log rows in sequence order, optionally for one split, from a time on, from a ``seq`` on."""
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
            cur = con.execute(sql + " ORDER BY seq", args)
            return _dicts(cur)

    def access_log_head(self) -> dict[str, Any] | None:
        """The last verified head (``seq``, ``row_hash``) and the first bad row found (``broken_seq``,
        ``broken_reason``, None while the chain is intact); None before the first check."""
        with self.connect() as con:
            cur = con.execute("SELECT seq, row_hash, broken_seq, broken_reason FROM access_log_head")
            rows = _dicts(cur)
        return rows[0] if rows else None

    def set_access_log_head(self, seq: int, row_hash: str) -> None:
        """Record that the chain up to row ``seq`` (hash ``row_hash``) was verified intact."""
        with self.connect() as con:
            con.execute("DELETE FROM access_log_head")
            con.execute("INSERT INTO access_log_head VALUES (?, ?, NULL, NULL, ?)", [seq, row_hash, self.clock()])

    def mark_access_log_broken(self, seq: int, reason: str) -> None:
        """Record the first bad row found (kept until a full verify finds the chain intact)."""
        with self.connect() as con:
            if con.execute("SELECT count(*) FROM access_log_head").fetchone() == (0,):
                con.execute("INSERT INTO access_log_head VALUES (0, ?, NULL, NULL, ?)",
                            ["0" * 64, self.clock()])
            con.execute("UPDATE access_log_head SET broken_seq=?, broken_reason=?, checked_at=?",
                        [seq, reason, self.clock()])

    # -- human-audit scores ------------------------------------------------------------------------------------
    def put_human_scores(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace human scores (``human_scores`` columns) in one transaction."""
        cols = ("split", "item_id", "run_id", "sample_index", "rater", "score", "auto_score", "note",
                "source_sha256", "imported_by", "imported_at")
        with self.connect() as con:
            con.executemany(
                f"INSERT OR REPLACE INTO human_scores ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[r[c] for c in cols] for r in rows])

    def human_scores(self, split: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """Human scores of a split (optionally of one run), ordered by item, run, sample index and rater."""
        sql, args = "SELECT * FROM human_scores WHERE split=?", [split]
        if run_id is not None:
            sql += " AND run_id=?"
            args.append(run_id)
        with self.connect() as con:
            cur = con.execute(sql + " ORDER BY item_id, run_id, sample_index, rater", args)
            return _dicts(cur)

    def sample_scores(self, run_id: str) -> list[dict[str, Any]]:
        """A run's per-sample scores only (item_id, sample_index, score, status): what paired statistics need,
        without joining the completions."""
        with self.connect() as con:
            cur = con.execute("SELECT item_id, sample_index, score, status FROM samples WHERE run_id=? "
                              "ORDER BY item_id, sample_index", [run_id])
            return [{"item_id": r[0], "sample_index": r[1], "score": r[2], "status": r[3]} for r in cur.fetchall()]

    # -- gates -------------------------------------------------------------------------------------------------
    def put_gate(self, row: dict[str, Any]) -> None:
        """Insert one gate verdict (``gates`` columns to values, JSON columns as Python data), stamped now."""
        row = {**row, "created_at": now()}
        with self.connect() as con:
            con.execute(f"INSERT INTO gates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                        _json_values(row))

    def gates(self, **where: Any) -> list[dict[str, Any]]:
        """Gate verdicts matching column equalities (e.g. ``gate_id=...``, ``inputs_sha256=...``), oldest first,
        JSON columns decoded."""
        clause = " AND ".join(f"{k}=?" for k in where) or "TRUE"
        with self.connect() as con:
            cur = con.execute(f"SELECT * FROM gates WHERE {clause} ORDER BY created_at", list(where.values()))
            rows = _dicts(cur)
        for r in rows:
            for k in ("inputs", "decision_runs", "reasons", "document"):  # document: VARCHAR, may hold NaN
                if isinstance(r.get(k), str):
                    r[k] = json.loads(r[k])
        return rows
