"""Stage 1 of a run, ``prepare``: everything decided before any generation, as one ``RunPlan``.

Order: load and verify the protocol against its lock; construct the scorer and check the backend options and that
the backend serves what the scorer asks of it (a log-likelihood scorer needs a backend that scores continuations; any
may refuse, before any read); resolve the checkpoint; for an agentic protocol, check that its tools fit the backend
and the chat template (``evalgate.runner.agent.checks``); admit the read (the release grant, then the split's tier
policy; refusals are logged); read the items; render the prompts (or reuse an earlier run's); look every sample up
in the generation cache. Nothing is logged as read and no run is created here (``record.start`` does that), so
``parity`` reuses this stage with its own read.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.backends.base import BackendOptions, EffectiveParams, check_backend, check_request, sample_seed
from evalgate.backends.settings import generation_settings, settings_sha256
from evalgate.checkpoints.provenance import disagreements
from evalgate.checkpoints.resolve import Checkpoint, resolve_checkpoint
from evalgate.core.enums import Tier
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.keys.sealing import Sealer, sealer_for
from evalgate.protocol.spec import LoadedProtocol, load_protocol, verify
from evalgate.runner.grant import ReleaseGrant, check_release_purpose, refusal_ahead
from evalgate.runner.prompts import RunPrompts, recorded_prompts, render_prompts, renderer_versions
from evalgate.scoring import Scorer, get_scorer
from evalgate.scoring.base import scorer_request
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import RELEASE_GATE, Manifest, actor_name
from evalgate.store import Store

# (item_id, sample_index, per-sample seed): one sample of a run.
SampleKey = tuple[str, int, int]


@dataclass
class RunOptions:
    """What ``evaluate`` needs beyond protocol, checkpoint and split.

    Attributes:
        backend: backend name (``hf``, ...).
        seed: sampling seed; None uses the protocol's ``sampling.seed``.
        train_run, train_seed, step: training provenance of the checkpoint (else read from its directory).
        purpose: why the split is read (logged); ``release-gate`` needs ``grant``.
        actor: who reads (default: ``$EVALGATE_ACTOR`` or the OS user).
        override_reason: reason to exceed a soft budget (logged).
        backend_options: keyword options for the backend (device, dtype, token_budget, ...).
        progress: show progress bars on stderr; False also turns off transformers' and huggingface_hub's bars
            (model loading, GGUF conversion) for the run.
        grant: the gate's ``ReleaseGrant``; required for purpose ``release-gate`` and ignored otherwise.
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
    grant: ReleaseGrant | None = None


@dataclass(frozen=True)
class RunPlan:
    """A prepared run: what is evaluated, how, and which samples the cache already holds.

    Attributes:
        run_id: the new run's id (``YYYYmmddTHHMMSS-<8 hex>``).
        protocol, checkpoint, manifest: the verified protocol, resolved checkpoint and the split's manifest.
        items: the split's items, in file order.
        warnings: budget warnings of the read, and the checkpoint's (``checkpoints.disagreements``, the context
            length check skipped for a server).
        options: the caller's options; ``actor`` the resolved reader; ``backend_options`` as validated.
        settings: the generation settings (``backends.settings``); ``settings_sha256`` their hash, part of the
            cache key.
        scorer: the protocol's scorer.
        seed: the sampling seed; ``keys`` every sample of the run, item-major.
        params: the sampling values sent to the engine (from the protocol only).
        prompts: the run's prompts.
        cached: generations found in the cache, by sample key.
        store: the store; ``access`` the split manager that admitted the read (it logs the read).
        started: ``time.perf_counter()`` when preparation began.
    """

    run_id: str
    protocol: LoadedProtocol
    checkpoint: Checkpoint
    manifest: Manifest
    items: list[dict[str, Any]]
    warnings: list[str]
    options: RunOptions
    actor: str
    backend_options: BackendOptions
    settings: dict[str, Any]
    settings_sha256: str
    scorer: Scorer
    seed: int
    keys: list[SampleKey]
    params: EffectiveParams
    prompts: RunPrompts
    cached: dict[SampleKey, dict[str, Any]]
    store: Store
    access: SplitManager
    started: float

    @property
    def missing(self) -> list[SampleKey]:
        """The samples the cache does not hold, in key order."""
        return [k for k in self.keys if k not in self.cached]


def effective_params(protocol: LoadedProtocol) -> EffectiveParams:
    """The sampling values sent to the engine, taken only from the protocol."""
    s = protocol.spec.sampling
    return EffectiveParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
                           stop=tuple(s.stop), repetition_penalty=s.repetition_penalty)


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def check_items(items: list[dict[str, Any]], scorer: Scorer, split: str) -> None:
    """Every item holds the fields the scorer reads (``Scorer.required_fields``) and has no problem the scorer
    names (its optional ``item_problem``).

    Raises:
        BadInput: naming the first item and field missing, or the first item's problem (before any generation).
    """
    item_problem = getattr(scorer, "item_problem", None)
    for i, it in enumerate(items, 1):
        missing = [f for f in scorer.required_fields if f not in it]
        if missing:
            raise BadInput(f"split {split}: item {it.get('id')!r} (record {i}) has no field {missing[0]!r}, which "
                           f"the {scorer.name} scorer needs ({', '.join(scorer.required_fields)}); add it to the "
                           "split's data, or set the scorer's answer_field in the protocol")
        if item_problem is not None and (why := item_problem(it)):
            raise BadInput(f"split {split}: item {it.get('id')!r} (record {i}): {why}")


