"""Protocols, checkpoints, runs and their scored samples (tables ``protocols``, ``checkpoints``, ``runs``,
``samples``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from evalgate.core.enums import Tier
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.keys.sealing import is_sealed
from evalgate.store.codec import open_errors, open_read, run_codec
from evalgate.store.db import Repository, insert_values, matching, records
from evalgate.store.rows import RunRow, SampleRow, SampleScore

RUN_JSON_COLUMNS = ("backend_info", "effective_params", "metrics", "counts", "versions", "warnings",
                    "checkpoint_provenance")
"""The runs columns holding JSON (decoded on read)."""


def json_values(row: dict[str, Any]) -> list[Any]:
    """A row's values for SQL parameters, dicts and lists encoded as JSON text."""
    return [json.dumps(v) if isinstance(v, dict | list) else v for v in row.values()]


class ProtocolRepo(Repository):
    """Every frozen ``name@version -> sha256`` (``evalgate.protocol.freeze``)."""

    def protocol_hash(self, name: str, version: str) -> str | None:
        """The hash frozen under ``name@version``, or None."""
        with self.connect() as con:
            row = con.execute("SELECT sha256 FROM protocols WHERE name=? AND version=?", [name, version]).fetchone()
        return row[0] if row else None

    def protocol_resolved(self, name: str, version: str) -> tuple[str, dict[str, Any]] | None:
        """The hash and resolved content recorded under ``name@version``, or None."""
        with self.connect() as con:
            row = con.execute("SELECT sha256, resolved FROM protocols WHERE name=? AND version=?",
                              [name, version]).fetchone()
        return (row[0], json.loads(row[1])) if row else None

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
                            [name, version, sha256, json.dumps(resolved), self.clock()])


