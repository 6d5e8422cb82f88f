"""Schema migrations of the DuckDB store, one named function each, applied in order and recorded in
``schema_migrations`` (the pattern of simonw/llm's ``llm/migrations.py``).

To change the schema, add a function at the end decorated with ``@migration(N, "name")``, N above every number so
far (numbers are handed out ahead of time, so a branch may skip one another branch uses). A migration never edits an
earlier one: a store already migrated past it would never see the change.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

Migration = Callable[[duckdb.DuckDBPyConnection], None]
MIGRATIONS: list[tuple[int, str, Migration]] = []


def migration(number: int, name: str) -> Callable[[Migration], Migration]:
    """Register ``fn`` as migration ``number``; numbers must increase (gaps allowed: a number another branch holds).

    Raises:
        ValueError: ``number`` is not above every registered one (two migrations added under one number).
    """
    def register(fn: Migration) -> Migration:
        if MIGRATIONS and number <= MIGRATIONS[-1][0]:
            raise ValueError(f"migration {name!r} has number {number}, expected more than {MIGRATIONS[-1][0]}")
        MIGRATIONS.append((number, name, fn))
        return fn
    return register


@migration(1, "initial")
def _m001_initial(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE TABLE protocols (
            name VARCHAR NOT NULL, version VARCHAR NOT NULL, sha256 VARCHAR NOT NULL,
            resolved JSON NOT NULL, frozen_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (name, version))""")
    con.execute("""
        CREATE TABLE checkpoints (
            digest VARCHAR PRIMARY KEY, path VARCHAR NOT NULL, kind VARCHAR NOT NULL,
            train_run VARCHAR, train_seed INTEGER, step INTEGER, registered_at TIMESTAMPTZ NOT NULL)""")
    con.execute("""
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY, status VARCHAR NOT NULL,
            protocol_name VARCHAR NOT NULL, protocol_version VARCHAR NOT NULL, protocol_hash VARCHAR NOT NULL,
            checkpoint_digest VARCHAR NOT NULL, checkpoint_path VARCHAR NOT NULL,
            train_run VARCHAR, train_seed INTEGER, step INTEGER,
            split VARCHAR NOT NULL, tier VARCHAR NOT NULL, split_sha256 VARCHAR NOT NULL,
            sampling_seed BIGINT NOT NULL, backend VARCHAR NOT NULL, backend_info JSON, effective_params JSON,
            actor VARCHAR, purpose VARCHAR, started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ,
            wall_s DOUBLE, metrics JSON, counts JSON, error VARCHAR)""")
    con.execute("""
        CREATE TABLE prompts (sha256 VARCHAR PRIMARY KEY, text VARCHAR NOT NULL)""")
    # The generation cache: the key is every input that decides a completion, never less.
    con.execute("""
        CREATE TABLE generations (
            checkpoint_digest VARCHAR NOT NULL, protocol_hash VARCHAR NOT NULL, item_id VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL, seed UBIGINT NOT NULL,
            prompt_sha256 VARCHAR NOT NULL, text VARCHAR NOT NULL, prompt_tokens INTEGER,
            completion_tokens INTEGER NOT NULL, finish_reason VARCHAR NOT NULL, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (checkpoint_digest, protocol_hash, item_id, sample_index, seed))""")
    con.execute("""
        CREATE TABLE samples (
            run_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            seed UBIGINT NOT NULL, score DOUBLE NOT NULL, status VARCHAR NOT NULL, extracted VARCHAR,
            detail VARCHAR, cached BOOLEAN NOT NULL, behavior JSON,
            PRIMARY KEY (run_id, item_id, sample_index))""")
    con.execute("""
        CREATE TABLE access_log (
            seq BIGINT PRIMARY KEY, ts TIMESTAMPTZ NOT NULL, actor VARCHAR NOT NULL, ci VARCHAR,
            split VARCHAR NOT NULL, tier VARCHAR NOT NULL, purpose VARCHAR NOT NULL, outcome VARCHAR NOT NULL,
            cached BOOLEAN NOT NULL, checkpoint_digest VARCHAR, protocol_hash VARCHAR, run_id VARCHAR,
            detail VARCHAR, prev_hash VARCHAR NOT NULL, row_hash VARCHAR NOT NULL)""")


@migration(2, "human_scores")
def _m002_human_scores(con: duckdb.DuckDBPyConnection) -> None:
    # Scores people gave to human-audit items or samples; run_id '' and sample_index -1 mark an item-level score.
    con.execute("""
        CREATE TABLE human_scores (
            split VARCHAR NOT NULL, item_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            rater VARCHAR NOT NULL, score DOUBLE NOT NULL, auto_score DOUBLE, note VARCHAR,
            source_sha256 VARCHAR NOT NULL, imported_by VARCHAR NOT NULL, imported_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (split, item_id, run_id, sample_index, rater))""")


@migration(3, "run_owner")
def _m003_run_owner(con: duckdb.DuckDBPyConnection) -> None:
    """Which process runs a run (host, pid), so a run left 'running' by a killed process can be recognised."""
    con.execute("ALTER TABLE runs ADD COLUMN host VARCHAR")
    con.execute("ALTER TABLE runs ADD COLUMN pid INTEGER")


