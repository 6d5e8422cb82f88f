"""Schema migrations of the DuckDB store, one named function each, applied in order and recorded in
``schema_migrations`` (the pattern of simonw/llm's ``llm/migrations.py``).

To change the schema, add a function at the end decorated with ``@migration(N, "name")``, N above every number so
far (numbers are handed out ahead of time, so a branch may skip one another branch uses). A migration never edits an
earlier one: a store already migrated past it would never see the change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalgate.core.environment import Environment
from evalgate.store.dialect import POSTGRESQL, dialect

Migration = Callable[..., None]
"""A migration: a function of the connection (``evalgate.store.dialect.Connection``: DuckDB's, or PostgreSQL's,
which runs the same SQL, ``evalgate.store.pg.translate``); a ``keyed`` one also takes the store's ``Environment``."""
COMPACT_TABLE = "evalgate_compact_after_migration"
"""A migration that replaced values whose old bytes must not stay in the file creates this temporary table; the
store then rewrites the file (``Store._compact``)."""
MIGRATIONS: list[tuple[int, str, Migration]] = []
_KEYED: set[Migration] = set()  # migrations called with the store's Environment too (for its private key)


def apply(fn: Migration, con: Any, env: Environment | None) -> None:
    """Run migration ``fn`` on ``con``; one registered with ``keyed`` also gets ``env`` (None: the process's,
    ``Environment.from_env``), whose private key it needs."""
    if fn in _KEYED:
        fn(con, env if env is not None else Environment.from_env())
    else:
        fn(con)


def migration(number: int, name: str, keyed: bool = False) -> Callable[[Migration], Migration]:
    """Register ``fn`` as migration ``number``; numbers must increase (gaps allowed: a number another branch holds).
    ``keyed``: ``fn`` takes the store's ``Environment`` after the connection (``apply``).

    Raises:
        ValueError: ``number`` is not above every registered one (two migrations added under one number).
    """
    def register(fn: Migration) -> Migration:
        if MIGRATIONS and number <= MIGRATIONS[-1][0]:
            raise ValueError(f"migration {name!r} has number {number}, expected more than {MIGRATIONS[-1][0]}")
        MIGRATIONS.append((number, name, fn))
        if keyed:
            _KEYED.add(fn)
        return fn
    return register


@migration(1, "initial")
def _m001_initial(con: Any) -> None:
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
def _m002_human_scores(con: Any) -> None:
    # Scores people gave to human-audit items or samples; run_id '' and sample_index -1 mark an item-level score.
    con.execute("""
        CREATE TABLE human_scores (
            split VARCHAR NOT NULL, item_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            rater VARCHAR NOT NULL, score DOUBLE NOT NULL, auto_score DOUBLE, note VARCHAR,
            source_sha256 VARCHAR NOT NULL, imported_by VARCHAR NOT NULL, imported_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (split, item_id, run_id, sample_index, rater))""")


@migration(3, "run_owner")
def _m003_run_owner(con: Any) -> None:
    """Which process runs a run (host, pid), so a run left 'running' by a killed process can be recognised."""
    con.execute("ALTER TABLE runs ADD COLUMN host VARCHAR")
    con.execute("ALTER TABLE runs ADD COLUMN pid INTEGER")


@migration(4, "run_prompts")
def _m004_run_prompts(con: Any) -> None:
    # The fully rendered prompt of every item of a run (text stored once in prompts, by hash), with how its
    # special tokens were handled; cached runs record theirs too.
    con.execute("""
        CREATE TABLE run_prompts (
            run_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, prompt_sha256 VARCHAR NOT NULL,
            prompt_tokens INTEGER, bos_count INTEGER, bos_added BOOLEAN, system_merged BOOLEAN NOT NULL,
            PRIMARY KEY (run_id, item_id))""")


@migration(5, "prompt_in_cache_key")
def _m005_prompt_in_cache_key(con: Any) -> None:
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
def _m006_access_log_head(con: Any) -> None:
    """The access log's last verified head (one row), so an append checks only the rows added since, and the first
    bad row a check found, so every later append warns (``evalgate/access/log.py``)."""
    con.execute("""
        CREATE TABLE access_log_head (
            seq BIGINT NOT NULL, row_hash VARCHAR NOT NULL, broken_seq BIGINT, broken_reason VARCHAR,
            checked_at TIMESTAMPTZ NOT NULL)""")


