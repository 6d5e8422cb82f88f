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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock

from evalgate.environment import active
from evalgate.errors import BadInput, RefusedByPolicy
from evalgate.migrations import COMPACT_TABLE, MIGRATIONS
from evalgate.sealing import Sealer, open_or_mark, open_rows, sealer, sealer_for


def home() -> Path:
    """The active home (``evalgate.environment``: the workspace's, else ``$EVALGATE_HOME``, default
    ``./.evalgate``)."""
    return active().home


def now() -> datetime:
    """The active clock's time (``evalgate.environment``; default the system clock, UTC)."""
    return active().clock()


_ACCESS_COLUMNS = ("seq", "ts", "actor", "ci", "split", "tier", "purpose", "outcome", "cached",
                   "checkpoint_digest", "protocol_hash", "run_id", "detail", "prev_hash", "row_hash")


# The trajectories columns a turn record gives (``Store.put_turns``), in table order.
TRAJECTORY_COLUMNS = ("item_id", "sample_index", "seed", "turn", "turn_seed", "prompt_sha256", "text",
                      "prompt_tokens", "completion_tokens", "finish_reason", "calls", "parse_error", "violation",
                      "ended", "gen_s", "tool_s")

# Every trajectories column but created_at, with its type (``put_turns`` reads rows from one JSON document).
_TRAJECTORY_TYPES = {"checkpoint_digest": "VARCHAR", "protocol_hash": "VARCHAR", "settings_sha256": "VARCHAR",
                     "item_id": "VARCHAR", "sample_index": "INTEGER", "seed": "UBIGINT", "turn": "INTEGER",
                     "turn_seed": "UBIGINT", "prompt_sha256": "VARCHAR", "text": "VARCHAR",
                     "prompt_tokens": "INTEGER", "completion_tokens": "INTEGER", "finish_reason": "VARCHAR",
                     "calls": "JSON", "parse_error": "VARCHAR", "violation": "VARCHAR", "ended": "VARCHAR",
                     "gen_s": "DOUBLE", "tool_s": "DOUBLE", "run_id": "VARCHAR"}

# The access-log rows a budget counts: permitted reads, except contamination checks (see ``evalgate.splits``).
_COUNTED = "outcome IN ('read', 'override') AND purpose <> 'contamination-check'"
# The rows the sealed tiers' contamination-check budget counts (its own budget, ``evalgate.splits``).
_CONTAMINATION_COUNTED = "outcome = 'read' AND purpose = 'contamination-check'"

# The runs columns holding JSON.
_RUN_JSON_COLUMNS = ("backend_info", "effective_params", "metrics", "counts", "versions", "warnings",
                     "checkpoint_provenance")


def _json_values(row: dict[str, Any]) -> list[Any]:
    """A row's values for SQL parameters, dicts and lists encoded as JSON text."""
    return [json.dumps(v) if isinstance(v, dict | list) else v for v in row.values()]


def _run_sealer(con: duckdb.DuckDBPyConnection, run_id: str | None) -> Sealer | None:
    """The Sealer for values derived from run ``run_id``'s items: None unless it ran on a sealed tier
    (``evalgate.sealing``)."""
    if run_id is None:
        return None
    row = con.execute("SELECT tier FROM runs WHERE run_id=?", [run_id]).fetchone()
    s = sealer_for(row[0]) if row else None
    return _same_key(con, s) if s else None


_SEALED_TURN_TEXT = ("text", "calls", "parse_error", "violation")
"""A stored turn's fields that can quote the item (the model's text, tool arguments and results, messages)."""


def _sealed_turn(row: dict[str, Any], seal: Sealer) -> dict[str, Any]:
    """A turn's ``TRAJECTORY_COLUMNS`` with its text fields sealed; ``calls`` becomes its sealed JSON text (stored
    as a JSON string, so the column stays valid JSON)."""
    out = {c: row[c] for c in TRAJECTORY_COLUMNS}
    out["calls"] = json.dumps(out["calls"])
    for c in _SEALED_TURN_TEXT:
        out[c] = seal.seal(out[c])
    return out


