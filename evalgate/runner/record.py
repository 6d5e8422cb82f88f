"""The run record, written once: ``RunRecord`` is both the stored ``runs`` row and the document ``evaluate``
returns (and ``evalgate run --json`` prints). ``start`` stores its draft (status ``running``) when the read is
logged; ``record`` completes it after scoring (the caller stores it with the samples, in one transaction)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

from pydantic import ConfigDict, field_validator, model_validator

from evalgate.checkpoints.identity import digest_algorithm
from evalgate.core.enums import RunStatus, Tier
from evalgate.core.models import StrictModel
from evalgate.core.results import Metrics
from evalgate.runner.generate import Generated
from evalgate.runner.plan import RunPlan
from evalgate.runner.prompts import versions
from evalgate.runner.score import Scored
from evalgate.scoring.base import SCORERS

# How per-sample seeds derive from the sampling seed (``backends.base.sample_seed``), recorded with every run.
PER_SAMPLE_SEED = "sha256(f'{seed}:{item_id}:{sample_index}')[:8] & (2**63-1)"


RUN_RECORD_VERSION = 2
"""The run record's format: 2 since the record carries ``version`` (runs stored before read as 1)."""


class _Record(StrictModel):
    # use_enum_values: a status or tier is checked against its enum, and held (and dumped) as its plain string
    model_config = ConfigDict(frozen=False, use_enum_values=True, allow_inf_nan=True)  # measured, not user-written


class ProtocolRef(_Record):
    """The protocol a run used."""

    name: str
    """Protocol name."""
    version: str
    """Protocol version."""
    sha256: str
    """Hex sha256 of the resolved protocol (its identity)."""
    path: str | None = None
    """The protocol file the run loaded (None in runs stored before the record held it)."""


class CheckpointRef(_Record):
    """The checkpoint a run evaluated."""

    path: str
    """What the user passed (directory or GGUF file), absolute."""
    digest: str
    """Identity of its weight, config and tokenizer files: ``blake3:<hex>``, or bare sha256 hex for checkpoints
    known before blake3 (``checkpoints.checkpoint_identity``)."""
    digest_algorithm: str | None = None
    """``blake3`` or ``sha256``: the algorithm of ``digest``, always filled in from it (``checkpoints.
    digest_algorithm``: the digest string carries it, so runs stored before this field have it too)."""
    kind: str | None = None
    """``hf`` or ``gguf`` (None in runs stored before the record held it)."""
    train_run: str | None = None
    """Training run name."""
    train_seed: int | None = None
    """Training seed."""
    step: int | None = None
    """Training step."""
    provenance: dict[str, str] | None = None
    """Where train_run, train_seed and step came from (``checkpoints.Checkpoint.provenance``: ``"flag"``, ``"folder
    name 'checkpoint-800'"``, ``"not inferred: ..."``); None in runs stored before migration 16."""

    @model_validator(mode="after")
    def _algorithm(self) -> CheckpointRef:
        self.digest_algorithm = digest_algorithm(self.digest)
        return self


class SplitRef(_Record):
    """The split a run read."""

    name: str
    """Split name."""
    tier: Tier
    """Split tier (smoke, dev, public, private, human-audit)."""
    sha256: str
    """Hex sha256 of the split's content."""
    items: int | None = None
    """Items read (None in runs stored before the record held it)."""