@migration(7, "run_record")
def _m007_run_record(con: Any) -> None:
    """The runs row holds the whole run record (``runner.record.RunRecord``), so the stored run equals the document
    ``evaluate`` returns: protocol file, checkpoint kind, items read, package versions and budget warnings. Older
    runs keep NULL there."""
    for column, kind in (("protocol_path", "VARCHAR"), ("checkpoint_kind", "VARCHAR"), ("items", "INTEGER"),
                         ("versions", "JSON"), ("warnings", "JSON")):
        con.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")


@migration(8, "generation_settings_in_cache_key")
def _m008_generation_settings_in_cache_key(con: Any) -> None:
    """The generation settings' hash (``backends.settings``: backend, engine version, dtype, ...) joins the cache key,
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


# Tiers whose derived rows are encrypted at rest (``evalgate.keys.sealing.SEALED_TIERS``, repeated here because a
# migration is a fixed record of what it did).
_SEALED_TIERS = "('private', 'human-audit')"
_SEALED_PREFIX = "evalgate-sealed:v1:"


def _plain(column: str) -> str:
    """SQL: ``column`` holds a value that is not sealed yet."""
    return f"({column} IS NOT NULL AND NOT starts_with({column}, '{_SEALED_PREFIX}'))"


def _row_id(con: Any) -> tuple[str, str, str]:
    """A row's physical id in this dialect: the column, its type as text, and how to compare it to that text
    (DuckDB's ``rowid``; PostgreSQL's ``ctid``, stable within the migration's transaction)."""
    if dialect(con) == POSTGRESQL:
        return "ctid::text", "VARCHAR", "ctid=s.rid::tid"
    return "rowid", "BIGINT", "rowid=s.rid"


def _seal_column(con: Any, table: str, column: str, rows: list[tuple[Any, str]],
                 seal: Callable[[str], str | None]) -> None:
    """Replace ``column`` of the ``table`` rows with these row ids (``_row_id``) by the sealed values, in bulk
    (DuckDB's executemany updates a few hundred rows a second)."""
    _, kind, match = _row_id(con)
    con.execute(f"CREATE TEMP TABLE sealed_values (rid {kind}, v VARCHAR)")
    for i in range(0, len(rows), 500):
        part = rows[i:i + 500]
        con.execute("INSERT INTO sealed_values VALUES " + ", ".join(["(?, ?)"] * len(part)),
                    [x for rid, text in part for x in (rid, seal(text))])
    con.execute(f"UPDATE {table} SET {column}=s.v FROM sealed_values s WHERE {table}.{match}")
    con.execute("DROP TABLE sealed_values")


@migration(9, "sealed_outputs", keyed=True)
def _m009_sealed_outputs(con: Any, env: Environment) -> None:
    """Encryption at rest of what is derived from private and human-audit items (``evalgate.keys.sealing``): a table
    recording the fingerprint of the key the store's sealed values use, and the existing plain-text values of
    runs on those tiers (prompts, completions, extracted answers, score details, failed runs' errors; raters'
    notes) sealed with the private split key (``env``'s). A store holding such values cannot be opened without the key
    (refused, nothing changed)."""
    con.execute("CREATE TABLE sealed_key (fingerprint VARCHAR NOT NULL, recorded_at TIMESTAMPTZ NOT NULL)")
    rid = _row_id(con)[0]
    sealed_runs = f"SELECT run_id FROM runs WHERE tier IN {_SEALED_TIERS}"
    sealed_prompts = f"SELECT prompt_sha256 FROM run_prompts WHERE run_id IN ({sealed_runs})"
    todo = {
        ("samples", "extracted"): f"SELECT {rid}, extracted FROM samples WHERE run_id IN ({sealed_runs}) "
                                  f"AND {_plain('extracted')}",
        ("samples", "detail"): f"SELECT {rid}, detail FROM samples WHERE run_id IN ({sealed_runs}) "
                               f"AND {_plain('detail')}",
        ("generations", "text"): f"SELECT {rid}, text FROM generations WHERE (run_id IN ({sealed_runs}) OR "
                                 f"prompt_sha256 IN ({sealed_prompts})) AND {_plain('text')}",
        ("prompts", "text"): f"SELECT {rid}, text FROM prompts WHERE (sha256 IN ({sealed_prompts}) OR sha256 IN "
                             f"(SELECT prompt_sha256 FROM generations WHERE run_id IN ({sealed_runs}))) "
                             f"AND {_plain('text')}",
        ("human_scores", "note"): f"SELECT {rid}, note FROM human_scores WHERE {_plain('note')}",
        ("runs", "error"): f"SELECT {rid}, error FROM runs WHERE tier IN {_SEALED_TIERS} "
                           f"AND {_plain('error')}",
    }
    found = {where: con.execute(sql).fetchall() for where, sql in todo.items()}
    if not any(found.values()):
        return
    from evalgate.core.errors import RefusedByPolicy
    from evalgate.keys.sealing import Sealer, load_key

    n = sum(len(v) for v in found.values())
    try:
        s = Sealer(load_key(env=env))
    except RefusedByPolicy as e:
        raise RefusedByPolicy(
            f"this store holds {n} plain-text values derived from private or human-audit items (written before "
            "evalgate encrypted them at rest); evalgate encrypts them when it first opens the store with the "
            f"private split key, and refuses to open it without: {e.message}") from e
    for (table, column), rows in found.items():
        if rows:  # read again: on PostgreSQL, sealing a column moved the rows sealed before (new ctids)
            _seal_column(con, table, column, con.execute(todo[table, column]).fetchall(), s.seal)
    con.execute("INSERT INTO sealed_key VALUES (?, current_timestamp)", [s.fingerprint])
    con.execute(f"CREATE TEMP TABLE {COMPACT_TABLE} (x INTEGER)")  # the replaced plain text stays in free blocks


@migration(10, "gates")
def _m010_gates(con: Any) -> None:
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


@migration(11, "trajectories")
def _m011_trajectories(con: Any) -> None:
    # One row per model turn of an agentic sample, with the tool calls it made and what they returned; the key is
    # the generation cache's (checkpoint, protocol, settings, item, sample, seed) plus the turn and the prompt the
    # turn answered (the conversation so far, rendered), so a killed run resumes at the first turn not stored and a
    # turn is never reused for other text under the same item id.
    con.execute("""
        CREATE TABLE trajectories (
            checkpoint_digest VARCHAR NOT NULL, protocol_hash VARCHAR NOT NULL, settings_sha256 VARCHAR NOT NULL,
            item_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL, seed UBIGINT NOT NULL, turn INTEGER NOT NULL,
            turn_seed UBIGINT NOT NULL, prompt_sha256 VARCHAR NOT NULL, text VARCHAR NOT NULL,
            prompt_tokens INTEGER, completion_tokens INTEGER NOT NULL, finish_reason VARCHAR NOT NULL,
            calls JSON NOT NULL, parse_error VARCHAR, violation VARCHAR, ended VARCHAR,
            gen_s DOUBLE, tool_s DOUBLE, run_id VARCHAR, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (checkpoint_digest, protocol_hash, settings_sha256, item_id, sample_index, seed, turn,
                         prompt_sha256))""")


@migration(12, "human_audit_web")
def _m012_human_audit_web(con: Any) -> None:
    """Blind rating in the browser (``evalgate serve``): raters with a hashed token and a role, rating batches over a
    run's samples with a rubric and a score scale, each rater's shuffle seed, the current rating per rater and
    sample, every submission (a resubmission replaces the rating and is kept here), and one-time form tokens."""
    con.execute("""
        CREATE TABLE raters (
            name VARCHAR PRIMARY KEY, token_sha256 VARCHAR NOT NULL UNIQUE, role VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, created_by VARCHAR NOT NULL)""")
    con.execute("""
        CREATE TABLE audit_batches (
            batch_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, split VARCHAR NOT NULL, rubric VARCHAR NOT NULL,
            scale_min INTEGER NOT NULL, scale_max INTEGER NOT NULL, stratify VARCHAR, selection_seed BIGINT NOT NULL,
            created_by VARCHAR NOT NULL, created_at TIMESTAMPTZ NOT NULL)""")
    con.execute("""
        CREATE TABLE audit_batch_items (
            batch_id VARCHAR NOT NULL, sample_key VARCHAR NOT NULL UNIQUE, position INTEGER NOT NULL,
            item_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            PRIMARY KEY (batch_id, item_id, sample_index))""")
    con.execute("""
        CREATE TABLE audit_rater_seeds (
            batch_id VARCHAR NOT NULL, rater VARCHAR NOT NULL, seed BIGINT NOT NULL, created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (batch_id, rater))""")
    con.execute("""
        CREATE TABLE audit_ratings (
            batch_id VARCHAR NOT NULL, rater VARCHAR NOT NULL, item_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            score DOUBLE, skipped BOOLEAN NOT NULL, note VARCHAR, rated_at TIMESTAMPTZ NOT NULL,
            submissions INTEGER NOT NULL,
            PRIMARY KEY (batch_id, rater, item_id, sample_index))""")
    con.execute("""
        CREATE TABLE audit_rating_events (
            batch_id VARCHAR NOT NULL, rater VARCHAR NOT NULL, item_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            score DOUBLE, skipped BOOLEAN NOT NULL, note VARCHAR, previous_score DOUBLE, action VARCHAR NOT NULL,
            ts TIMESTAMPTZ NOT NULL)""")
    con.execute("""
        CREATE TABLE form_tokens (
            token_sha256 VARCHAR PRIMARY KEY, rater VARCHAR NOT NULL, purpose VARCHAR NOT NULL,
            issued_at TIMESTAMPTZ NOT NULL, used_at TIMESTAMPTZ)""")


@migration(16, "checkpoint_provenance")
def _m016_checkpoint_provenance(con: Any) -> None:
    """The run record holds where its checkpoint's training run, seed and step came from (``Checkpoint.provenance``:
    ``"flag"``, ``"folder name 'checkpoint-800'"``, ``"not inferred: ..."``), so the release report can show how
    each candidate was attributed to its seed. Older runs keep NULL there."""
    con.execute("ALTER TABLE runs ADD COLUMN checkpoint_provenance JSON")


@migration(20, "access_log_signature")
def _m020_access_log_signature(con: Any) -> None:
    """The access log's newest signed head (one row): ``seq`` and ``row_hash`` signed with the Ed25519 key kept
    outside the store (``evalgate.keys.signing``), and that key's public half (for messages only: verification uses the
    key found outside the store)."""
    con.execute("""
        CREATE TABLE access_log_signature (
            seq BIGINT NOT NULL, row_hash VARCHAR NOT NULL, public_key VARCHAR NOT NULL, signature VARCHAR NOT NULL,
            signed_at TIMESTAMPTZ NOT NULL)""")


@migration(31, "run_record_version")
def _m031_run_record_version(con: Any) -> None:
    """The run record's format (``runner.record.RUN_RECORD_VERSION``), so a reader can tell records apart when the
    record changes. Runs stored before keep NULL there and read as version 1."""
    con.execute("ALTER TABLE runs ADD COLUMN record_version INTEGER")


@migration(33, "rating_sessions_and_gold")
def _m033_rating_sessions_and_gold(con: Any) -> None:
    """``evalgate serve`` logs a rater in to a server-side session (the cookie holds its id; the store its sha256),
    which logout, expiry or a new token for the rater ends; and a rating batch says whether raters see the item's
    gold answer (``audit batch create --show-gold``; batches made before keep it hidden)."""
    con.execute("""
        CREATE TABLE rater_sessions (
            session_sha256 VARCHAR PRIMARY KEY, rater VARCHAR NOT NULL, created_at TIMESTAMPTZ NOT NULL,
            ended_at TIMESTAMPTZ)""")
    con.execute("ALTER TABLE audit_batches ADD COLUMN show_gold BOOLEAN DEFAULT FALSE")


@migration(34, "reward_scores")
def _m034_reward_scores(con: Any) -> None:
    """The reward cache (``scoring.reward``): a reward model's reward of one (prompt, completion), keyed by the RM's
    digest, the engine that computed it (hf and vllm agree only to float tolerance) and the sha256 of the pair
    (``reward_key``); no text is kept, so a sealed tier's outputs stay sealed."""
    con.execute("""
        CREATE TABLE reward_scores (
            rm_digest VARCHAR NOT NULL, engine VARCHAR NOT NULL, pair_sha256 VARCHAR NOT NULL, reward DOUBLE NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (rm_digest, engine, pair_sha256))""")


@migration(35, "private_fingerprints")
def _m035_private_fingerprints(con: Any) -> None:
    """Every private content a store has seen (``splits.twins``): the split, its content hash and item count, the
    fingerprint of the key its item fingerprints are under (``''``: recorded without the key, content hash only),
    how it was recorded (``added``, ``replaced``, ``imported``, ``seen on disk``) and when; and the keyed
    fingerprints of its items (HMAC of each id, normalised text and long field value: ``Sealer.item_print``), so a
    copy of a private split is refused after its manifest left the disk or its data was replaced. A store from
    before learns the private splits on disk at its first copy check (``splits add``, ``import``, ``init``)."""
    con.execute("""
        CREATE TABLE private_contents (
            split VARCHAR NOT NULL, content_sha256 VARCHAR NOT NULL, key_fingerprint VARCHAR NOT NULL,
            items INTEGER NOT NULL, how VARCHAR NOT NULL, recorded_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (split, content_sha256, key_fingerprint))""")
    con.execute("""
        CREATE TABLE private_fingerprints (
            content_sha256 VARCHAR NOT NULL, key_fingerprint VARCHAR NOT NULL, kind VARCHAR NOT NULL,
            digest VARCHAR NOT NULL)""")


@migration(47, "server_roles")
def _m047_server_roles(con: Any) -> None:
    """On a PostgreSQL store, the access log is append-only by the database: a trigger refuses every
    UPDATE, DELETE and TRUNCATE of ``access_log`` rows, for every role, the tables' owner included (an
    administrator must first disable the trigger with ``ALTER TABLE``, or turn triggers off as a superuser); the
    signed head (``access_log_signature``) moves only forward and only to the log's last row, through
    ``evalgate_sign_head`` (run with its owner's rights, ``SECURITY DEFINER``), the one change of it an evaluator may
    make; the trigger refuses every other. ``evalgate.store.pg.grant_roles`` grants the roles. A DuckDB file has no
    roles: nothing changes there (whoever can write the file can rewrite it, docs/SECURITY.md)."""
    if dialect(con) != POSTGRESQL:
        return
    con.execute("""
        CREATE FUNCTION evalgate_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_TABLE_NAME = 'access_log_signature' AND TG_OP = 'INSERT'
               AND NOT EXISTS (SELECT 1 FROM access_log_signature) THEN
                RETURN NEW;
            END IF;
            IF TG_TABLE_NAME = 'access_log_signature' AND TG_OP = 'UPDATE'
               AND current_setting('evalgate.sign_head', true) = 'on' AND NEW.seq >= OLD.seq THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'evalgate: % on % refused: the access log is append-only, its signed head moves only forward through evalgate_sign_head (docs/SECURITY.md)',
                TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
        END $$""")  # noqa: E501
    for table, changes in (("access_log", "UPDATE OR DELETE"),
                           ("access_log_signature", "INSERT OR UPDATE OR DELETE")):
        con.execute(f"CREATE TRIGGER {table}_append_only BEFORE {changes} ON {table} FOR EACH ROW "
                    "EXECUTE FUNCTION evalgate_refuse_change()")
        con.execute(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} FOR EACH STATEMENT "
                    "EXECUTE FUNCTION evalgate_refuse_change()")
    con.execute("""
        CREATE FUNCTION evalgate_sign_head(p_seq BIGINT, p_hash VARCHAR, p_key VARCHAR, p_signature VARCHAR,
                                           p_at TIMESTAMPTZ) RETURNS void
        LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
        DECLARE last_seq BIGINT; last_hash VARCHAR;
        BEGIN
            SELECT seq, row_hash INTO last_seq, last_hash FROM access_log
                WHERE seq = (SELECT max(seq) FROM access_log);
            IF last_seq IS DISTINCT FROM p_seq OR last_hash IS DISTINCT FROM p_hash THEN
                RAISE EXCEPTION 'evalgate: a signed head must be the access log''s last row (%), not row %',
                    last_seq, p_seq USING ERRCODE = 'insufficient_privilege';
            END IF;
            IF NOT EXISTS (SELECT 1 FROM access_log_signature) THEN
                INSERT INTO access_log_signature VALUES (p_seq, p_hash, p_key, p_signature, p_at);
                RETURN;
            END IF;
            PERFORM set_config('evalgate.sign_head', 'on', true);
            UPDATE access_log_signature SET seq=p_seq, row_hash=p_hash, public_key=p_key, signature=p_signature,
                signed_at=p_at;
            PERFORM set_config('evalgate.sign_head', 'off', true);
        END $$""")
    con.execute("REVOKE ALL ON FUNCTION evalgate_sign_head(BIGINT, VARCHAR, VARCHAR, VARCHAR, TIMESTAMPTZ) "
                "FROM PUBLIC")


