"""The generation cache: rendered prompts (``prompts``, ``run_prompts``), generations, agentic turns
(``trajectories``, migration 11), and reward models' rewards (``reward_scores``, migration 34).

A generation is cached by checkpoint digest, protocol hash, item id, sample index, sampling seed, prompt hash and
generation-settings hash, never by less. A run on a sealed tier stores its texts encrypted (``evalgate.store.codec``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evalgate.core.errors import RefusedByPolicy
from evalgate.keys.sealing import is_sealed
from evalgate.store.codec import open_read, run_codec
from evalgate.store.db import Repository, insert_values, records
from evalgate.store.dialect import POSTGRESQL, dialect
from evalgate.store.rows import PromptRun, RunPrompt, TurnRow

TRAJECTORY_COLUMNS = ("item_id", "sample_index", "seed", "turn", "turn_seed", "prompt_sha256", "text",
                      "prompt_tokens", "completion_tokens", "finish_reason", "calls", "parse_error", "violation",
                      "ended", "gen_s", "tool_s")
"""The trajectories columns a turn record gives (``GenerationCache.put_turns``), in table order."""

_TRAJECTORY_TYPES = {"checkpoint_digest": "VARCHAR", "protocol_hash": "VARCHAR", "settings_sha256": "VARCHAR",
                     "item_id": "VARCHAR", "sample_index": "INTEGER", "seed": "UBIGINT", "turn": "INTEGER",
                     "turn_seed": "UBIGINT", "prompt_sha256": "VARCHAR", "text": "VARCHAR",
                     "prompt_tokens": "INTEGER", "completion_tokens": "INTEGER", "finish_reason": "VARCHAR",
                     "calls": "JSON", "parse_error": "VARCHAR", "violation": "VARCHAR", "ended": "VARCHAR",
                     "gen_s": "DOUBLE", "tool_s": "DOUBLE", "run_id": "VARCHAR"}
"""Every trajectories column but created_at, with its type (``put_turns`` reads rows from one JSON document)."""
_PG_TYPES = {"UBIGINT": "NUMERIC(20)", "DOUBLE": "DOUBLE PRECISION"}
"""PostgreSQL's names of the DuckDB types above (as ``evalgate.store.pg.translate`` renames them in DDL)."""

SampleKey = tuple[str, int, int]
"""``(item_id, sample_index, seed)``: a generation's key under one checkpoint, protocol, prompt and settings."""


