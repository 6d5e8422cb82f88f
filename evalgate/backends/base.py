"""The backend contract: ``generate(requests) -> results``, and the registry of backends by name.

Every backend receives prompts rendered by evalgate and sampling values taken only from the protocol
(``EffectiveParams``); it returns, per request, one completion per requested seed with its text, completion token
count and finish_reason (``stop``: EOS or a stop sequence; ``length``: max_tokens reached). Heavy engines are
imported only when their backend is chosen.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate.errors import BadInput, MissingExtra


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
    """

    key: str
    prompt: str
    sample_indices: tuple[int, ...]
    seeds: tuple[int, ...]
    params: EffectiveParams
    prompt_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Completion:
    """One sample: text (stop sequence excluded), completion tokens, finish_reason ``stop`` or ``length``."""

    text: str
    completion_tokens: int
    finish_reason: str
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class GenerationResult:
    """Completions for one request, in the order of its seeds."""

    request: GenerationRequest
    completions: tuple[Completion, ...]


@runtime_checkable
class Backend(Protocol):
    """A generation engine.

    ``generate`` gets every pending request at once (so engines can batch) and may call ``on_result`` as each
    request finishes, so the caller can store results as they come (resume after a crash).
    """

    name: str

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]: ...

    def info(self) -> dict[str, Any]:
        """Engine name and library versions, recorded with the run."""
        ...


def sample_seed(protocol_seed: int, item_id: str, sample_index: int) -> int:
    """Per-sample seed: first 8 bytes of sha256(``"{protocol_seed}:{item_id}:{sample_index}"``) as an unsigned int,
    masked to 63 bits. Independent of batch composition and item order."""
    h = hashlib.sha256(f"{protocol_seed}:{item_id}:{sample_index}".encode()).digest()
    return int.from_bytes(h[:8], "big") & ((1 << 63) - 1)


# name -> (module, class, pip extra)
BACKENDS: dict[str, tuple[str, str, str]] = {
    "hf": ("evalgate.backends.hf", "HFBackend", "hf"),
    "vllm": ("evalgate.backends.vllm", "VLLMBackend", "vllm"),
    "openai": ("evalgate.backends.openai", "OpenAIBackend", "openai"),
}


class _Options(BaseModel):
    # strict: "abc" is not an int and true is not a number; an int is still accepted for a float
    model_config = ConfigDict(extra="forbid", strict=True)


class HFOptions(_Options):
    """Values the ``hf`` backend accepts (``HFBackend``'s arguments; defaults there)."""

    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$")
    dtype: Literal["float32", "bfloat16", "float16"] | None = None
    token_budget: int = Field(32768, ge=1)


class VLLMOptions(_Options):
    """Values the ``vllm`` backend accepts (``VLLMBackend``'s arguments)."""

    tensor_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    enforce_eager: bool = False


class OpenAIOptions(_Options):
    """Values the ``openai`` backend accepts (``OpenAIBackend``'s arguments). A model name or key that reads as a
    number (``model=7``) is taken as text."""

    model_config = ConfigDict(coerce_numbers_to_str=True)
    base_url: str | None = Field(None, pattern=r"^https?://")
    model: str | None = Field(None, strict=False)
    endpoint: Literal["completions", "chat"] = "completions"
    concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(5, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    use_n: bool = False
    api_key: str | None = Field(None, strict=False)


# name -> (engine package that must be importable, the options' model). Checked by ``check_backend`` before a run
# reads any split, so a typo or a bad value never spends a budgeted read; tests keep the models equal to the
# backends' signatures.
BACKEND_OPTION_MODELS: dict[str, tuple[str, type[_Options]]] = {
    "hf": ("transformers", HFOptions),
    "vllm": ("vllm", VLLMOptions),
    "openai": ("httpx", OpenAIOptions),
}
BACKEND_OPTIONS: dict[str, tuple[str, frozenset[str]]] = {
    name: (engine, frozenset(model.model_fields)) for name, (engine, model) in BACKEND_OPTION_MODELS.items()}


def _check_device(device: str) -> None:
    """A GPU device must exist here (imports torch, only for a device other than cpu)."""
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


def check_backend(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Validate a backend name and its options without importing the engine; returns the options as the backend
    takes them (only those given; a number given for a text option becomes text).

    Raises:
        BadInput: unknown backend, unknown option (lists the known ones), a value of the wrong type or out of
            range (``HFOptions``, ``VLLMOptions``, ``OpenAIOptions``), an hf GPU device this machine lacks, or the
            openai backend without a URL.
        MissingExtra: the engine package is not installed (names the pip extra).
    """
    if name not in BACKENDS:
        raise BadInput(f"unknown backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}")
    engine, known = BACKEND_OPTIONS[name]
    unknown = sorted(set(options) - known)
    if unknown:
        raise BadInput(f"unknown {name} backend option(s) {unknown}; known: {', '.join(sorted(known))}")
    try:
        checked = BACKEND_OPTION_MODELS[name][1].model_validate(options).model_dump(exclude_unset=True)
    except ValidationError as e:
        bad = "; ".join(f"{'.'.join(map(str, err['loc']))}={err.get('input')!r}: {err['msg']}" for err in e.errors())
        raise BadInput(f"bad {name} backend option value(s): {bad} (--backend-option KEY=VALUE)") from e
    if importlib.util.find_spec(engine) is None:
        raise MissingExtra(f"backend {name!r} needs {engine}: pip install 'evalgate[{BACKENDS[name][2]}]'")
    if name == "hf":
        _check_device(options.get("device", "cpu"))
    if name == "openai" and not (options.get("base_url") or os.environ.get("EVALGATE_OPENAI_BASE_URL")):
        raise BadInput("the openai backend needs the server's URL: pass base_url (e.g. --backend-option "
                       "base_url=http://127.0.0.1:8000/v1) or set EVALGATE_OPENAI_BASE_URL")
    return checked


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first occurrence of any stop sequence, and whether one occurred.

    OpenAI semantics: the returned text excludes the stop sequence.
    """
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def get_backend(name: str, model_dir: str, tokenizer: Any = None, **options: Any) -> Backend:
    """Instantiate backend ``name`` for a model directory.

    ``tokenizer``: the checkpoint's tokenizer the run already loaded; handed to backends whose class sets
    ``accepts_tokenizer = True`` (``hf``), so it is not loaded twice. Other backends ignore it.

    Raises:
        BadInput: unknown backend name (lists the known ones).
        MissingExtra: the backend's engine, or a module it needs, cannot be imported (a partial install, e.g. vllm
            without xgrammar): names the missing module and the pip extra.
    """
    if name not in BACKENDS:
        raise BadInput(f"unknown backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}")
    module, cls, extra = BACKENDS[name]
    try:
        factory: Callable[..., Backend] = getattr(importlib.import_module(module), cls)
        if tokenizer is not None and getattr(factory, "accepts_tokenizer", False):
            options = {**options, "tokenizer": tokenizer}
        return factory(model_dir, **options)  # a backend imports the rest of its engine here (vllm.LLM)
    except ImportError as e:
        missing = f"module {e.name!r} cannot be imported" if e.name else "an import failed"
        raise MissingExtra(f"backend {name!r}: {missing} ({e}); install the engine with its dependencies: "
                           f"pip install 'evalgate[{extra}]'") from e


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
        except yaml.YAMLError:
            out[key.strip()] = value
    return out