@migration(48, "server_functions_search_path")
def _m048_server_functions_search_path(con: Any) -> None:
    """On a PostgreSQL store, migration 47's functions resolve table names in the store's schema only: a session's
    temporary schema is searched first for tables unless the search path lists it, so an evaluator's ``CREATE TEMP
    TABLE access_log`` holding the row it chose made ``evalgate_sign_head`` (run with the owner's rights) accept a
    signed head of any row, hash and key. Both functions now search the store's schema, then ``pg_temp`` last
    (PostgreSQL's advice for ``SECURITY DEFINER`` functions, "Writing SECURITY DEFINER Functions Safely"). A DuckDB
    file has no such functions: nothing changes there."""
    if dialect(con) != POSTGRESQL:
        return
    schema = str(con.execute("SELECT quote_ident(current_schema())").fetchall()[0][0])
    for fn in ("evalgate_sign_head(BIGINT, VARCHAR, VARCHAR, VARCHAR, TIMESTAMPTZ)", "evalgate_refuse_change()"):
        con.execute(f"ALTER FUNCTION {fn} SET search_path = {schema}, pg_temp")


@migration(49, "server_chain_links")
def _m049_server_chain_links(con: Any) -> None:
    """On a PostgreSQL store, the server refuses an access-log row that does not chain to the log's last row: its
    ``seq`` must follow the last row's (1 for the first row) and its ``prev_hash`` be the last row's ``row_hash``
    (64 zeros for the first). The library chains every row it appends this way under the store's lock; the trigger
    makes it so for every client, so no role (an evaluator writing SQL, a client that skipped the lock) can fork the
    chain or leave a gap by appending. The server does not recompute a row's own hash (``audit verify`` does). A copy
    by ``evalgate store migrate`` (``evalgate.store.copy``) of a log accepted broken is let through for the tables'
    owner only, in a transaction that sets ``evalgate.copying``. A DuckDB file has no triggers: nothing changes
    there."""
    if dialect(con) != POSTGRESQL:
        return
    schema = str(con.execute("SELECT quote_ident(current_schema())").fetchall()[0][0])
    con.execute(f"""
        CREATE FUNCTION evalgate_chain_link() RETURNS trigger LANGUAGE plpgsql
        SET search_path = {schema}, pg_temp AS $$
        DECLARE last_seq BIGINT; last_hash VARCHAR;
        BEGIN
            IF current_setting('evalgate.copying', true) = 'on' AND pg_catalog.pg_has_role(current_user,
                   (SELECT relowner FROM pg_catalog.pg_class WHERE oid = TG_RELID), 'MEMBER') THEN
                RETURN NEW;
            END IF;
            SELECT seq, row_hash INTO last_seq, last_hash FROM access_log ORDER BY seq DESC LIMIT 1;
            IF NOT FOUND THEN
                last_seq := 0;
                last_hash := repeat('0', 64);
            END IF;
            IF NEW.seq IS DISTINCT FROM last_seq + 1 OR NEW.prev_hash IS DISTINCT FROM last_hash THEN
                RAISE EXCEPTION 'evalgate: access-log row % (prev_hash %...) does not chain to the log''s last row % (row_hash %...): refused (docs/SECURITY.md)',
                    NEW.seq, left(NEW.prev_hash, 12), last_seq, left(last_hash, 12)
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
            RETURN NEW;
        END $$""")  # noqa: E501
    con.execute("CREATE TRIGGER access_log_chain_link BEFORE INSERT ON access_log FOR EACH ROW "
                "EXECUTE FUNCTION evalgate_chain_link()")


@migration(50, "server_run_metrics_text")
def _m050_server_run_metrics_text(con: Any) -> None:
    """On a PostgreSQL store, a run's ``metrics`` are text, as the gates' ``document`` is (migration 10): they may
    hold NaN (the standard error of a one-item run), which DuckDB's JSON type keeps and PostgreSQL's refuses, so a
    finished one-item run was refused by the server. The repositories read the column as text on both backends
    already; a DuckDB file changes nothing."""
    if dialect(con) != POSTGRESQL:
        return
    con.execute("ALTER TABLE runs ALTER COLUMN metrics TYPE VARCHAR")
