"""``evaluate()``: protocol x checkpoint x split x sampling seed -> samples, scores and metrics in the store.

Order of work: verify the protocol against its lock; resolve the checkpoint; check the split's tier policy
(refusals are logged); read the items; render prompts; look every sample up in the generation cache; log the
read (cached or not); generate only what is missing, storing each request's completions as they finish (so a
killed run resumes where it stopped); score; write samples and metrics and mark the run complete in one
transaction.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.backends.base import (
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    check_backend,
    get_backend,
    sample_seed,
)
from evalgate.checkpoints import Checkpoint, load_tokenizer, resolve_checkpoint
from evalgate.errors import BadInput, EvalgateError
from evalgate.progress import progress_bars
from evalgate.prompts import (
    PromptEncoder,
    RenderedPrompt,
    TokenizedPrompt,
    chat_template_sha256,
    render_prompt,
    render_response_prefix,
)
from evalgate.protocol import LoadedProtocol, load_protocol, verify
from evalgate.scoring import SampleToScore, aggregate_behavior, get_scorer, sample_behavior
from evalgate.scoring.metrics import run_metrics
from evalgate.splits import SplitManager, actor_name
from evalgate.store import Store

# Samples scored per scorer call, so the scoring progress bar moves; large enough to keep the scorer's worker
# pool busy.
SCORE_CHUNK = 64


@dataclass
class RunOptions:
    """What ``evaluate`` needs beyond protocol, checkpoint and split.

    Attributes:
        backend: backend name (``hf``, ...).
        seed: sampling seed; None uses the protocol's ``sampling.seed``.
        train_run, train_seed, step: training provenance of the checkpoint (else read from its directory).
        purpose: why the split is read (logged); ``release-gate`` is reserved for the gate.
        actor: who reads (default: ``$EVALGATE_ACTOR`` or the OS user).
        override_reason: reason to exceed a soft budget (logged).
        backend_options: keyword options for the backend (device, dtype, token_budget, ...).
        progress: show progress bars on stderr; False also turns off transformers' and huggingface_hub's bars
            (model loading, GGUF conversion) for the run.
    """

    backend: str = "hf"
    seed: int | None = None
    train_run: str | None = None
    train_seed: int | None = None
    step: int | None = None
    purpose: str = "evaluation"
    actor: str | None = None
    override_reason: str | None = None
    backend_options: dict[str, Any] = field(default_factory=dict)
    progress: bool = True


def effective_params(protocol: LoadedProtocol) -> EffectiveParams:
    """The sampling values sent to the engine, taken only from the protocol."""
    s = protocol.spec.sampling
    return EffectiveParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
                           stop=tuple(s.stop), repetition_penalty=s.repetition_penalty)


def _version(pkg: str) -> str | None:
    """An installed package's version from its metadata (no import), None if it is not installed."""
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("evalgate", "transformers", "torch", "vllm", "duckdb", "math-verify"):
        if (v := _version(pkg)) is not None:
            out[pkg] = v
    return out


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="sample", file=sys.stderr, disable=not enabled, leave=False)


def _pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 probes without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tokenizer(protocol: LoadedProtocol, ckpt: Checkpoint) -> Any:
    """The checkpoint's tokenizer: needed to apply a chat template and to record special-token handling. With
    ``chat_template: none`` a checkpoint without one is allowed (None; the engine tokenizes)."""
    try:
        return load_tokenizer(ckpt.model_dir)
    except BadInput:
        if protocol.chat_template == "none":
            return None
        raise


# The fields of a ``run_prompts`` record (``Store.put_run_prompts``).
_PROMPT_RECORD_FIELDS = ("item_id", "prompt_sha256", "system_merged", "prompt_tokens", "bos_count", "bos_added")


def _prompt_record(r: RenderedPrompt, t: TokenizedPrompt | None) -> dict[str, Any]:
    """A ``run_prompts`` row: the prompt's hash and its special-token handling (None without a tokenizer)."""
    return {"item_id": r.item_id, "prompt_sha256": r.sha256, "system_merged": r.system_merged,
            "prompt_tokens": len(t.ids) if t else None, "bos_count": t.bos_count if t else None,
            "bos_added": t.bos_added if t else None}


def _renderer() -> dict[str, str | None]:
    """Versions of the code that renders and tokenizes prompts (evalgate, transformers), read from package
    metadata without importing them; recorded runs' prompts are reused only under the same versions."""
    return {pkg: _version(pkg) for pkg in ("evalgate", "transformers")}