class RunRecord(_Record):
    """Everything a run records: the stored ``runs`` row (``row``) and the returned document (``as_dict``).

    JSON-valued fields hold JSON data exactly as stored (tuples become lists), so a record read back from the store
    (``from_row``) equals the one that was written.
    """

    run_id: str
    """``YYYYmmddTHHMMSS-<8 hex>``."""
    status: RunStatus
    """``running`` until scored; ``failed`` / ``interrupted`` runs keep their error in ``error``."""
    protocol: ProtocolRef
    """The protocol."""
    checkpoint: CheckpointRef
    """The checkpoint."""
    split: SplitRef
    """The split."""
    backend: dict[str, Any]
    """Backend name, validated options, ``generation_settings`` and their sha256 (the cache's settings key), chat
    template hash, tokenizer handling, renderer versions, the run the prompts were reused from, ``model_loaded``,
    and after generation what the backend reports (engine, versions,
    dtype, ``sent``, ``ignored_generation_config``, ...)."""
    versions: dict[str, str]
    """Python and package versions (evalgate, transformers, torch, vllm, duckdb, math-verify) that were installed."""
    effective_params: dict[str, Any]
    """Sampling values sent (from the protocol only), ``n``, the sampling ``seed`` and ``per_sample_seed``."""
    metrics: Metrics | None = None
    """pass@k with stderr, mean score, behaviour metrics (None until complete): a ``Metrics``, read by name
    (``metrics["pass@1"]``) or typed (``metrics.pass_at[1].value``, ``.stderr``)."""
    counts: dict[str, Any] | None = None
    """items, samples, generated, cached, ``samples_from`` (samples per run that generated them), by_status,
    timing and ``reasoning`` (the protocol's ``reasoning.strip``, samples ``with_reasoning``, samples whose block
    was ``unclosed``; absent in older runs) (None until complete)."""
    warnings: list[str] = []
    """Budget warnings of the read, and the checkpoint's (provenance disagreements, a context check skipped)."""
    wall_s: float | None = None
    """Wall seconds of the whole run, preparation included (None until complete)."""
    actor: str | None = None
    """Who read the split."""
    purpose: str | None = None
    """Why the split was read."""
    host: str | None = None
    """Host of the process that ran it."""
    pid: int | None = None
    """Process id that ran it (with ``host``: recognises runs left ``running`` by a killed process)."""
    error: str | None = None
    """Why a failed or interrupted run ended."""
    version: int = RUN_RECORD_VERSION
    """The record's format (``RUN_RECORD_VERSION``; 1: stored before the record carried it)."""

    @field_validator("backend", "effective_params", "metrics", "counts", mode="before")
    @classmethod
    def _as_stored(cls, v: Any) -> Any:
        return json.loads(json.dumps(v.as_dict() if isinstance(v, Metrics) else v))

    def as_dict(self) -> dict[str, Any]:
        """The run document: what ``evalgate run --json`` prints (every field, ``version`` last)."""
        return self.model_dump()

    def row(self) -> dict[str, Any]:
        """The ``runs`` row (column -> value; JSON columns as Python data)."""
        p, c, s = self.protocol, self.checkpoint, self.split
        return {"run_id": self.run_id, "status": self.status, "protocol_name": p.name, "protocol_version": p.version,
                "protocol_hash": p.sha256, "protocol_path": p.path, "checkpoint_digest": c.digest,
                "checkpoint_path": c.path, "checkpoint_kind": c.kind, "train_run": c.train_run,
                "train_seed": c.train_seed, "step": c.step, "checkpoint_provenance": c.provenance, "split": s.name,
                "tier": s.tier, "split_sha256": s.sha256,
                "items": s.items, "sampling_seed": self.effective_params["seed"], "backend": self.backend["name"],
                "backend_info": self.backend, "effective_params": self.effective_params, "versions": self.versions,
                "metrics": self.metrics.as_dict() if self.metrics is not None else None, "counts": self.counts,
                "warnings": self.warnings, "wall_s": self.wall_s,
                "actor": self.actor, "purpose": self.purpose, "host": self.host, "pid": self.pid, "error": self.error,
                "settings_sha256": self.backend.get("generation_settings_sha256"), "record_version": self.version}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunRecord:
        """The record of a stored ``runs`` row (``Store.runs``; JSON columns decoded)."""
        return cls(
            run_id=row["run_id"], status=row["status"],
            protocol=ProtocolRef(name=row["protocol_name"], version=row["protocol_version"],
                                 sha256=row["protocol_hash"], path=row.get("protocol_path")),
            checkpoint=CheckpointRef(path=row["checkpoint_path"], digest=row["checkpoint_digest"],
                                     kind=row.get("checkpoint_kind"), train_run=row["train_run"],
                                     train_seed=row["train_seed"], step=row["step"],
                                     provenance=row.get("checkpoint_provenance")),
            split=SplitRef(name=row["split"], tier=row["tier"], sha256=row["split_sha256"], items=row.get("items")),
            backend=row["backend_info"] or {"name": row["backend"]}, versions=row.get("versions") or {},
            effective_params=row["effective_params"] or {"seed": row["sampling_seed"]}, metrics=row["metrics"],
            counts=row["counts"], warnings=row.get("warnings") or [], wall_s=row["wall_s"], actor=row["actor"],
            purpose=row["purpose"], host=row.get("host"), pid=row.get("pid"), error=row["error"],
            version=row.get("record_version") or 1)