def _sealer(access: SplitManager, manifest: Manifest, opts: RunOptions, actor: str, ckpt: Checkpoint,
            protocol: LoadedProtocol) -> Sealer | None:
    """The Sealer of a sealed tier's run (``evalgate.keys.sealing``); no key refuses the read (logged)."""
    try:
        return sealer_for(manifest.tier, access.store.env)
    except RefusedByPolicy as e:
        access.refuse(manifest.name, opts.purpose, actor, f"split {manifest.name} (tier {manifest.tier}): {e.message}",
                      checkpoint_digest=ckpt.digest, protocol_hash=protocol.sha256)


def _read_split(access: SplitManager, split: str, opts: RunOptions, actor: str, ckpt: Checkpoint,
                protocol: LoadedProtocol, limit: int | None
                ) -> tuple[Manifest, list[dict[str, Any]], list[str], Sealer | None]:
    """Admit and read the split (not yet logged as read); refusals are logged by the checks."""
    reserved = check_release_purpose(opts.purpose, opts.grant, split, access, actor, ckpt.digest, protocol.sha256)
    manifest, warnings = access.check(split, opts.purpose, actor, opts.override_reason, ckpt.digest,
                                      protocol.sha256, reserved=reserved)
    seal = _sealer(access, manifest, opts, actor, ckpt, protocol)
    items = access.read(manifest)[:limit] if limit else access.read(manifest)
    if not items:
        raise BadInput(f"split {split} has no items")
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return manifest, items, warnings, seal


def check_context(protocol: LoadedProtocol, ckpt: Checkpoint, backend: str,
                  prompt_tokens: dict[str, int] | None = None) -> str | None:
    """Refuse a run whose prompt plus ``max_tokens`` cannot fit the checkpoint's context length.

    Called twice by ``prepare``: before the split is read, with ``max_tokens`` alone (a prompt has at least one
    token), then with each item's prompt tokens once they are rendered (still before anything is logged or
    generated). Beyond the context an engine refuses the request or generates garbage past its trained positions;
    either way the run's numbers would be wrong.

    Args:
        protocol: the loaded protocol (``sampling.max_tokens``: completion tokens per sample).
        ckpt: the resolved checkpoint (its ``config.json``: ``checkpoints.context_length``).
        backend: the backend name; only one whose registry entry has ``context == "checkpoint"`` is checked.
        prompt_tokens: item id -> prompt length in tokens; None: the check before the read.

    Returns:
        A warning when the check does not apply (a server's backend: its limit is not known here), else None.

    Raises:
        BadInput: naming max_tokens, the context length and its source (and the item and its prompt length).
    """
    from evalgate.backends.base import backend_entry
    from evalgate.checkpoints.model import context_length

    mode = backend_entry(backend).context
    found = context_length(ckpt.model_dir) if mode != "none" else None
    if found is None:
        return None
    ctx, src = found
    max_tokens = protocol.spec.sampling.max_tokens
    if mode == "server":
        return (f"context length not checked: the {backend} server decides it, not known here (the checkpoint's "
                f"{src} is {ctx}; max_tokens is {max_tokens})") if prompt_tokens is None else None
    fix = "lower sampling.max_tokens in the protocol (and bump its version)"
    if prompt_tokens is None:
        if max_tokens >= ctx:
            raise BadInput(f"protocol {protocol.ref}: sampling.max_tokens {max_tokens} leaves no room for a prompt "
                           f"in the checkpoint's context of {ctx} tokens ({src}, {ckpt.model_dir}); {fix}")
        return None
    if prompt_tokens:
        item, longest = max(prompt_tokens.items(), key=lambda kv: kv[1])
        if longest + max_tokens > ctx:
            raise BadInput(f"protocol {protocol.ref}: item {item!r}'s prompt of {longest} tokens + sampling."
                           f"max_tokens {max_tokens} = {longest + max_tokens} exceeds the checkpoint's context of "
                           f"{ctx} tokens ({src}, {ckpt.model_dir}); {fix}, or shorten the prompt")
    return None


def _refuse_ahead(access: SplitManager, split: str, opts: RunOptions, actor: str, checkpoint: str | Path,
                  protocol: LoadedProtocol, store: Store) -> None:
    """Refuse (logged) a read that the tier's purposes, a spent hard budget or a missing release grant will refuse,
    before the checkpoint is verified byte by byte (a GGUF re-converted: minutes). The refusal row names the
    checkpoint's digest as resolved without that check; a refused read grounds no trust decision."""
    why = (refusal_ahead(opts.grant, split) if opts.purpose == RELEASE_GATE
           else access.refusal_ahead(split, opts.purpose))
    if why:
        ckpt = resolve_checkpoint(checkpoint, opts.train_run, opts.train_seed, opts.step, store.recorded_checkpoint,
                                  verify=False, env=store.env)
        access.refuse(split, opts.purpose, actor, why, checkpoint_digest=ckpt.digest, protocol_hash=protocol.sha256)