@migration(4, "run_prompts")
def _m004_run_prompts(con: duckdb.DuckDBPyConnection) -> None:
    # The fully rendered prompt of every item of a run (text stored once in prompts, by hash), with how its
    # special tokens were handled; cached runs record theirs too.
    con.execute("""
        CREATE TABLE run_prompts (
            run_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, prompt_sha256 VARCHAR NOT NULL,
            prompt_tokens INTEGER, bos_count INTEGER, bos_added BOOLEAN, system_merged BOOLEAN NOT NULL,
            PRIMARY KEY (run_id, item_id))""")


@migration(5, "prompt_in_cache_key")
def _m005_prompt_in_cache_key(con: duckdb.DuckDBPyConnection) -> None:
    """The rendered prompt's hash joins the generation cache key: a cached completion is reused only for the very
    prompt text it was generated from (a transformers upgrade that renders a chat template differently, under the
    same checkpoint and protocol, must regenerate, not reuse)."""
    con.execute("""
        CREATE TABLE generations_v5 (
            checkpoint_digest VARCHAR NOT NULL, protocol_hash VARCHAR NOT NULL, item_id VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL, seed UBIGINT NOT NULL,
            prompt_sha256 VARCHAR NOT NULL, text VARCHAR NOT NULL, prompt_tokens INTEGER,
            completion_tokens INTEGER NOT NULL, finish_reason VARCHAR NOT NULL, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (checkpoint_digest, protocol_hash, item_id, sample_index, seed, prompt_sha256))""")
    con.execute("INSERT INTO generations_v5 SELECT * FROM generations")
    con.execute("DROP TABLE generations")
    con.execute("ALTER TABLE generations_v5 RENAME TO generations")


@migration(6, "access_log_head")
def _m006_access_log_head(con: duckdb.DuckDBPyConnection) -> None:
    """The access log's last verified head (one row), so an append checks only the rows added since, and the first
    bad row a check found, so every later append warns (``evalgate/accesslog.py``)."""
    con.execute("""
        CREATE TABLE access_log_head (
            seq BIGINT NOT NULL, row_hash VARCHAR NOT NULL, broken_seq BIGINT, broken_reason VARCHAR,
            checked_at TIMESTAMPTZ NOT NULL)""")


@migration(7, "run_record")
def _m007_run_record(con: duckdb.DuckDBPyConnection) -> None:
    """The runs row holds the whole run record (``runner.record.RunRecord``), so the stored run equals the document
    ``evaluate`` returns: protocol file, checkpoint kind, items read, package versions and budget warnings. Older
    runs keep NULL there."""
    for column, kind in (("protocol_path", "VARCHAR"), ("checkpoint_kind", "VARCHAR"), ("items", "INTEGER"),
                         ("versions", "JSON"), ("warnings", "JSON")):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


@migration(8, "generation_settings_in_cache_key")
def _m008_generation_settings_in_cache_key(con: duckdb.DuckDBPyConnection) -> None:
    """The generation settings' hash (``runner.settings``: backend, engine version, dtype, ...) joins the cache key,
    and each generation records the run that made it: a sample is reused only under the settings that produced it.
    Rows from before keep an empty settings hash: they stay readable by their runs but are never reused, since
    nothing recorded which engine made them."""
    con.execute("""
        CREATE TABLE generations_v7 (
            checkpoint_digest VARCHAR NOT NULL, protocol_hash VARCHAR NOT NULL, item_id VARCHAR NOT NULL,
            sample_index INTEGER NOT NULL, seed UBIGINT NOT NULL,
            prompt_sha256 VARCHAR NOT NULL, text VARCHAR NOT NULL, prompt_tokens INTEGER,
            completion_tokens INTEGER NOT NULL, finish_reason VARCHAR NOT NULL, created_at TIMESTAMPTZ NOT NULL,
            settings_sha256 VARCHAR NOT NULL, run_id VARCHAR,
            PRIMARY KEY (checkpoint_digest, protocol_hash, item_id, sample_index, seed, prompt_sha256,
                         settings_sha256))""")
    con.execute("INSERT INTO generations_v7 SELECT *, '', NULL FROM generations")
    con.execute("DROP TABLE generations")
    con.execute("ALTER TABLE generations_v7 RENAME TO generations")
    con.execute("ALTER TABLE runs ADD COLUMN settings_sha256 VARCHAR")


@migration(10, "gates")
def _m010_gates(con: duckdb.DuckDBPyConnection) -> None:
    """Each gate's verdict (``evalgate.gate.history``): what it considered (policy hash, protocol hash, split
    contents, candidate runs and checkpoint digests; ``inputs_sha256`` over them), the decision runs it used, the
    verdict with its machine-readable reason and the reasons, and the whole verdict document (VARCHAR: it may hold
    NaN, which JSON cannot), so an unchanged gate reuses its decision (no private read) and ``evalgate report
    GATE_ID`` re-renders it without reading a split."""
    con.execute("""
        CREATE TABLE gates (
            gate_id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, policy_sha256 VARCHAR NOT NULL,
            protocol_hash VARCHAR, inputs_sha256 VARCHAR NOT NULL, inputs JSON NOT NULL, decision_runs JSON NOT NULL,
            verdict VARCHAR NOT NULL, reason VARCHAR NOT NULL, reasons JSON NOT NULL, document VARCHAR NOT NULL,
            reused_from VARCHAR, created_at TIMESTAMPTZ NOT NULL, actor VARCHAR NOT NULL)""")