def draft(plan: RunPlan) -> RunRecord:
    """The record of a run that has started (status ``running``, no metrics)."""
    p, c, m, prompts = plan.protocol, plan.checkpoint, plan.manifest, plan.prompts
    backend = {"name": plan.options.backend,
               "options": plan.backend_options.model_dump(mode="json", exclude_unset=True),
               "chat_template_sha256": prompts.chat_template_sha256, "tokenizer": prompts.tokenizer_summary,
               "renderer": prompts.renderer, "prompts_from_run": prompts.from_run, "model_loaded": False,
               "generation_settings": plan.settings, "generation_settings_sha256": plan.settings_sha256}
    return RunRecord(
        run_id=plan.run_id, status="running",
        protocol=ProtocolRef(name=p.spec.name, version=p.spec.version, sha256=p.sha256, path=str(p.path)),
        checkpoint=CheckpointRef(path=str(c.path), digest=c.digest, kind=c.kind, train_run=c.train_run,
                                 train_seed=c.train_seed, step=c.step, provenance=dict(c.provenance) or None),
        split=SplitRef(name=m.name, tier=m.tier, sha256=m.content_sha256, items=len(plan.items)),
        backend=backend, versions=versions(),
        effective_params={**plan.params.as_dict(), "n": p.spec.sampling.n, "seed": plan.seed,
                          "per_sample_seed": PER_SAMPLE_SEED},
        warnings=plan.warnings, actor=plan.actor, purpose=plan.options.purpose, host=socket.gethostname(),
        pid=os.getpid())


def _pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 probes without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(plan: RunPlan, detail: str | None = None) -> RunRecord:
    """Log the read (cached when nothing is missing), register the checkpoint, mark runs left by dead processes
    interrupted, and store the draft record and the run's prompts, in one store session.

    ``detail`` goes into the read's access-log row (``evalgate sweep --ray``: the Ray node and worker the items
    are sent to).

    Raises:
        RefusedByPolicy: concurrent readers used the split's budget up since ``prepare`` (logged as refused).
    """
    store, ckpt, rec = plan.store, plan.checkpoint, draft(plan)
    with store.session():
        plan.access.log_read(plan.manifest, plan.actor, plan.options.purpose, cached=not plan.missing,
                             checkpoint_digest=ckpt.digest, protocol_hash=plan.protocol.sha256, run_id=plan.run_id,
                             override_reason=plan.options.override_reason, detail=detail)
        store.upsert_checkpoint(ckpt.digest, str(ckpt.path), ckpt.kind, ckpt.train_run, ckpt.train_seed, ckpt.step)
        for stale in store.mark_interrupted_runs(socket.gethostname(), _pid_alive):
            print(f"note: run {stale} was left unfinished by a process that ended; marked interrupted",
                  file=sys.stderr)
        store.create_run(rec.row())
        store.put_run_prompts(plan.run_id, plan.prompts.records, plan.prompts.texts())
    return rec


def timing(wall_s: float, generated: Generated, score_s: float) -> dict[str, Any]:
    """A run's seconds: ``wall_s``, ``generate_s`` (the backend's generate calls, engine start included),
    ``score_s``, and, from a backend that reports phases, ``engine_start_s``, ``first_token_s`` and
    ``generation_s`` (``Generated.phases``). ``tokens_per_s`` is new completion tokens over ``generation_s`` where
    reported (the engine's generation, without its start-up), else over ``generate_s``; None when nothing was
    generated."""
    gen_s = generated.generate_s
    phase_s = generated.phases.get("generation_s", 0.0)
    per_s = phase_s if phase_s > 0 else gen_s
    return {"wall_s": wall_s, **{k: generated.phases[k] for k in ("engine_start_s", "first_token_s", "generation_s")
                                 if k in generated.phases},
            "generate_s": gen_s, "score_s": score_s, "new_completion_tokens": generated.new_completion_tokens,
            "tokens_per_s": generated.new_completion_tokens / per_s if per_s > 0 else None}


def record(plan: RunPlan, started: RunRecord, generated: Generated, scored: Scored) -> RunRecord:
    """The complete record: ``started`` (``start``'s draft) with what generation reported, metrics, counts and
    timing."""
    n_gen = len(plan.missing)
    statuses = [s["status"] for s in scored.samples]
    wall = time.perf_counter() - plan.started
    sources = [str(g.get("run_id")) for g in generated.samples.values()]  # "None": stored before migration 7
    counts = {"items": len(plan.items), "samples": len(plan.keys), "generated": n_gen,
              "samples_from": {run: sources.count(run) for run in sorted(set(sources))},
              "cached": len(plan.keys) - n_gen, "by_status": {st: statuses.count(st) for st in sorted(set(statuses))},
              "timing": timing(wall, generated, scored.score_s), "reasoning": scored.reasoning}
    if SCORERS[plan.protocol.spec.scorer.name].runs_code:  # the isolation layers programs ran with, the missing ones
        counts["sandbox"] = plan.scorer.sandbox
    return RunRecord.model_validate({
        **started.model_dump(), "status": "complete", "backend": {**started.backend, **generated.backend_info},
        "metrics": scored.metrics, "counts": counts, "wall_s": wall})