class GenerationCache(Repository):
    """Prompts, generations and agentic turns, keyed as the module says."""

    def put_run_prompts(self, run_id: str, rows: Sequence[dict[str, Any]], texts: dict[str, str]) -> None:
        """Record a run's rendered prompts: one ``run_prompts`` row per item (keys: item_id, prompt_sha256,
        prompt_tokens, bos_count, bos_added, system_merged) and each distinct text once in ``prompts`` (encrypted
        for a run on a sealed tier)."""
        with self.connect() as con:
            codec = run_codec(con, run_id, self.env)
            insert_values(con, "INSERT INTO prompts",
                          [[h, codec.value("prompts", "text", t)] for h, t in texts.items()], "ON CONFLICT DO NOTHING")
            insert_values(con, "INSERT INTO run_prompts",
                          [[run_id, r["item_id"], r["prompt_sha256"], r["prompt_tokens"], r["bos_count"],
                            r["bos_added"], r["system_merged"]] for r in rows])

    def run_prompts(self, run_id: str) -> list[RunPrompt]:
        """A run's rendered prompts (``RunPrompt``s) in item id order, with the prompt text (``text``)."""
        with self.connect() as con:
            rows = records(con, """SELECT rp.*, p.text FROM run_prompts rp
                                   JOIN prompts p ON p.sha256=rp.prompt_sha256
                                   WHERE rp.run_id=? ORDER BY rp.item_id""", [run_id])
        return RunPrompt.from_dicts(open_read("run_prompts", rows, self.env))

    def reusable_prompts(self, checkpoint_digest: str, protocol_hash: str, split_sha256: str,
                         renderer: dict[str, Any]) -> tuple[PromptRun, list[RunPrompt]] | None:
        """The newest complete run whose prompts were rendered from the same inputs, and its prompt records.

        Same inputs: checkpoint digest (covers the tokenizer and the model's chat template), protocol hash
        (covers the templates and few-shot file), split content sha256, and ``backend_info.renderer`` (the
        evalgate and transformers versions that rendered them). A fully cached rerun uses these records instead of
        loading the tokenizer to render the prompts again.

        Returns:
            ``(run, prompts)``: the run (a ``PromptRun``: its ``run_id`` and decoded ``backend_info``) and its
            prompts (``RunPrompt``s, as ``run_prompts`` gives them); None when no such run recorded its prompts.
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
                found = open_read("run_prompts", records(con, """SELECT rp.*, p.text FROM run_prompts rp
                                  JOIN prompts p ON p.sha256=rp.prompt_sha256 WHERE rp.run_id=?""", [run_id]), self.env)
                if found:
                    return PromptRun(run_id, info), RunPrompt.from_dicts(found)
        return None

    def cached_generations(self, checkpoint_digest: str, protocol_hash: str, keys: Sequence[SampleKey],
                           prompt_sha256: dict[str, str],
                           settings_sha256: str = "") -> dict[SampleKey, dict[str, Any]]:
        """Cached generations for ``(item_id, sample_index, seed)`` keys under one checkpoint and protocol, each
        generated from the prompt whose hash ``prompt_sha256[item_id]`` gives, under the generation settings whose
        hash is ``settings_sha256`` (``backends.settings``; ``""``: rows stored before migration 7). The full cache
        key is checkpoint digest, protocol hash, item, sample index, sampling seed, prompt hash and settings hash.
        Each value carries the ``run_id`` that generated it (None for rows from before migration 7)."""
        if not keys:
            return {}
        with self.connect() as con:
            con.execute("CREATE TEMP TABLE want (item_id VARCHAR, sample_index INTEGER, seed UBIGINT, "
                        "prompt_sha256 VARCHAR)")
            insert_values(con, "INSERT INTO want", [[*k, prompt_sha256[k[0]]] for k in keys])
            cur = con.execute("""
                SELECT g.item_id, g.sample_index, g.seed, g.text, g.completion_tokens, g.prompt_tokens,
                       g.finish_reason, g.prompt_sha256, g.run_id
                FROM generations g JOIN want w USING (item_id, sample_index, seed, prompt_sha256)
                WHERE g.checkpoint_digest=? AND g.protocol_hash=? AND g.settings_sha256=?""",
                              [checkpoint_digest, protocol_hash, settings_sha256])
            out = {(r[0], r[1], r[2]): {"text": r[3], "completion_tokens": r[4], "prompt_tokens": r[5],
                                        "finish_reason": r[6], "prompt_sha256": r[7], "run_id": r[8]}
                   for r in cur.fetchall()}
            open_read("generations", list(out.values()), self.env)
            con.execute("DROP TABLE want")
        return out

    def put_generations(self, checkpoint_digest: str, protocol_hash: str, rows: Sequence[dict[str, Any]],
                        prompts: dict[str, str], settings_sha256: str = "", run_id: str | None = None) -> None:
        """Store generations made by ``run_id`` under the settings hashed ``settings_sha256`` (and the prompts they
        came from, once per prompt hash) in one transaction; a run on a sealed tier stores texts and prompts
        encrypted (``evalgate.store.codec``).

        Raises:
            RefusedByPolicy: a sealed tier's run and no private key (nothing is written)."""
        with self.connect() as con:
            codec = run_codec(con, run_id, self.env)
            insert_values(con, "INSERT INTO prompts",
                          [[h, codec.value("prompts", "text", t)] for h, t in prompts.items()],
                          "ON CONFLICT DO NOTHING")
            insert_values(
                con, "INSERT INTO generations",
                [[checkpoint_digest, protocol_hash, r["item_id"], r["sample_index"], r["seed"], r["prompt_sha256"],
                  codec.value("generations", "text", r["text"]), r.get("prompt_tokens"), r["completion_tokens"],
                  r["finish_reason"], self.clock(), settings_sha256, run_id]
                 for r in rows], "ON CONFLICT DO NOTHING")

    def cached_rewards(self, rm_digest: str, engine: str, pair_sha256s: Sequence[str]) -> dict[str, float]:
        """Cached rewards of one reward model (by digest) on one engine for pairs keyed by
        ``rlhf.reward.reward_key``: ``{pair_sha256: reward}`` for the keys found."""
        if not pair_sha256s:
            return {}
        with self.connect() as con:
            con.execute("CREATE TEMP TABLE want_rewards (pair_sha256 VARCHAR)")
            insert_values(con, "INSERT INTO want_rewards", [[k] for k in pair_sha256s])
            rows = con.execute("SELECT r.pair_sha256, r.reward FROM reward_scores r JOIN want_rewards USING "
                               "(pair_sha256) WHERE r.rm_digest=? AND r.engine=?", [rm_digest, engine]).fetchall()
            con.execute("DROP TABLE want_rewards")
        return {k: float(v) for k, v in rows}

    def put_rewards(self, rm_digest: str, engine: str, rewards: dict[str, float]) -> None:
        """Store rewards ``{pair_sha256: reward}`` of one reward model on one engine in one transaction; a key
        already stored keeps its first value. No text is stored, so nothing of a sealed tier is in the clear."""
        with self.connect() as con:
            insert_values(con, "INSERT INTO reward_scores",
                          [[rm_digest, engine, k, v, self.clock()] for k, v in rewards.items()],
                          "ON CONFLICT DO NOTHING")

    def put_turns(self, checkpoint_digest: str, protocol_hash: str, settings_sha256: str,
                  rows: Sequence[dict[str, Any]], run_id: str) -> None:
        """Store agentic turns (``TRAJECTORY_COLUMNS`` from ``item_id`` to ``tool_s``) made by ``run_id``, in one
        transaction; a turn already stored is kept. On a sealed tier the text fields are sealed (``calls`` as its
        sealed JSON text, stored as a JSON string so the column stays valid JSON)."""
        if not rows:
            return
        keys = {"checkpoint_digest": checkpoint_digest, "protocol_hash": protocol_hash,
                "settings_sha256": settings_sha256, "run_id": run_id}
        struct = ", ".join(f'"{c}": "{t}"' for c, t in _TRAJECTORY_TYPES.items())
        columns = ", ".join(f"{c} {_PG_TYPES.get(t, t)}" for c, t in _TRAJECTORY_TYPES.items())
        with self.connect() as con:  # one JSON document unnested: ~5x faster here than multi-row VALUES
            codec = run_codec(con, run_id, self.env)
            doc = json.dumps([{**keys, **codec.row("trajectories", {c: r[c] for c in TRAJECTORY_COLUMNS})}
                              for r in rows])
            if dialect(con) == POSTGRESQL:  # the same document, read by PostgreSQL's json_to_recordset
                con.execute(f"INSERT INTO trajectories ({', '.join(_TRAJECTORY_TYPES)}, created_at) SELECT *, ? FROM "
                            f"json_to_recordset(?::JSON) AS t({columns}) ON CONFLICT DO NOTHING", [self.clock(), doc])
                return
            con.execute(f"INSERT INTO trajectories ({', '.join(_TRAJECTORY_TYPES)}, created_at) SELECT *, ? FROM "
                        f"(SELECT unnest(from_json(?::JSON, '[{{{struct}}}]'), recursive := true)) "
                        "ON CONFLICT DO NOTHING", [self.clock(), doc])

    def trajectory_turns(self, checkpoint_digest: str, protocol_hash: str, settings_sha256: str,
                         item_ids: Sequence[str] | None = None, split_sha256: str | None = None,
                         sealed: bool = True) -> list[TurnRow]:
        """Stored turns (``TurnRow``s) under one checkpoint, protocol and settings (of ``item_ids`` only, when
        given), ordered by item, sample index, seed and turn; ``calls`` decoded.

        ``split_sha256``: only the turns stored by runs on that split content. A turn's key holds an item id, not
        its split, so two splits whose items share ids (two files numbered from 1) share keys: whatever reads one
        run's turns back passes its split's content hash, or it gets the other split's too (a private split's, in
        clear where the key is at hand). None: every split's (the store's own checks).

        ``sealed`` False (turns read back for a run of an open tier, whose turns are stored in clear): a sealed
        value among them is another run's, reached through edited rows, and is refused, never opened.

        Raises:
            RefusedByPolicy: as above; the private key is missing or wrong."""
        sql = "SELECT * FROM trajectories WHERE checkpoint_digest=? AND protocol_hash=? AND settings_sha256=?"
        params: list[Any] = [checkpoint_digest, protocol_hash, settings_sha256]
        if split_sha256 is not None:
            sql += " AND run_id IN (SELECT run_id FROM runs WHERE split_sha256=?)"
            params.append(split_sha256)
        if item_ids is not None:
            sql += f" AND item_id IN ({', '.join('?' * len(item_ids))})" if item_ids else " AND false"
            params += list(item_ids)
        with self.connect() as con:
            rows = records(con, sql + " ORDER BY item_id, sample_index, seed, turn", params)
        if not sealed and any(is_sealed(v) for r in rows for v in r.values()):
            raise RefusedByPolicy("a run of an open tier reads back encrypted turns of a private or human-audit "
                                  "run: the store was edited (the run's checkpoint, protocol, settings or split "
                                  "content hash); nothing is shown. Check the access log with 'evalgate audit verify'")
        for r in rows:
            r["calls"] = json.loads(r["calls"])
        open_read("trajectories", rows, self.env)
        for r in rows:
            if isinstance(r["calls"], str):  # sealed: the calls' JSON text, encrypted (``Codec.row``)
                r["calls"] = json.loads(r["calls"])
        return TurnRow.from_dicts(rows)