def _same_key(con: duckdb.DuckDBPyConnection, s: Sealer) -> Sealer:
    """``s``, after checking that it is the key the store's sealed values use (the first seal records it).

    Raises:
        RefusedByPolicy: another key sealed the store's values (nothing is written).
    """
    row = con.execute("SELECT fingerprint FROM sealed_key LIMIT 1").fetchone()
    if row is None:
        con.execute("INSERT INTO sealed_key VALUES (?, ?)", [s.fingerprint, now()])
    elif row[0] != s.fingerprint:
        raise RefusedByPolicy(f"the private key (fingerprint {s.fingerprint[:12]}) is not the key this store's "
                              f"encrypted outputs were written with (fingerprint {row[0][:12]}); use that key "
                              "(EVALGATE_PRIVATE_KEY or EVALGATE_PRIVATE_KEY_FILE)")
    return s


FORM_TOKEN_TTL = timedelta(hours=12)
"""How long a rating page's one-time form token stays valid (a rater's working day); older ones are refused and
pruned when the next token is issued, so the ``form_tokens`` table stays small."""


def _insert_values(con: duckdb.DuckDBPyConnection, head: str, rows: Sequence[Sequence[Any]], tail: str = "",
                   chunk: int = 500) -> None:
    """Insert ``rows`` (each a sequence of the same length) with ``{head} VALUES (...), (...) {tail}``, up to
    ``chunk`` rows a statement.

    DuckDB runs ``executemany`` as one statement per row (about 150 rows/s for the access log here, docs/
    BENCHMARKS.md "Store writes"); one multi-row ``VALUES`` per chunk gives the same rows in the same order, so
    ``ON CONFLICT DO NOTHING`` in ``tail`` still keeps the first of two rows with one key.
    """
    if not rows:
        return
    one = f"({', '.join('?' * len(rows[0]))})"
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        con.execute(f"{head} VALUES {', '.join([one] * len(part))} {tail}", [v for r in part for v in r])


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
            con = self._open_migrated()
            try:
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
            con = self._open_migrated()
            try:
                with self._transaction(con):
                    yield con
            finally:
                con.close()

    def _open_migrated(self) -> duckdb.DuckDBPyConnection:
        """Open the file (the lock held) and apply the migrations it has not seen; rewrite it when a migration
        asked to (``COMPACT_TABLE``).

        Raises:
            EvalgateError: the file cannot be opened, or a migration refused (nothing of it applied).
        """
        con = self._open()
        try:
            compact = self._migrate(con)
        except BaseException:
            con.close()
            raise
        if compact:
            self._compact(con)
            con = self._open()
        return con

    def _compact(self, con: duckdb.DuckDBPyConnection) -> None:
        """Copy the database into a new file that replaces it, then close ``con``. DuckDB keeps the bytes of values
        it replaced in the file's free blocks; a copy holds only the live values (migration 9 relies on it to
        leave no plain text of what it encrypted)."""
        fresh = self.path.with_name(self.path.name + ".compact")
        fresh.unlink(missing_ok=True)
        name = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        con.execute("ATTACH '{}' AS evalgate_compact".format(str(fresh).replace("'", "''")))
        con.execute(f'COPY FROM DATABASE "{name}" TO evalgate_compact')
        con.execute("DETACH evalgate_compact")
        con.close()
        os.replace(fresh, self.path)

    @staticmethod
    def _migrate(con: duckdb.DuckDBPyConnection) -> bool:
        """Apply the migrations the store has not seen, each in its own transaction.

        Returns:
            Whether a migration asked for the file to be rewritten (it created the temporary ``COMPACT_TABLE``).
        """
        con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMPTZ)")
        done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
        for version, name, fn in MIGRATIONS:
            if version not in done:
                con.execute("BEGIN TRANSACTION")
                fn(con)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, name, now()])
                con.execute("COMMIT")
        return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name=?",
                                [COMPACT_TABLE]).fetchone()[0])  # type: ignore[index]

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
    def recorded_checkpoint(self, path: str) -> str | None:
        """The checkpoint identity of the latest run (any status) of the checkpoint at ``path`` (absolute, as
        ``resolve_checkpoint`` resolves it), or None: how a checkpoint known by its sha256 identity keeps it
        (``checkpoints.checkpoint_identity``)."""
        with self.connect() as con:
            row = con.execute("""SELECT checkpoint_digest FROM runs WHERE checkpoint_path=?
                                 ORDER BY started_at DESC LIMIT 1""", [path]).fetchone()
        return row[0] if row else None

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
        and status ``complete``, in one transaction: a run is complete only when every sample row is stored. On a
        sealed tier the extracted answers and details are stored encrypted (``evalgate.sealing``).

        Raises:
            RefusedByPolicy: a sealed tier's run and no private key (nothing is written)."""
        run_id = row["run_id"]
        with self.connect() as con:
            seal = _run_sealer(con, run_id)
            con.execute("DELETE FROM samples WHERE run_id=?", [run_id])
            if samples:
                _insert_values(
                    con, "INSERT INTO samples",
                    [[run_id, s["item_id"], s["sample_index"], s["seed"], s["score"], s["status"],
                      seal.seal(s.get("extracted")) if seal else s.get("extracted"),
                      seal.seal(s.get("detail")) if seal else s.get("detail"), s["cached"],
                      json.dumps(s.get("behavior") or {})]
                     for s in samples])
            update = {**{k: v for k, v in row.items() if k != "run_id"}, "status": "complete", "finished_at": now()}
            con.execute(f"UPDATE runs SET {', '.join(f'{k}=?' for k in update)} WHERE run_id=?",
                        [*_json_values(update), run_id])

    def fail_run(self, run_id: str, error: str, status: str = "failed") -> None:
        """Mark a run ended without samples: ``failed``, or ``interrupted`` (stopped by the user; like a killed
        run, its stored generations are reused by the next identical run)."""
        with self.connect() as con:
            seal = _run_sealer(con, run_id)  # an engine's or scorer's message may quote the item
            con.execute("UPDATE runs SET status=?, finished_at=?, error=? WHERE run_id=?",
                        [status, now(), seal.seal(error) if seal else error, run_id])

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
        return open_or_mark(rows, "error")

    def samples(self, run_id: str) -> list[dict[str, Any]]:
        """A run's samples joined with their cached generations and prompts, sealed values decrypted.

        A run on the private tier is refused: its per-item outputs are never shown (issue 27; the gate reads only
        ``sample_scores``). Readers of other tiers check and log the read first (``evalgate.samples``, the rating
        pages, ``export-audit``).

        Raises:
            RefusedByPolicy: a private-tier run; the run's outputs are sealed and the private key is missing or
                wrong."""
        with self.connect() as con:
            tier = con.execute("SELECT tier FROM runs WHERE run_id=?", [run_id]).fetchone()
        if tier is not None and tier[0] == "private":
            raise RefusedByPolicy(f"run {run_id} is on a private split: its per-item outputs are never shown (the "
                                  "gate reads only per-item scores); use 'evalgate runs' for its metrics")
        return self._samples(run_id)

    def _samples(self, run_id: str) -> list[dict[str, Any]]:
        """``samples`` for every tier (the sealing tests check that an authorised reader can decrypt)."""
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
        return open_rows(rows, ("text", "prompt", "extracted", "detail"))

    def put_run_prompts(self, run_id: str, rows: Sequence[dict[str, Any]], texts: dict[str, str]) -> None:
        """Record a run's rendered prompts: one ``run_prompts`` row per item (keys: item_id, prompt_sha256,
        prompt_tokens, bos_count, bos_added, system_merged) and each distinct text once in ``prompts`` (encrypted
        for a run on a sealed tier)."""
        with self.connect() as con:
            seal = _run_sealer(con, run_id)
            _insert_values(con, "INSERT INTO prompts", [[h, seal.seal(t) if seal else t] for h, t in texts.items()],
                           "ON CONFLICT DO NOTHING")
            _insert_values(con, "INSERT INTO run_prompts",
                           [[run_id, r["item_id"], r["prompt_sha256"], r["prompt_tokens"], r["bos_count"],
                              r["bos_added"], r["system_merged"]] for r in rows])

    def run_prompts(self, run_id: str) -> list[dict[str, Any]]:
        """A run's rendered prompts by item id, with the prompt text (column ``text``)."""
        with self.connect() as con:
            cur = con.execute("""SELECT rp.*, p.text FROM run_prompts rp
                                 JOIN prompts p ON p.sha256=rp.prompt_sha256
                                 WHERE rp.run_id=? ORDER BY rp.item_id""", [run_id])
            return open_rows(_dicts(cur), ("text",))

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
                records = open_rows(_dicts(cur), ("text",))
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
            _insert_values(con, "INSERT INTO want", [[*k, prompt_sha256[k[0]]] for k in keys])
            cur = con.execute("""
                SELECT g.item_id, g.sample_index, g.seed, g.text, g.completion_tokens, g.prompt_tokens,
                       g.finish_reason, g.prompt_sha256, g.run_id
                FROM generations g JOIN want w USING (item_id, sample_index, seed, prompt_sha256)
                WHERE g.checkpoint_digest=? AND g.protocol_hash=? AND g.settings_sha256=?""",
                              [checkpoint_digest, protocol_hash, settings_sha256])
            out = {(r[0], r[1], r[2]): {"text": r[3], "completion_tokens": r[4], "prompt_tokens": r[5],
                                        "finish_reason": r[6], "prompt_sha256": r[7], "run_id": r[8]}
                   for r in cur.fetchall()}
            open_rows(list(out.values()), ("text",))
            con.execute("DROP TABLE want")
        return out

    def put_generations(self, checkpoint_digest: str, protocol_hash: str, rows: Sequence[dict[str, Any]],
                        prompts: dict[str, str], settings_sha256: str = "", run_id: str | None = None) -> None:
        """Store generations made by ``run_id`` under the settings hashed ``settings_sha256`` (and the prompts they
        came from, once per prompt hash) in one transaction; a run on a sealed tier stores texts and prompts
        encrypted (``evalgate.sealing``).

        Raises:
            RefusedByPolicy: a sealed tier's run and no private key (nothing is written)."""
        with self.connect() as con:
            seal = _run_sealer(con, run_id)
            if prompts:
                _insert_values(con, "INSERT INTO prompts",
                               [[h, seal.seal(t) if seal else t] for h, t in prompts.items()], "ON CONFLICT DO NOTHING")
            _insert_values(
                con, "INSERT INTO generations",
                [[checkpoint_digest, protocol_hash, r["item_id"], r["sample_index"], r["seed"], r["prompt_sha256"],
                  seal.seal(r["text"]) if seal else r["text"], r.get("prompt_tokens"), r["completion_tokens"],
                  r["finish_reason"], now(), settings_sha256, run_id]
                 for r in rows], "ON CONFLICT DO NOTHING")

    # -- trajectories (agentic runs, migration 11) -------------------------------------------------------------
    def put_turns(self, checkpoint_digest: str, protocol_hash: str, settings_sha256: str,
                  rows: Sequence[dict[str, Any]], run_id: str) -> None:
        """Store agentic turns (``TRAJECTORY_COLUMNS`` from ``item_id`` to ``tool_s``) made by ``run_id``, in one
        transaction; a turn already stored is kept."""
        if not rows:
            return
        keys = {"checkpoint_digest": checkpoint_digest, "protocol_hash": protocol_hash,
                "settings_sha256": settings_sha256, "run_id": run_id}
        struct = ", ".join(f'"{c}": "{t}"' for c, t in _TRAJECTORY_TYPES.items())
        with self.connect() as con:  # one JSON document unnested: ~5x faster here than multi-row VALUES
            seal = _run_sealer(con, run_id)
            doc = json.dumps([{**keys, **(_sealed_turn(r, seal) if seal else {c: r[c] for c in TRAJECTORY_COLUMNS})}
                              for r in rows])
            con.execute(f"INSERT INTO trajectories ({', '.join(_TRAJECTORY_TYPES)}, created_at) SELECT *, ? FROM "
                        f"(SELECT unnest(from_json(?::JSON, '[{{{struct}}}]'), recursive := true)) "
                        "ON CONFLICT DO NOTHING", [now(), doc])

    def trajectory_turns(self, checkpoint_digest: str, protocol_hash: str, settings_sha256: str,
                         item_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Stored turns under one checkpoint, protocol and settings (of ``item_ids`` only, when given), ordered by
        item, sample index, seed and turn; ``calls`` decoded."""
        sql = ("SELECT * FROM trajectories WHERE checkpoint_digest=? AND protocol_hash=? AND "
               "settings_sha256=?")
        params: list[Any] = [checkpoint_digest, protocol_hash, settings_sha256]
        if item_ids is not None:
            sql += f" AND item_id IN ({', '.join('?' * len(item_ids))})" if item_ids else " AND false"
            params += list(item_ids)
        with self.connect() as con:
            rows = _dicts(con.execute(sql + " ORDER BY item_id, sample_index, seed, turn", params))
        for r in rows:
            r["calls"] = json.loads(r["calls"])
        open_rows(rows, _SEALED_TURN_TEXT)
        for r in rows:
            if isinstance(r["calls"], str):  # sealed: the calls' JSON text, encrypted (``_sealed_turn``)
                r["calls"] = json.loads(r["calls"])
        return rows

    # -- access log --------------------------------------------------------------------------------------------
    def access_log_last(self) -> dict[str, Any] | None:
        """The last access-log row's ``seq`` and ``row_hash``, or None for an empty log."""
        with self.connect() as con:
            r = con.execute("SELECT seq, row_hash FROM access_log ORDER BY seq DESC LIMIT 1").fetchone()
        return {"seq": r[0], "row_hash": r[1]} if r else None

    def insert_access_rows(self, rows: Sequence[dict[str, Any]],
                           budget: tuple[str | tuple[str, ...], datetime, int] | None = None,
                           signature: tuple[int, str, str, str] | None = None, *,
                           contamination: bool = False) -> bool:
        """Insert access-log rows as given (already chained by ``evalgate.accesslog``) in one transaction.

        Args:
            rows: the chained rows.
            budget: ``(split, window_start, max_reads)``: insert only if the split's permitted reads since
                ``window_start`` (as ``access_reads_since``) plus the permitted reads among ``rows`` stay within
                ``max_reads``; counted in the same transaction as the insert. ``split`` may be a tuple of names
                (one content known under several names shares one budget, ``evalgate.splits``): their reads
                count together.
            signature: ``(seq, row_hash, public_key, signature)`` of the new head, stored in the same transaction
                (``evalgate.logsign``), so no row is ever committed without the signature meant for it.
            contamination: ``budget`` counts contamination checks (``_CONTAMINATION_COUNTED``) instead of reads.

        Returns:
            False when ``budget`` refused the rows (nothing inserted), else True.
        """
        cols = [*_ACCESS_COLUMNS]
        with self.connect() as con:
            if budget is not None:
                split, start, max_reads = budget
                names = (split,) if isinstance(split, str) else tuple(split)
                counted = _CONTAMINATION_COUNTED if contamination else _COUNTED
                used = con.execute(f"SELECT count(*) FROM access_log WHERE split IN ({', '.join('?' * len(names))})"
                                   f" AND ts>=? AND {counted}", [*names, start]).fetchone()
                new = sum(1 for r in rows if r["split"] in names and (
                    (r["outcome"] == "read" and r["purpose"] == "contamination-check") if contamination
                    else (r["outcome"] in ("read", "override") and r["purpose"] != "contamination-check")))
                if (int(used[0]) if used else 0) + new > max_reads:
                    return False
            _insert_values(con, f"INSERT INTO access_log ({', '.join(cols)})", [[r[c] for c in cols] for r in rows])
            if signature is not None:
                con.execute("DELETE FROM access_log_signature")
                con.execute("INSERT INTO access_log_signature VALUES (?, ?, ?, ?, ?)", [*signature, self.clock()])
        return True

    def access_reads_since(self, split: str, start: datetime) -> int:
        """Permitted reads (outcome ``read`` or ``override``) of ``split`` with ``ts >= start``; a contamination check
        spends no budget (see ``evalgate.splits``)."""
        with self.connect() as con:
            r = con.execute(f"SELECT count(*) FROM access_log WHERE split=? AND ts>=? AND {_COUNTED}",
                            [split, start]).fetchone()
        return int(r[0]) if r else 0

    def access_first_seq(self, splits: Sequence[str]) -> dict[str, int]:
        """The ``seq`` of each split's first access-log row (splits without a row are left out)."""
        if not splits:
            return {}
        with self.connect() as con:
            cur = con.execute(f"SELECT split, min(seq) FROM access_log WHERE split IN ({', '.join('?' * len(splits))})"
                              " GROUP BY split", list(splits))
            return {r[0]: int(r[1]) for r in cur.fetchall()}

    def access_content_changes(self) -> list[dict[str, Any]]:
        """The access-log rows that record a split's data being added or replaced (outcome ``added`` or
        ``replaced``; their detail names the content hashes), in sequence order."""
        with self.connect() as con:
            cur = con.execute("SELECT * FROM access_log WHERE outcome IN ('added', 'replaced') ORDER BY seq")
            return _dicts(cur)

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

    def access_log_signature(self) -> dict[str, Any] | None:
        """The newest signed head (``seq``, ``row_hash``, ``public_key``, ``signature``, ``signed_at``), or None."""
        with self.connect() as con:
            rows = _dicts(con.execute("SELECT seq, row_hash, public_key, signature, signed_at "
                                      "FROM access_log_signature"))
        return rows[0] if rows else None

    def set_access_log_signature(self, seq: int, row_hash: str, public_key: str, signature: str) -> None:
        """Replace the newest signed head (``evalgate.logsign``)."""
        with self.connect() as con:
            con.execute("DELETE FROM access_log_signature")
            con.execute("INSERT INTO access_log_signature VALUES (?, ?, ?, ?, ?)",
                        [seq, row_hash, public_key, signature, self.clock()])

    # -- human-audit scores ------------------------------------------------------------------------------------
    def put_human_scores(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert or replace human scores (``human_scores`` columns) in one transaction. Raters' notes may quote
        the human-audit item, so they are stored encrypted (``evalgate.sealing``).

        Raises:
            RefusedByPolicy: a note and no private key (nothing is written)."""
        cols = ("split", "item_id", "run_id", "sample_index", "rater", "score", "auto_score", "note",
                "source_sha256", "imported_by", "imported_at")
        seal = sealer() if any(r.get("note") for r in rows) else None
        with self.connect() as con:
            if seal:
                _same_key(con, seal)
            # executemany, not _insert_values: two rows with one key in a file must replace (last wins); one
            # multi-row INSERT OR REPLACE keeps the first of them instead (DuckDB 1.x, checked)
            con.executemany(
                f"INSERT OR REPLACE INTO human_scores ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [[seal.seal(r[c]) if seal and c == "note" else r[c] for c in cols] for r in rows])

    def human_scores(self, split: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """Human scores of a split (optionally of one run), ordered by item, run, sample index and rater."""
        sql, args = "SELECT * FROM human_scores WHERE split=?", [split]
        if run_id is not None:
            sql += " AND run_id=?"
            args.append(run_id)
        with self.connect() as con:
            cur = con.execute(sql + " ORDER BY item_id, run_id, sample_index, rater", args)
            return open_rows(_dicts(cur), ("note",))

    def sample_scores(self, run_id: str) -> list[dict[str, Any]]:
        """A run's per-sample scores only (item_id, sample_index, score, status): what paired statistics need,
        without joining the completions."""
        with self.connect() as con:
            cur = con.execute("SELECT item_id, sample_index, score, status FROM samples WHERE run_id=? "
                              "ORDER BY item_id, sample_index", [run_id])
            return [{"item_id": r[0], "sample_index": r[1], "score": r[2], "status": r[3]} for r in cur.fetchall()]

    # -- blind rating in the browser (evalgate.rating, evalgate.web) ---------------------------------------------
    def put_rater(self, name: str, token_sha256: str, role: str, created_by: str) -> bool:
        """Add a rater or give an existing one a new token (the old token stops working at once).

        Returns:
            True when the rater existed (its token was replaced).
        """
        with self.connect() as con:
            existed = con.execute("SELECT count(*) FROM raters WHERE name=?", [name]).fetchone() != (0,)
            con.execute("DELETE FROM raters WHERE name=?", [name])
            con.execute("INSERT INTO raters VALUES (?, ?, ?, ?, ?)", [name, token_sha256, role, now(), created_by])
        return existed

    def rater_by_token(self, token_sha256: str) -> dict[str, Any] | None:
        """The rater (``name``, ``role``) holding the token with this sha256, or None."""
        with self.connect() as con:
            r = con.execute("SELECT name, role FROM raters WHERE token_sha256=?", [token_sha256]).fetchone()
        return {"name": r[0], "role": r[1]} if r else None

    def raters(self) -> list[dict[str, Any]]:
        """Every rater (name, role, created_at, created_by), by name; never the token hashes."""
        with self.connect() as con:
            return _dicts(con.execute("SELECT name, role, created_at, created_by FROM raters ORDER BY name"))

    def create_batch(self, batch: dict[str, Any], items: Sequence[dict[str, Any]]) -> None:
        """Insert a rating batch (``audit_batches`` columns) and its samples (``audit_batch_items`` columns) in one
        transaction."""
        with self.connect() as con:
            con.execute(f"INSERT INTO audit_batches ({', '.join(batch)}) VALUES ({', '.join('?' * len(batch))})",
                        list(batch.values()))
            _insert_values(con, "INSERT INTO audit_batch_items",
                           [[batch["batch_id"], i["sample_key"], i["position"], i["item_id"], i["sample_index"]]
                            for i in items])

    def batches(self, batch_id: str | None = None) -> list[dict[str, Any]]:
        """Rating batches (all, or the one with ``batch_id``), oldest first, with ``n_items``."""
        with self.connect() as con:
            return _dicts(con.execute(
                "SELECT b.*, (SELECT count(*) FROM audit_batch_items i WHERE i.batch_id=b.batch_id) AS n_items "
                "FROM audit_batches b WHERE ? IS NULL OR b.batch_id=? ORDER BY b.created_at", [batch_id, batch_id]))

    def batch_items(self, batch_id: str) -> list[dict[str, Any]]:
        """A batch's samples (sample_key, position, item_id, sample_index) in position order."""
        with self.connect() as con:
            return _dicts(con.execute("SELECT sample_key, position, item_id, sample_index FROM audit_batch_items "
                                      "WHERE batch_id=? ORDER BY position", [batch_id]))

    def rater_seed(self, batch_id: str, rater: str, new_seed: int) -> int:
        """The rater's shuffle seed for a batch; ``new_seed`` is recorded (and returned) on the first call."""
        with self.connect() as con:
            r = con.execute("SELECT seed FROM audit_rater_seeds WHERE batch_id=? AND rater=?",
                            [batch_id, rater]).fetchone()
            if r:
                return int(r[0])
            con.execute("INSERT INTO audit_rater_seeds VALUES (?, ?, ?, ?)", [batch_id, rater, new_seed, now()])
        return new_seed

    def ratings(self, batch_id: str | None = None, rater: str | None = None) -> list[dict[str, Any]]:
        """Current ratings (one per batch, rater and sample), optionally of one batch and one rater."""
        with self.connect() as con:
            return _dicts(con.execute(
                "SELECT * FROM audit_ratings WHERE (? IS NULL OR batch_id=?) AND (? IS NULL OR rater=?) "
                "ORDER BY batch_id, rater, item_id, sample_index", [batch_id, batch_id, rater, rater]))

    def rating_events(self, batch_id: str) -> list[dict[str, Any]]:
        """Every submission to a batch (``action`` ``scored``, ``replaced`` or ``skipped``), in time order."""
        with self.connect() as con:
            return _dicts(con.execute("SELECT * FROM audit_rating_events WHERE batch_id=? ORDER BY ts", [batch_id]))

    def issue_form_token(self, token_sha256: str, rater: str, purpose: str) -> None:
        """Record a one-time form token issued to ``rater`` for ``purpose``, and drop tokens issued more than
        ``FORM_TOKEN_TTL`` ago (expired whether spent or not: a replay of a dropped one is refused as unknown)."""
        ts = now()
        with self.connect() as con:
            con.execute("DELETE FROM form_tokens WHERE issued_at < ?", [ts - FORM_TOKEN_TTL])
            con.execute("INSERT INTO form_tokens VALUES (?, ?, ?, ?, NULL)", [token_sha256, rater, purpose, ts])

    def submit_rating(self, *, form_token_sha256: str, purpose: str, batch_id: str, rater: str, sample_key: str,
                      score: float | None, note: str | None, human_score: dict[str, Any] | None) -> str:
        """Spend a form token and store one rating, all in one transaction: a refused submission writes nothing.

        ``score`` None is a skip (kept only while the sample has no score). A score replaces the rater's earlier
        one; every submission is also appended to ``audit_rating_events``. ``human_score`` (``human_scores``
        columns less item_id, sample_index and score) mirrors the score into ``human_scores``.

        Returns:
            The action: ``scored``, ``replaced`` or ``skipped``.

        Raises:
            RefusedByPolicy: the form token is unknown, expired (``FORM_TOKEN_TTL``), another rater's or already
                used (a replayed form); a note and no private key (nothing is written).
            BadInput: ``sample_key`` is not a sample of ``batch_id``.
        """
        ts = now()
        # a note may quote the item or the completion: sealed like every text derived from human-audit items
        note = sealer().seal(note) if note else None
        with self.connect() as con:
            spent = con.execute("UPDATE form_tokens SET used_at=? WHERE token_sha256=? AND rater=? AND purpose=? "
                                "AND used_at IS NULL AND issued_at >= ? RETURNING rater",
                                [ts, form_token_sha256, rater, purpose, ts - FORM_TOKEN_TTL])
            if not spent.fetchall():
                raise RefusedByPolicy("this form was already submitted, has expired (forms are valid for "
                                      f"{FORM_TOKEN_TTL.total_seconds() / 3600:g} h) or was not issued to you (a "
                                      "replayed or forged form); nothing was stored. Reload the page and submit again")
            item = con.execute("SELECT item_id, sample_index FROM audit_batch_items WHERE batch_id=? AND "
                               "sample_key=?", [batch_id, sample_key]).fetchone()
            if item is None:
                raise BadInput(f"sample {sample_key!r} is not in batch {batch_id}; nothing was stored. Reload the "
                               "batch's page")
            old = con.execute("SELECT score, submissions FROM audit_ratings WHERE batch_id=? AND rater=? AND "
                              "item_id=? AND sample_index=?", [batch_id, rater, *item]).fetchone()
            action = "skipped" if score is None else ("replaced" if old and old[0] is not None else "scored")
            con.execute("INSERT INTO audit_rating_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [batch_id, rater, *item, score, score is None, note, old[0] if old else None, action, ts])
            if score is None and old and old[0] is not None:
                return action  # a skip never erases a score
            con.execute("INSERT OR REPLACE INTO audit_ratings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [batch_id, rater, *item, score, score is None, note, ts, (old[1] if old else 0) + 1])
            if score is not None and human_score is not None:
                row = {**human_score, "item_id": item[0], "sample_index": item[1], "score": score, "note": note,
                       "imported_at": ts}
                con.execute(f"INSERT OR REPLACE INTO human_scores ({', '.join(row)}) VALUES "
                            f"({', '.join('?' * len(row))})", list(row.values()))
        return action

    # -- gates -------------------------------------------------------------------------------------------------
    def put_gate(self, row: dict[str, Any]) -> None:
        """Insert one gate verdict (``gates`` columns to values, JSON columns as Python data), stamped now."""
        row = {**row, "created_at": now()}
        with self.connect() as con:
            con.execute(f"INSERT INTO gates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                        _json_values(row))

    def recent_gates(self, limit: int = 200) -> list[dict[str, Any]]:
        """The newest ``limit`` gate verdicts, newest ``created_at`` first, columns as stored (JSON undecoded): the
        web dashboard's table."""
        with self.connect() as con:
            return _dicts(con.execute("SELECT * FROM gates ORDER BY created_at DESC, gate_id LIMIT ?", [limit]))

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