@dataclass
class _Prompts:
    """A run's prompts: rendered text by item id, token ids (empty when reused from a recorded run), the
    ``run_prompts`` records, what the run records about the template and special tokens, the tokenizer (None
    when reused or when the checkpoint has none) and the run the records were copied from (None: rendered now).
    """

    rendered: dict[str, RenderedPrompt]
    tokenized: dict[str, TokenizedPrompt]
    records: list[dict[str, Any]]
    chat_template_sha256: str | None
    tokenizer_summary: dict[str, Any] | None
    tokenizer: Any = None
    from_run: str | None = None

    def sha256s(self) -> dict[str, str]:
        return {iid: r.sha256 for iid, r in self.rendered.items()}


def _render_prompts(protocol: LoadedProtocol, ckpt: Checkpoint, items: list[dict[str, Any]]) -> _Prompts:
    """Render and tokenize every item's prompt with the checkpoint's tokenizer."""
    tokenizer = _tokenizer(protocol, ckpt)
    rendered = {str(it["id"]): render_prompt(protocol, it, tokenizer) for it in items}
    encoder = PromptEncoder(tokenizer) if tokenizer is not None else None
    tokenized = {iid: encoder.encode(r.text, iid) for iid, r in rendered.items()} if encoder else {}
    return _Prompts(rendered, tokenized, [_prompt_record(r, tokenized.get(iid)) for iid, r in rendered.items()],
                    chat_template_sha256(protocol, tokenizer), encoder.summary(tokenized) if encoder else None,
                    tokenizer)


def _recorded_prompts(store: Store, protocol: LoadedProtocol, ckpt: Checkpoint, split_sha256: str,
                      items: list[dict[str, Any]], renderer: dict[str, str | None]) -> _Prompts | None:
    """The prompts an earlier complete run rendered from the same checkpoint, protocol, split content and
    renderer versions (``Store.reusable_prompts``), or None. The response prefix is rendered again from the item
    (plain jinja2, no tokenizer)."""
    found = store.reusable_prompts(ckpt.digest, protocol.sha256, split_sha256, renderer)
    if found is None:
        return None
    run, records = found
    by_id = {r["item_id"]: r for r in records}
    if set(by_id) != {str(it["id"]) for it in items}:
        return None
    rendered = {}
    for it in items:
        r = by_id[str(it["id"])]
        prefix = render_response_prefix(protocol, it)
        rendered[r["item_id"]] = RenderedPrompt(r["item_id"], r["text"], prefix, r["prompt_sha256"],
                                                r["system_merged"])
    info = run["backend_info"]
    return _Prompts(rendered, {}, [{k: r[k] for k in _PROMPT_RECORD_FIELDS} for r in records],
                    info.get("chat_template_sha256"), info.get("tokenizer"), None, run["run_id"])