class RunRepo(Repository):
    """Checkpoints, runs (create, finish, fail, list) and their scored samples."""

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
        """Record a checkpoint by digest (a known digest gets the new path)."""
        with self.connect() as con:
            con.execute("""INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?)
                           ON CONFLICT (digest) DO UPDATE SET path=excluded.path""",
                        [digest, path, kind, train_run, train_seed, step, self.clock()])

    def create_run(self, row: dict[str, Any]) -> None:
        """Insert a run (``row``: runs columns to values, JSON columns as Python data; ``RunRecord.row``), stamped
        with its start time."""
        row = {"status": "running", **row, "started_at": self.clock()}
        cols = ", ".join(row)
        with self.connect() as con:
            con.execute(f"INSERT INTO runs ({cols}) VALUES ({', '.join('?' * len(row))})", json_values(row))

    def finish_run(self, row: dict[str, Any], samples: Sequence[dict[str, Any]]) -> None:
        """Write a run's scored samples, its record (``row``: run_id and the runs columns to set, as ``create_run``)
        and status ``complete``, in one transaction: a run is complete only when every sample row is stored. On a
        sealed tier the extracted answers and details are stored encrypted (``evalgate.store.codec``).

        Raises:
            RefusedByPolicy: a sealed tier's run and no private key (nothing is written)."""
        run_id = row["run_id"]
        with self.connect() as con:
            codec = run_codec(con, run_id, self.env)
            con.execute("DELETE FROM samples WHERE run_id=?", [run_id])
            insert_values(
                con, "INSERT INTO samples",
                [[run_id, s["item_id"], s["sample_index"], s["seed"], s["score"], s["status"],
                  codec.value("samples", "extracted", s.get("extracted")),
                  codec.value("samples", "detail", s.get("detail")), s["cached"], json.dumps(s.get("behavior") or {})]
                 for s in samples])
            update = {**{k: v for k, v in row.items() if k != "run_id"}, "status": "complete",
                      "finished_at": self.clock()}
            con.execute(f"UPDATE runs SET {', '.join(f'{k}=?' for k in update)} WHERE run_id=?",
                        [*json_values(update), run_id])

    def fail_run(self, run_id: str, error: str, status: str = "failed") -> None:
        """Mark a run ended without samples: ``failed``, or ``interrupted`` (stopped by the user; like a killed
        run, its stored generations are reused by the next identical run). The error is sealed on a sealed tier
        (an engine's or scorer's message may quote the item)."""
        with self.connect() as con:
            codec = run_codec(con, run_id, self.env)
            con.execute("UPDATE runs SET status=?, finished_at=?, error=? WHERE run_id=?",
                        [status, self.clock(), codec.value("runs", "error", error), run_id])

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

    def runs(self, **where: Any) -> list[RunRow]:
        """Runs matching column equalities (e.g. ``protocol_name=..., split=..., status='complete'``), oldest
        first, as ``RunRow``s (JSON columns decoded)."""
        with self.connect() as con:
            rows = matching(con, "runs", where, "started_at", RUN_JSON_COLUMNS)
        return RunRow.from_dicts(open_errors(rows, self.env))

    def samples(self, run_id: str) -> list[SampleRow]:
        """A run's samples joined with their cached generations and prompts (``SampleRow``s), sealed values
        decrypted.

        A run on the private tier (``run_tiers``: its row or the access log says so) is refused: its per-item
        outputs are never shown (the gate reads only ``sample_scores``). Readers of other tiers check and
        log the read first (``evalgate.views.samples``, the rating pages, ``export-audit``).

        Raises:
            RefusedByPolicy: a private-tier run; the run's outputs are sealed and the private key is missing or
                wrong."""
        tiers = self.run_tiers(run_id)
        if Tier.PRIVATE in tiers:
            raise RefusedByPolicy(f"run {run_id} is on a private split: its per-item outputs are never shown (the "
                                  "gate reads only per-item scores); use 'evalgate runs' for its metrics")
        return self._samples(run_id, sealed=Tier.HUMAN_AUDIT in self.run_tiers(run_id, logged_only=True))

    def run_tiers(self, run_id: str, logged_only: bool = False) -> dict[str, str]:
        """The tiers run ``run_id`` belongs to, each with its split: the tier and split its ``runs`` row records and
        every tier and split the access log logged a row of it under (a release-gate run's ``reserved-read`` and
        ``result`` rows name it; the log's split wins for a tier both name); empty for an unknown run.
        ``logged_only``: the access log's only (every run logs its read with its run id, ``runner.record``): what
        may open sealed values, since the row's tier can be edited to human-audit too.

        The ``runs`` row is not signed, the access log is (hash-chained, its head signed): whoever could write the
        store file set a private run's row to tier dev on a dev split, and its sealed samples were shown to the next
        key holder who asked (adversary, third pass). With the log's rows, editing the row is not enough; editing
        the log breaks its chain, which ``evalgate audit verify`` and every gate report."""
        with self.connect() as con:
            rows = con.execute("SELECT 0, tier, split FROM runs WHERE run_id=? AND NOT ? UNION SELECT 1, tier, "
                               "split FROM access_log WHERE run_id=? ORDER BY 1",
                               [run_id, logged_only, run_id]).fetchall()
        return {tier: split for _, tier, split in rows if tier is not None}

    def _samples(self, run_id: str, sealed: bool = True) -> list[SampleRow]:
        """``samples`` for every tier (the sealing tests check that an authorised reader can decrypt).

        ``sealed`` False (a run of an open tier): a sealed value among the joined rows is refused, never opened. An
        open tier's outputs are stored in clear, so a sealed one joined to its samples is another run's, reached
        through edited rows (adversary, third pass: a dev run's checkpoint, protocol and settings set to a private
        run's and its ``run_prompts`` deleted joined the private generations of the same item ids).

        Raises:
            RefusedByPolicy: as above; the private key is missing or wrong."""
        with self.connect() as con:
            rows = records(con, """
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
        if not sealed and any(is_sealed(v) for r in rows for v in r.values()):
            raise RefusedByPolicy(f"run {run_id} is on an open tier, yet its samples join encrypted outputs of a "
                                  "private or human-audit run: the store was edited (its runs, run_prompts or samples "
                                  "rows); nothing is shown. Check the access log with 'evalgate audit verify'")
        for r in rows:
            r["behavior"] = json.loads(r["behavior"]) if r["behavior"] else {}
        return SampleRow.from_dicts(open_read("samples", rows, self.env))

    def result_sha256(self, run_id: str) -> str:
        """sha256 of what a gate takes from a stored run: its metrics and every sample's item id, index, score and
        status (canonical JSON). Recorded in the access log when a release-gate run completes (outcome ``result``),
        so a later gate that shows the run again can tell the result it recorded from an edited store."""
        with self.connect() as con:
            row = con.execute("SELECT metrics FROM runs WHERE run_id=?", [run_id]).fetchone()
        metrics = json.loads(row[0]) if row and isinstance(row[0], str) else (row[0] if row else None)
        doc = {"metrics": metrics, "samples": [s.as_dict() for s in self.sample_scores(run_id)]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def sample_scores(self, run_id: str) -> list[SampleScore]:
        """A run's per-sample scores only (``SampleScore``: item_id, sample_index, score, status): what paired
        statistics need, without joining the completions."""
        with self.connect() as con:
            cur = con.execute("SELECT item_id, sample_index, score, status FROM samples WHERE run_id=? "
                              "ORDER BY item_id, sample_index", [run_id])
            return [SampleScore(*r) for r in cur.fetchall()]