def prepare(protocol_path: str | Path, checkpoint: str | Path | Checkpoint, split: str, options: RunOptions,
            store: Store, limit: int | None = None) -> RunPlan:
    """Stage 1: check everything, read the split, render prompts and look the samples up in the cache.

    Args:
        protocol_path: protocol YAML (must match its ``.lock``).
        checkpoint: HF directory, GGUF file, or a resolved Checkpoint.
        split: split name.
        options: RunOptions.
        store: the Store (default ``$EVALGATE_HOME``; opened only after protocol and checkpoint are valid).
        limit: use only the first ``limit`` items (``parity``).

    Raises:
        BadInput, ProtocolDrift, RefusedByPolicy: as ``evaluate`` (nothing but a refusal is written).
    """
    started = time.perf_counter()
    protocol = load_protocol(protocol_path)
    verify(protocol)
    scorer = get_scorer(protocol)  # before any read or generation: a scorer may refuse the protocol
    backend_options = check_backend(options.backend, options.backend_options)  # a typo must not spend a read
    request = scorer_request(protocol.spec.scorer.name)
    check_request(options.backend, request)  # a backend that cannot score log-likelihoods: refused before the read
    actor, access = actor_name(options.actor, env=store.env), SplitManager(store)
    manifest = access.manifest(split)  # a typo'd split name is refused before a GGUF's one-time conversion
    tier = manifest.tier
    # Only smoke and dev runs may take a file's digest from the stat-keyed cache: its entries are unauthenticated
    # (docs/SECURITY.md), and runs on the other tiers are what re-reads and the gate trust.
    trust = tier not in (Tier.SMOKE, Tier.DEV) or options.purpose == RELEASE_GATE
    if trust and not isinstance(checkpoint, Checkpoint):  # a read bound to be refused costs no re-hash/re-conversion
        _refuse_ahead(access, split, options, actor, checkpoint, protocol, store)
    # a resolved Checkpoint is the caller's (sweep, watch, tests): in-process code is trusted (docs/SECURITY.md)
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else resolve_checkpoint(
        checkpoint, options.train_run, options.train_seed, options.step, store.recorded_checkpoint, verify=trust,
        env=store.env)
    if protocol.spec.tools.agentic:  # backend, chat template and tools must fit before the read is admitted
        from evalgate.runner.agent.checks import check_agentic_setup

        check_agentic_setup(protocol, options.backend, ckpt.model_dir)
    context_note = check_context(protocol, ckpt, options.backend)  # before the read: no read spent on a typo
    sampling = protocol.spec.sampling
    seed = sampling.seed if options.seed is None else options.seed
    if (before_read := getattr(scorer, "before_read", None)) is not None:  # the judge: its path, its baseline run
        before_read(protocol, store, manifest, ckpt.digest, seed)
    settings = generation_settings(options.backend, backend_options, request)
    settings_hash = settings_sha256(settings)
    # Store work runs in one session (one open connection, see Store.session); the tokenizer, when needed, is
    # loaded after it, so the store's lock is never held while it loads.
    with store.session():
        store.record_protocol(protocol.spec.name, protocol.spec.version, protocol.sha256, protocol.resolved)
        manifest, items, warnings, seal = _read_split(access, split, options, actor, ckpt, protocol, limit)
        for w in disagreements(ckpt.provenance) + ([context_note] if context_note else []):
            print(f"warning: checkpoint {ckpt.path}: {w}", file=sys.stderr)
            warnings.append(w)
        check_items(items, scorer, split)
        keys = [(str(it["id"]), j, sample_seed(seed, str(it["id"]), j)) for it in items for j in range(sampling.n)]
        # A fully cached rerun takes its prompts from an earlier run rendered from the same inputs, so it loads no
        # tokenizer (and imports no transformers); anything missing means rendering and tokenizing now.
        renderer = renderer_versions()
        prompts = recorded_prompts(store, protocol, ckpt, manifest.content_sha256, items, renderer)
        cached = store.cached_generations(ckpt.digest, protocol.sha256, keys, prompts.sha256s(),
                                          settings_hash) if prompts else {}
        if prompts is not None and len(cached) < len(keys):
            prompts = None
    if prompts is None:
        prompts = render_prompts(protocol, ckpt, items, renderer, seal.digest if seal else None)
        cached = store.cached_generations(ckpt.digest, protocol.sha256, keys, prompts.sha256s(), settings_hash)
    lengths = {iid: len(t.ids) for iid, t in prompts.tokenized.items()} or {
        r["item_id"]: r["prompt_tokens"] for r in prompts.records if r.get("prompt_tokens") is not None}
    check_context(protocol, ckpt, options.backend, lengths)
    return RunPlan(new_run_id(), protocol, ckpt, manifest, items, warnings, options, actor, backend_options, settings,
                   settings_hash, scorer, seed, keys, effective_params(protocol), prompts, cached, store, access,
                   started)