def compute_metrics(protocol: LoadedProtocol, per_item: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Run metrics from scored samples grouped by item.

    pass@k is the unbiased estimator per item, averaged over items (Chen et al. 2021), with the stderr of that
    mean over items. Behaviour metrics are means over samples. A greedy protocol (temperature 0) reports
    pass@1 only: its samples are copies of one decode, so pass@k for k > 1 would be pass@1 renamed.
    """
    metrics: dict[str, Any] = dict(run_metrics(per_item, protocol.spec.pass_at_k,
                                                greedy=protocol.spec.sampling.temperature == 0))
    metrics.update(aggregate_behavior([s["behavior"] for ss in per_item.values() for s in ss]))
    return metrics


def evaluate(protocol_path: str | Path, checkpoint: str | Path | Checkpoint, split: str,
             options: RunOptions | None = None, store: Store | None = None) -> dict[str, Any]:
    """Evaluate a checkpoint on a split under a frozen protocol.

    Args:
        protocol_path: protocol YAML (must match its ``.lock``).
        checkpoint: HF directory, GGUF file, or a resolved Checkpoint.
        split: split name.
        options: RunOptions.
        store: the Store (default: ``$EVALGATE_HOME/evalgate.duckdb``).

    Returns:
        The run document (what ``evalgate run --json`` prints): run_id, protocol, checkpoint, split, backend,
        versions, effective parameters, metrics, counts, wall_s.

    Raises:
        BadInput: malformed protocol, unknown split, missing checkpoint, bad template (nothing is written).
        ProtocolDrift: the protocol no longer matches its lock.
        RefusedByPolicy: the split's tier policy refuses the read (the refusal is logged).
        EngineError: generation failed (the run is marked failed; stored generations are kept for resume).
    """
    opts = options or RunOptions()
    with progress_bars(opts.progress):  # also the libraries' bars: model loading, GGUF conversion
        return _evaluate(protocol_path, checkpoint, split, opts, store)


def _evaluate(protocol_path: str | Path, checkpoint: str | Path | Checkpoint, split: str, opts: RunOptions,
              store: Store | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    protocol = load_protocol(protocol_path)
    verify(protocol)
    scorer = get_scorer(protocol)  # before any read or generation: a scorer may refuse the protocol
    backend_options = check_backend(opts.backend, opts.backend_options)  # a typo must not spend a budgeted read
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else resolve_checkpoint(
        checkpoint, opts.train_run, opts.train_seed, opts.step)
    store = store or Store()
    # Store work before generation runs in two sessions (one open connection each, see Store.session); the
    # tokenizer, when needed, is loaded between them, so the store's lock is never held while it loads.
    with store.session():
        store.record_protocol(protocol.spec.name, protocol.spec.version, protocol.sha256, protocol.resolved)
        actor = actor_name(opts.actor)
        manager = SplitManager(store)
        manifest, warnings = manager.check(split, opts.purpose, actor, opts.override_reason, ckpt.digest,
                                           protocol.sha256)
        items = manager.read(manifest)
        if not items:
            raise BadInput(f"split {split} has no items")
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)

        sampling = protocol.spec.sampling
        run_seed = sampling.seed if opts.seed is None else opts.seed
        keys = [(str(it["id"]), j, sample_seed(run_seed, str(it["id"]), j))
                for it in items for j in range(sampling.n)]
        # A fully cached rerun takes its prompts from an earlier run rendered from the same inputs, so it loads no
        # tokenizer (and imports no transformers); anything missing means rendering and tokenizing now.
        renderer = _renderer()
        prompts = _recorded_prompts(store, protocol, ckpt, manifest.content_sha256, items, renderer)
        if prompts is not None:
            cached = store.cached_generations(ckpt.digest, protocol.sha256, keys, prompts.sha256s())
            if len(cached) < len(keys):
                prompts = None
    if prompts is None:
        prompts = _render_prompts(protocol, ckpt, items)
        cached = store.cached_generations(ckpt.digest, protocol.sha256, keys, prompts.sha256s())
    rendered, tokenized = prompts.rendered, prompts.tokenized
    missing = [k for k in keys if k not in cached]
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    params = effective_params(protocol)
    backend_info: dict[str, Any] = {"name": opts.backend, "options": backend_options,
                                    "chat_template_sha256": prompts.chat_template_sha256,
                                    "tokenizer": prompts.tokenizer_summary, "renderer": renderer,
                                    "prompts_from_run": prompts.from_run, "model_loaded": False}
    with store.session():
        manager.log_read(manifest, actor, opts.purpose, cached=not missing, checkpoint_digest=ckpt.digest,
                         protocol_hash=protocol.sha256, run_id=run_id, override_reason=opts.override_reason)
        store.upsert_checkpoint(ckpt.digest, str(ckpt.path), ckpt.kind, ckpt.train_run, ckpt.train_seed, ckpt.step)
        for stale in store.mark_interrupted_runs(socket.gethostname(), _pid_alive):
            print(f"note: run {stale} was left unfinished by a process that ended; marked interrupted",
                  file=sys.stderr)
        store.create_run({
            "run_id": run_id, "protocol_name": protocol.spec.name, "protocol_version": protocol.spec.version,
            "protocol_hash": protocol.sha256, "checkpoint_digest": ckpt.digest, "checkpoint_path": str(ckpt.path),
            "train_run": ckpt.train_run, "train_seed": ckpt.train_seed, "step": ckpt.step, "split": split,
            "tier": manifest.tier, "split_sha256": manifest.content_sha256, "sampling_seed": run_seed,
            "backend": opts.backend, "backend_info": backend_info,
            "effective_params": {**params.as_dict(), "n": sampling.n, "seed": run_seed,
                                 "per_sample_seed": "sha256(f'{seed}:{item_id}:{sample_index}')[:8] & (2**63-1)"},
            "actor": actor, "purpose": opts.purpose, "host": socket.gethostname(), "pid": os.getpid()})
        store.put_run_prompts(run_id, prompts.records, {r.sha256: r.text for r in rendered.values()})

    gen_s = 0.0
    try:
        if missing:
            by_item: dict[str, list[tuple[int, int]]] = defaultdict(list)
            for iid, j, s in missing:
                by_item[iid].append((j, s))
            requests = [GenerationRequest(iid, rendered[iid].text, tuple(j for j, _ in js), tuple(s for _, s in js),
                                          params, tokenized[iid].ids if iid in tokenized else None)
                        for iid, js in by_item.items()]
            backend = get_backend(opts.backend, str(ckpt.model_dir), tokenizer=prompts.tokenizer,
                                  **backend_options)
            bar = _progress(len(missing), "generate", opts.progress)
            new_tokens, g0 = [0], time.perf_counter()

            def store_result(res: GenerationResult) -> None:
                r = res.request
                prompt = rendered[r.key]
                rows: list[dict[str, Any]] = [
                    {"item_id": r.key, "sample_index": j, "seed": s, "prompt_sha256": prompt.sha256, "text": c.text,
                     "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                     "finish_reason": c.finish_reason}
                    for j, s, c in zip(r.sample_indices, r.seeds, res.completions, strict=True)]
                store.put_generations(ckpt.digest, protocol.sha256, rows, {prompt.sha256: prompt.text})
                for row in rows:
                    cached[(row["item_id"], row["sample_index"], row["seed"])] = {**row, "fresh": True}
                bar.update(len(rows))
                new_tokens[0] += sum(c.completion_tokens for c in res.completions)
                bar.set_postfix_str(f"{new_tokens[0] / max(time.perf_counter() - g0, 1e-9):.1f} tok/s")

            backend.generate(requests, on_result=store_result)
            gen_s = time.perf_counter() - g0
            bar.close()
            backend_info.update(backend.info(), model_loaded=True)
            still = [k for k in keys if k not in cached]
            if still:
                raise EvalgateError(f"backend {opts.backend} returned no completion for {len(still)} samples")

        items_by_id = {str(it["id"]): it for it in items}
        to_score = [SampleToScore(items_by_id[k[0]], cached[k]["text"], rendered[k[0]].response_prefix,
                                  cached[k]["finish_reason"]) for k in keys]
        s0 = time.perf_counter()
        results = []
        with _progress(len(to_score), "score", opts.progress) as sbar:
            for c in range(0, len(to_score), SCORE_CHUNK):
                results.extend(scorer.score(to_score[c:c + SCORE_CHUNK]))
                sbar.update(len(to_score[c:c + SCORE_CHUNK]))
        score_s = time.perf_counter() - s0
    except KeyboardInterrupt:
        store.fail_run(run_id, "stopped by the user (Ctrl-C); its stored generations are reused by the next "
                       "identical run", status="interrupted")
        raise
    except BaseException as e:
        store.fail_run(run_id, f"{type(e).__name__}: {e}")
        raise

    samples: list[dict[str, Any]] = []
    per_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (iid, j, seed), res in zip(keys, results, strict=True):
        g = cached[(iid, j, seed)]
        sample = {"item_id": iid, "sample_index": j, "seed": seed, "score": res.score, "status": res.status,
                  "extracted": res.extracted, "detail": res.detail, "cached": not g.get("fresh", False),
                  "behavior": sample_behavior(g["text"], g["completion_tokens"], g["finish_reason"],
                                              rule=protocol.spec.extraction.rule)}
        samples.append(sample)
        per_item[iid].append(sample)
    metrics = compute_metrics(protocol, per_item)
    new_tokens = sum(cached[k]["completion_tokens"] for k in missing)
    counts = {"items": len(items), "samples": len(keys), "generated": len(missing), "cached": len(keys) - len(missing),
              "by_status": {st: sum(1 for s in samples if s["status"] == st) for st in
                            sorted({s["status"] for s in samples})}}
    wall = time.perf_counter() - t0
    timing = {"wall_s": wall, "generate_s": gen_s, "score_s": score_s, "new_completion_tokens": new_tokens,
              "tokens_per_s": new_tokens / gen_s if gen_s > 0 else None}
    counts["timing"] = timing
    store.finish_run(run_id, samples, metrics, counts, wall)
    return {
        "run_id": run_id, "status": "complete",
        "protocol": {"name": protocol.spec.name, "version": protocol.spec.version, "sha256": protocol.sha256,
                     "path": str(protocol.path)},
        "checkpoint": {"path": str(ckpt.path), "digest": ckpt.digest, "kind": ckpt.kind,
                       "train_run": ckpt.train_run, "train_seed": ckpt.train_seed, "step": ckpt.step},
        "split": {"name": split, "tier": manifest.tier, "sha256": manifest.content_sha256, "items": len(items)},
        "backend": backend_info, "versions": _versions(),
        "effective_params": {**params.as_dict(), "n": sampling.n, "seed": run_seed},
        "metrics": metrics, "counts": counts, "warnings": warnings, "wall_s": wall,
    }
