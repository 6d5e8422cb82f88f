"""Frozen evaluation protocols: pydantic models of protocol files, canonical hash, freeze, verify, diff.

A protocol file (YAML) fixes *how* a model is evaluated: prompt and chat template, sampling, pass@k, scorer,
answer extraction, tool permissions and execution limits. Its identity is ``name@version`` plus a sha256 over the
canonical JSON of the resolved protocol (template and few-shot files inlined, file paths dropped), so moving a
template file keeps the hash and editing one byte of it changes the hash.

``freeze`` writes ``<file>.lock`` (JSON: name, version, sha256, resolved content of the current version, and
``versions``: every ``name@version -> sha256`` the lock ever froze, appended to, never rewritten). A run refuses a
protocol whose content no longer matches its lock, and a lock whose fields disagree with its own sha256 (an edited
``resolved`` or name@version); the lock's ``versions`` and the store's record refuse changed content under a
version that was already used.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from evalgate.core.errors import BadInput, ProtocolDrift
from evalgate.core.fileio import iter_jsonl, read_text
from evalgate.core.models import StrictModel
from evalgate.core.results import ReadByKey, Result
from evalgate.core.userfiles import SIMPLE_NAME, FieldProblem, format_validation_error, load_yaml_mapping, yaml_line
from evalgate.scoring.extract import RULES

if TYPE_CHECKING:
    from evalgate.scoring.base import ScorerOptions

LOCK_SUFFIX = ".lock"
LOCK_FORMAT = 2
"""The lock file's format: 1 (no ``format`` key) held the current version only; 2 adds ``versions``."""


class PromptSpec(StrictModel):
    """How an item becomes the text sent to the engine."""

    template: str | None = None
    """Inline jinja2 template for the user turn; item fields are variables (``{{ prompt }}``). Rendered in jinja2's
    immutable sandbox; a name starting with ``_`` is refused at load. Exactly one of ``template`` /
    ``template_file`` is required. Default: none."""
    template_file: str | None = None
    """Path (relative to the protocol file) of a jinja2 template file; its content is inlined into the hash
    and the path is not, so moving the file keeps the hash. Default: none."""
    chat_template: str = "model"
    """``model``: wrap the user turn with the checkpoint tokenizer's chat template; ``none``: send the rendered
    template as raw text; any other value: path of a jinja2 chat template file, relative to the protocol file
    (inlined into the hash). Default: model."""
    system_prompt: str | None = None
    """System message text, or none. Default: none."""
    system_role: Literal["merge", "fail"] = "merge"
    """When the chat template rejects or drops a system role: ``merge`` prepends the system text to the first user
    turn, ``fail`` stops the run with an error. The system text is never dropped silently. Default: merge."""
    fewshot_file: str | None = None
    """JSONL file of few-shot exemplars, one JSON object a line, relative to the protocol file; inlined into
    the hash. Each exemplar is rendered by ``template`` as a user turn and answered, as an assistant turn, by
    its ``fewshot_target_field``; they precede the item, in file order. Default: none."""
    fewshot_target_field: str = "target"
    """Field of a few-shot record holding the assistant's answer. Default: ``target``."""
    response_prefix: str | None = None
    """jinja2 template appended after the generation prompt (the start of the assistant turn, e.g. an opened code
    block and the function signature); the completion continues it. Default: none."""


class SamplingSpec(StrictModel):
    """Sampling parameters. These are the only values sent to the engine: a checkpoint's
    ``generation_config.json`` and engine defaults never apply."""

    temperature: float = Field(0.0, ge=0.0)
    """Softmax temperature (logits are divided by it), >= 0; 0 means greedy decoding. Default: 0."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass in (0, 1]; 1 disables. Default: 1."""
    top_k: int = Field(0, ge=0)
    """Keep the k most likely tokens (a count of tokens); 0 disables. Default: 0."""
    max_tokens: int = Field(256, ge=1)
    """Maximum completion length in tokens; a completion that reaches it has finish_reason ``length``.
    Default: 256."""
    stop: list[str] = []
    """Stop sequences, applied by the engine while it generates; the returned text excludes them. Choose sequences
    that cannot occur inside an answer (e.g. not ``.``, which would cut ``2.5``). Default: none."""
    n: int = Field(1, ge=1)
    """Samples per item (a count, >= 1). Default: 1."""
    seed: int = Field(0, ge=0, le=2**63 - 1)
    """Protocol sampling seed (an integer from 0 to 2**63-1, stored as a signed 64-bit integer; ``evalgate run
    --seed`` overrides it per run). Each sample's seed
    is derived from (seed, item id, sample index), so a sample does not change when items are reordered or
    batched differently. Default: 0."""
    repetition_penalty: float = Field(1.0, gt=0.0)
    """Repetition penalty, a logit divisor > 0 for tokens already present (CTRL, Keskar et al. 2019); 1 disables.
    Default: 1."""
    allow_greedy_n: bool = False
    """Allow n > 1 with temperature 0 (all n samples are then identical). Default: false."""

    @model_validator(mode="after")
    def _greedy_n(self) -> SamplingSpec:
        """Greedy decoding (``temperature: 0``) with ``n > 1`` is rejected unless ``allow_greedy_n: true``."""
        if self.temperature == 0 and self.n > 1 and not self.allow_greedy_n:
            raise FieldProblem(
                "n",
                f"temperature 0 (greedy) with n={self.n} gives {self.n} identical samples; "
                "set temperature > 0, set n: 1, or set allow_greedy_n: true",
            )
        return self


class ScorerSpec(StrictModel):
    """Which scorer judges a completion, by registry name, and its options."""

    name: str
    """A scorer registered in ``scoring.base.SCORERS`` (a plugin's through the ``evalgate.scorers`` entry-point
    group), e.g. ``humaneval`` (run the item's unit tests), ``math`` (math-verify equivalence), ``exact``
    (normalised exact match); every scorer: ``docs/SCORERS.md``. Checked at load. Required."""
    options: dict[str, Any] = {}
    """Scorer-specific options, checked at load against the scorer's options model (unknown keys and wrong types
    are errors). Each scorer's options, with type, default and meaning: ``docs/SCORERS.md``. Default: none."""


class ExtractionSpec(StrictModel):
    """How the answer is taken from a completion."""

    rule: Annotated[str, RULES] = "raw"
    """A rule registered in ``scoring.extract.RULES`` (a plugin's through the ``evalgate.extract_rules`` entry-point
    group): ``code``: the program (prefix + completion, fenced block if present); ``boxed``: the last
    ``\\boxed{}`` (boxes joined by "or", "and" or "," as one answer); ``last_number``: the last number; ``gsm8k``:
    what the last ``####`` or "The answer is" states (several numbers in it as written, so a hedge ``2 or 3`` equals
    neither), else the last number; ``mmlu_pro``: MMLU-Pro's letter (the first "answer is (X)", else "answer: X",
    else the last standalone letter A-J); ``mmlu_pro_l1``: its first pattern alone; ``raw``: the whole completion.
    Default: raw."""
    score_truncated: bool = False
    """Score completions cut off by max_tokens (finish_reason ``length``). Default: false, they count as truncated
    and wrong."""


ReasoningFormat = Literal["think", "thinking", "reasoning", "kimi", "magistral", "harmony"]


class ReasoningSpec(StrictModel):
    """How a reasoning model's reasoning block is handled before the answer is extracted
    (``evalgate.scoring.reasoning``). Left out of the hash at its default, so protocols frozen before this section
    keep their sha256."""

    strip: list[ReasoningFormat] = ["think"]
    """Reasoning formats removed from every completion before extraction and scoring, tried in order (the first
    found decides): ``think`` (``<think>``...``</think>``: DeepSeek-R1, Qwen3, QwQ), ``thinking``
    (``<thinking>``), ``reasoning`` (``<reasoning>``), ``kimi`` (``◁think▷``...``◁/think▷``), ``magistral``
    (``[THINK]``...``[/THINK]``), ``harmony`` (gpt-oss: the ``analysis`` channel removed, the ``final`` channel
    kept). A block opened and never closed yields no answer from the draft (status ``no_answer``, or
    ``truncated`` when cut at max_tokens); the run record counts such samples (``counts.reasoning``). ``[]``
    scores the whole completion. Default: ``[think]``, as lighteval's ``remove_reasoning_tags``."""


class ToolSpec(StrictModel):
    """One tool offered to the model: what it is told, and which registered implementation runs a call."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    """The name the model calls (letters, digits, ``_``, ``.``, ``-``). Required."""
    description: str | None = None
    """What the model is told the tool does. Default: none, the implementation's description."""
    parameters: dict[str, Any] | None = None
    """JSON Schema of the call's arguments (checked at load as JSON Schema; each call's arguments are validated
    against it). Default: none, the implementation's schema."""
    implementation: str | None = None
    """Registered tool that runs a call (``evalgate.tools``: ``python``, ``calculator``, ``read_file``,
    ``write_file``, ``http_get``, or a task's entry point in the group ``evalgate.tools``). Default: none, the
    tool's ``name``."""


class ToolPermissions(StrictModel):
    """Tools offered to the model during an agentic evaluation, and what it may do with them. A protocol that
    offers no tool is single-turn; the fields below ``memory_mb`` leave the hash when at their default, so
    protocols frozen before them keep their sha256."""

    allowed: list[str] = []
    """Names of tools the model may call; each must be offered. A call to any other name is a violation
    (``disallowed_tool``). Default: none."""
    network: bool = False
    """Whether tools and executed code may use the network; ``http_get`` without it is a violation
    (``network``). Default: false."""
    timeout_s: float = Field(10.0, gt=0)
    """Per-call timeout in seconds. Default: 10."""
    max_calls: int = Field(0, ge=0)
    """Maximum tool calls per sample (a count); the call after the last one allowed is a violation
    (``call_budget``). Default: 0."""
    memory_mb: int = Field(1024, ge=16)
    """Memory limit per ``python`` call (RLIMIT_AS), MiB. Default: 1024."""
    offered: list[ToolSpec] = []
    """The tools shown to the model (name, description, parameters, implementation). Default: none, meaning
    each ``allowed`` tool with its registered description and schema."""
    format: Literal["text", "hermes", "llama3", "openai"] = "text"
    """How the model calls a tool: ``text``: a fenced ````python`` block is a call to ``python`` (program-aided
    style), its output the next user turn; ``hermes``: ``<tool_call>{"name", "arguments"}</tool_call>`` (Hermes,
    Qwen), the tools given to the chat template (``apply_chat_template(tools=...)``); ``llama3``: a JSON object
    ``{"name", "parameters"}`` as the whole reply (Llama 3.1), tools given to the chat template; ``openai``: the
    openai backend's ``tools`` / ``tool_calls``. With ``prompt.chat_template: none`` no template shows the tools:
    the prompt template must describe them. Default: text."""
    max_turns: int = Field(4, ge=1)
    """Model turns per sample (a count); a sample still calling tools at the last turn ends with status
    ``max_turns``. Default: 4."""
    cpu_s: int = Field(10, ge=1)
    """CPU-time limit per ``python`` call (RLIMIT_CPU), seconds. Default: 10."""
    task_dir: str | None = None
    """The file-system scope of ``read_file`` / ``write_file``: a directory relative to the protocol file (its
    files' content is in the hash). A path leaving it is a violation (``fs_scope``). Default: none, no file
    access."""
    fs_write: bool = False
    """Whether files in ``task_dir`` may be written; writing without it is a violation (``fs_write``). With it,
    each sample reads and writes a copy of its own of the directory, made at its first turn and removed when it
    ends: the directory itself is never written, and no sample sees another's files. Default: false (read-only, the
    directory read in place)."""
    violation: Literal["refuse", "end"] = "refuse"
    """What a violation does: ``refuse``: the call is not executed, the model gets an error message and the turn
    counts; ``end``: the sample ends with status ``tool_violation`` (score 0). Default: refuse."""

    @property
    def agentic(self) -> bool:
        """Whether any tool is offered (the run is then multi-turn)."""
        return bool(self.offered or self.allowed)

    @model_validator(mode="after")
    def _consistent(self) -> ToolPermissions:
        """Offered names are unique; every allowed tool is offered; file access needs a task directory."""
        names = [t.name for t in self.offered]
        if len(set(names)) != len(names):
            raise FieldProblem("offered", f"tools.offered names a tool twice ({names}); list each once")
        if self.offered:
            extra = [a for a in self.allowed if a not in names]
            if extra:
                raise FieldProblem("allowed", f"tools.allowed names {extra}, which tools.offered does not "
                                   f"offer ({names}); offer them or drop them from allowed")
        if self.fs_write and self.task_dir is None:
            raise FieldProblem("fs_write", "tools.fs_write grants writing but tools.task_dir is not set; "
                               "set the task directory or drop fs_write")
        return self


class ExecutionLimits(StrictModel):
    """Limits for executing model-written code (the ``humaneval`` scorer)."""

    timeout_s: float = Field(10.0, gt=0)
    """Wall-clock timeout per program, seconds. Default: 10."""
    cpu_s: int = Field(10, ge=1)
    """CPU-time limit per program (RLIMIT_CPU), seconds. Default: 10."""
    memory_mb: int = Field(1024, ge=64)
    """Address-space limit per program (RLIMIT_AS), MiB. Default: 1024."""
    file_size_mb: int = Field(16, ge=1)
    """Largest file a program may write (RLIMIT_FSIZE), MiB. Default: 16."""
    workers: int = Field(0, ge=0)
    """Programs run in parallel (a count); 0 means one per CPU core. Default: 0."""
    isolation: Literal["best-effort", "strict"] = "best-effort"
    """``strict``: refuse to run (exit 2) unless the code sandbox has every isolation layer (docs/SANDBOX.md);
    ``best-effort``: run with what the machine provides; the run record lists the missing layers. Default:
    best-effort (left out of the protocol's hash, so protocols frozen before this field keep their sha256)."""


class Protocol(StrictModel):
    """A protocol file. Identity: ``name@version`` plus the sha256 of its resolved canonical JSON."""

    name: str = Field(pattern=SIMPLE_NAME)
    """Protocol name (letters, digits, ``.``, ``_``, ``-``). Required."""
    version: str = Field(pattern=SIMPLE_NAME)
    """Protocol version (same characters as ``name``; quote it in YAML, ``"1"``); bump it whenever the content
    changes. Required."""
    description: str = ""
    """Free text; part of the hash. Default: empty."""
    prompt: PromptSpec
    """Prompt and chat template handling (section ``prompt`` below). Required."""
    sampling: SamplingSpec = SamplingSpec()
    """Sampling parameters sent to the engine (section ``sampling``). Default: every sampling default."""
    pass_at_k: list[int] = [1]
    """k values for pass@k; every k must be <= sampling.n. Default: [1]."""
    scorer: ScorerSpec
    """Scorer and its options (section ``scorer``). Required."""
    extraction: ExtractionSpec = ExtractionSpec()
    """Answer extraction rules (section ``extraction``). Default: every extraction default."""
    tools: ToolPermissions = ToolPermissions()
    """Tool permissions (section ``tools``). Default: no tools, no network."""
    execution: ExecutionLimits = ExecutionLimits()
    """Code execution limits (section ``execution``). Default: every execution default."""
    reasoning: ReasoningSpec = ReasoningSpec()
    """Reasoning blocks removed before extraction (section ``reasoning``). Default: ``<think>`` blocks removed."""

    @model_validator(mode="after")
    def _check(self) -> Protocol:
        """Exactly one of ``prompt.template`` / ``prompt.template_file``; every k in ``pass_at_k`` is between 1
        and ``sampling.n``, listed once."""
        if (self.prompt.template is None) == (self.prompt.template_file is None):
            raise FieldProblem("prompt", "give exactly one of template / template_file")
        bad = [k for k in self.pass_at_k if k < 1 or k > self.sampling.n]
        if bad:
            raise FieldProblem(
                "pass_at_k",
                f"pass_at_k {bad} exceed sampling.n={self.sampling.n} (or are < 1): pass@k needs k <= n samples; "
                "raise sampling.n or drop those k",
            )
        if len(set(self.pass_at_k)) != len(self.pass_at_k):
            raise FieldProblem("pass_at_k", "pass_at_k has repeated values; list each k once")
        return self

    @property
    def ref(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"


@dataclass(frozen=True)
class LoadedProtocol:
    """A validated protocol with its resolved content and hash.

    Attributes:
        path: the protocol file.
        spec: the validated model.
        resolved: canonical dict (template, chat template and few-shot files inlined, paths dropped).
        sha256: hex sha256 of ``canonical_json(resolved)``.
        template: the user-turn jinja2 source.
        chat_template: ``"model"``, ``"none"`` or the chat template source.
        fewshot: few-shot records (possibly empty).
        scorer_options: ``scorer.options`` validated into the scorer's options model (``scoring.base``).
        tools: the offered tools, resolved (name, description, parameters, implementation); empty when the
            protocol offers none (single-turn).
        task_dir: ``tools.task_dir`` as an absolute path, or None.
    """

    path: Path
    spec: Protocol
    resolved: dict[str, Any]
    sha256: str
    template: str
    chat_template: str
    fewshot: tuple[dict[str, Any], ...]
    scorer_options: ScorerOptions
    tools: tuple[dict[str, Any], ...] = ()
    task_dir: Path | None = None

    @property
    def ref(self) -> str:
        return self.spec.ref

    @property
    def lock_path(self) -> Path:
        return lock_path_for(self.path)


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept, floats as Python's shortest repr."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lock_path_for(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def _read_file(base: Path, rel: str, what: str) -> str:
    p = (base / rel).resolve()
    if not p.is_file():
        raise BadInput(f"{what} '{rel}' not found (looked at {p}); fix the path in the protocol file")
    return read_text(p)


def _read_fewshot(base: Path, rel: str, target_field: str) -> list[dict[str, Any]]:
    """Few-shot exemplars of a JSONL file, in file order; each must be an object holding ``target_field``."""
    where = base / rel
    out: list[dict[str, Any]] = []
    for i, record in iter_jsonl(_read_file(base, rel, "fewshot_file"), where, "fix that line"):
        if not isinstance(record, dict) or target_field not in record:
            raise BadInput(f"{where}:{i}: a few-shot exemplar must be a JSON object with the answer in "
                           f"{target_field!r} (prompt.fewshot_target_field); add it or change that field")
        out.append(record)
    return out


def _check_scorer(path: Path, text: str, spec: Protocol) -> ScorerOptions:
    """Refuse at load (so before ``freeze``) an unknown scorer name, options its options model does not accept, and
    a protocol the scorer cannot score (its ``check_protocol``, e.g. the math scorer's stop sequences).

    Returns:
        ``scorer.options`` validated into the scorer's options model.

    Raises:
        BadInput: naming the file, line, field and the known scorers or the nearest known option.
    """
    from evalgate.scoring.base import SCORERS

    if spec.scorer.name not in SCORERS:
        line = yaml_line(text, ("scorer", "name"))
        raise BadInput(f"{path}:{line or '?'}: scorer.name: {SCORERS.unknown(spec.scorer.name).message}")
    entry = SCORERS[spec.scorer.name]
    try:
        options = entry.options_model().model_validate(spec.scorer.options)
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, entry.options_model(),
                                               f"{spec.scorer.name} scorer options in protocol",
                                               ("scorer", "options"))) from e
    check = getattr(entry.load(), "check_protocol", None)
    if check is not None:
        try:
            check(spec, options)
        except FieldProblem as e:
            line = yaml_line(text, tuple(e.field.split(".")))
            raise BadInput(f"{path}:{line or '?'}: {e.field}: {e} (scorer {spec.scorer.name})") from e
    return options


def _check_templates(path: Path, spec: Protocol, template: str, chat: str,
                     fewshot: Sequence[dict[str, Any]]) -> None:
    """Refuse at load what would otherwise only fail at run time: jinja2 syntax errors in the templates, and a
    few-shot exemplar the prompt template cannot render (a field it uses is missing; exemplars are rendered by
    the same template as items, with undefined fields as errors).

    Raises:
        BadInput: naming the file, the field and the template error or the exemplar.
    """
    import jinja2

    env = template_environment()
    sources = [("prompt.template", template), ("prompt.response_prefix", spec.prompt.response_prefix or "")]
    if chat not in ("model", "none"):
        sources.append(("prompt.chat_template", chat))
    for field, source in sources:
        try:
            ast = env.parse(source)
        except jinja2.TemplateSyntaxError as e:
            raise BadInput(f"{path}: {field}: jinja2 syntax error at template line {e.lineno}: {e.message}; "
                           "fix the template") from e
        private = _private_names(ast)
        if private:
            raise BadInput(f"{path}: {field}: the template names {', '.join(repr(n) for n in private)}: a name "
                           "starting with '_' reaches Python's internals (a template could read the process "
                           "environment, where the private key may be, or run code); templates are rendered in "
                           "jinja2's sandbox, which refuses them; use the item's fields")
    if not fewshot:
        return
    compiled = env.from_string(template)  # parsed above: compiled only to render the exemplars
    for i, shot in enumerate(fewshot, 1):
        try:
            compiled.render(**shot)
        except jinja2.TemplateError as e:
            msg = e.message if isinstance(e, jinja2.UndefinedError) else f"{type(e).__name__}: {e}"
            raise BadInput(f"{path}: prompt.fewshot_file: exemplar {i} of {spec.prompt.fewshot_file} cannot be "
                           f"rendered by prompt.template ({msg}; its fields: {', '.join(sorted(shot))}); add the "
                           "field to every exemplar or change the template") from e


@functools.lru_cache(maxsize=1)
def template_environment() -> Any:
    """The jinja2 environment every protocol template is compiled and rendered in: jinja2's immutable sandbox
    (``jinja2.sandbox.ImmutableSandboxedEnvironment``, as transformers renders chat templates), strict about undefined
    names, no autoescape. A plain environment let a template reach any Python object from a jinja global
    (``cycler.__init__.__globals__.os.environ``: the process environment, ``EVALGATE_PRIVATE_KEY`` in CI, rendered
    into every prompt; ``''.__class__.__mro__[1].__subclasses__()``: a way to run code); the sandbox raises
    ``jinja2.sandbox.SecurityError`` at such an access, and at any call that mutates a value (``list.append``)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                         autoescape=False)


def _private_names(ast: Any) -> list[str]:
    """The attribute or item names starting with ``_`` that a parsed template names literally (``x.__class__``,
    ``x['__globals__']``), in order, once each; a name computed at render time is left to the sandbox."""
    from jinja2 import nodes

    found = [n.attr for n in ast.find_all(nodes.Getattr)]
    found += [n.arg.value for n in ast.find_all(nodes.Getitem) if isinstance(n.arg, nodes.Const)
              and isinstance(n.arg.value, str)]
    return list(dict.fromkeys(name for name in found if name.startswith("_")))


# Later fields of the ``tools`` section: left out of the hash at their default (like
# ``execution.isolation``), so protocols frozen before them keep their sha256.
_NEW_TOOL_FIELDS = ("offered", "format", "max_turns", "cpu_s", "task_dir", "fs_write", "violation")


def _check_tools(path: Path, text: str, spec: Protocol) -> tuple[tuple[dict[str, Any], ...], Path | None]:
    """Resolve the offered tools against the tool registry and refuse, at load, a tool the registry lacks, a
    ``parameters`` schema that is not valid JSON Schema (Draft 2020-12 meta-schema), a missing task directory, and
    a file tool offered without one.

    Returns:
        The offered tools (name, description, parameters, implementation: defaults from the registry) and the
        task directory (absolute) or None.

    Raises:
        BadInput: naming the file, line and field.
    """
    import jsonschema

    from evalgate.tools import get_tool

    t = spec.tools
    task_dir = None
    if t.task_dir is not None:
        task_dir = (path.parent / t.task_dir).resolve()
        if not task_dir.is_dir():
            line = yaml_line(text, ("tools", "task_dir"))
            raise BadInput(f"{path}:{line or '?'}: tools.task_dir: {t.task_dir!r} is not a directory (looked at "
                           f"{task_dir}); create it or fix the path")
    specs = list(t.offered) or [ToolSpec(name=a) for a in t.allowed]
    out = []
    for i, ts in enumerate(specs):
        where = ("tools", "offered", i) if t.offered else ("tools", "allowed", i)
        try:
            impl = get_tool(ts.implementation or ts.name)
        except BadInput as e:
            line = yaml_line(text, (*where, "implementation") if ts.implementation else where)
            raise BadInput(f"{path}:{line or '?'}: {'.'.join(map(str, where))}: {e}") from e
        params = impl.parameters if ts.parameters is None else ts.parameters
        try:
            _check_schema(params)
        except jsonschema.SchemaError as e:
            line = yaml_line(text, (*where, "parameters", *e.path))
            raise BadInput(f"{path}:{line or '?'}: {'.'.join(map(str, where))}.parameters: not a valid JSON Schema: "
                           f"{e.message} (at {'/'.join(map(str, e.path)) or 'the top'}); fix the schema") from e
        if impl.check is not None and impl.name in ("read_file", "write_file") and task_dir is None:
            line = yaml_line(text, where)
            raise BadInput(f"{path}:{line or '?'}: {'.'.join(map(str, where))}: tool {ts.name!r} reads or writes "
                           "files but tools.task_dir is not set; set the task directory or drop the tool")
        out.append({"name": ts.name, "description": ts.description or impl.description, "parameters": params,
                    "implementation": impl.name})
    return tuple(out), task_dir


_SCHEMAS_CHECKED: set[str] = set()
"""The ``repr`` of every tool parameter schema found valid in this process."""


def _check_schema(params: Any) -> None:
    """``jsonschema.Draft202012Validator.check_schema`` once per distinct schema (a pure function of it, about 2 ms;
    every agentic protocol offers the registry's same tools).

    Raises:
        jsonschema.SchemaError: not a valid JSON Schema.
    """
    import jsonschema

    key = repr(params)
    if key not in _SCHEMAS_CHECKED:
        jsonschema.Draft202012Validator.check_schema(params)
        _SCHEMAS_CHECKED.add(key)


def _dir_digest(root: Path) -> str:
    """sha256 over the relative paths and contents of every file under ``root``, in sorted order."""
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _resolved_tools(spec: Protocol, tools: Sequence[dict[str, Any]], task_dir: Path | None) -> dict[str, Any]:
    """The ``tools`` section as hashed: the offered tools resolved, the task directory's content digest, and the
    issue-18 fields dropped where at their default."""
    out = spec.tools.model_dump(mode="json")
    out["offered"] = list(tools)
    if task_dir is not None:
        out["task_dir_sha256"] = _dir_digest(task_dir)
    defaults = ToolPermissions().model_dump(mode="json")
    for key in _NEW_TOOL_FIELDS:
        if out[key] == defaults[key]:
            del out[key]
    return out


def load_protocol(path: str | Path) -> LoadedProtocol:
    """Load, validate and hash a protocol file.

    Args:
        path: YAML protocol file.

    Returns:
        The LoadedProtocol with its resolved content and sha256.

    Raises:
        BadInput: file missing, YAML malformed (with line), a field invalid (with line and nearest known key; the
            scorer's options included), an unknown scorer, a referenced template/few-shot file missing, a
            template with a jinja2 syntax error, an unknown tool, a tool schema that is not JSON Schema, or tool
            permissions that contradict the tools offered.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "not found"
        raise BadInput(f"protocol file {path} {what}; pass the path of a protocol YAML file")
    text = read_text(path)
    raw = load_yaml_mapping(path, text, "protocol")
    try:
        spec = Protocol.model_validate(raw)
    except ValidationError as e:
        raise BadInput(format_validation_error(path, text, e, Protocol, "protocol")) from e
    base = path.parent
    p = spec.prompt
    template = p.template if p.template is not None else _read_file(base, p.template_file or "", "template_file")
    chat = p.chat_template
    if chat not in ("model", "none"):
        chat = _read_file(base, chat, "chat_template file")
    fewshot = _read_fewshot(base, p.fewshot_file, p.fewshot_target_field) if p.fewshot_file else []
    scorer_options = _check_scorer(path, text, spec)
    _check_templates(path, spec, template, chat, fewshot)
    tools, task_dir = _check_tools(path, text, spec)
    resolved = spec.model_dump(mode="json")
    resolved["tools"] = _resolved_tools(spec, tools, task_dir)
    resolved["scorer"]["options"] = scorer_options.hashed(resolved["scorer"]["options"])
    resolved["prompt"]["template"] = template
    resolved["prompt"]["chat_template"] = chat
    resolved["prompt"]["fewshot"] = fewshot
    for key in ("template_file", "fewshot_file"):
        resolved["prompt"].pop(key)
    if resolved["execution"]["isolation"] == "best-effort":
        del resolved["execution"]["isolation"]  # the default: older locks stay valid
    if resolved["reasoning"] == ReasoningSpec().model_dump(mode="json"):
        del resolved["reasoning"]  # the default: older locks stay valid
    digest = sha256_text(canonical_json(resolved))
    return LoadedProtocol(path, spec, resolved, digest, template, chat, tuple(fewshot), scorer_options, tools,
                          task_dir)


def rendered_fields(resolved: dict[str, Any]) -> list[str]:
    """The item fields a protocol's prompt renders (what the model sees): the undeclared variables of the resolved
    ``prompt.template`` and ``prompt.response_prefix``, sorted.

    Args:
        resolved: a protocol's resolved content (``LoadedProtocol.resolved``, or as the store records it).
    """
    import jinja2
    from jinja2 import meta

    env = jinja2.Environment()
    names: set[str] = set()
    for source in (resolved["prompt"]["template"], resolved["prompt"].get("response_prefix") or ""):
        names |= meta.find_undeclared_variables(env.parse(source))
    return sorted(names)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts/lists to ``{"a.b[0]": value}`` for field-level diffs."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, list) and obj and any(isinstance(v, dict | list) for v in obj):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = obj
    return out


def diff_resolved(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Field-level differences between two resolved protocols.

    Returns:
        Sorted rows ``(field, value_in_a, value_in_b)``; a missing field shows as ``None``.
    """
    fa, fb = flatten(a), flatten(b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def lock_problem(lock: dict[str, Any]) -> str | None:
    """Why a lock document disagrees with itself, or None.

    A lock is consistent when its ``resolved`` content hashes to its ``sha256`` (sha256 of ``canonical_json``, as
    ``load_protocol`` computes it), its ``name`` and ``version`` are those of ``resolved``, and (format 2) its
    ``versions`` list is well formed, holds the current ``name@version -> sha256`` and gives no ``name@version``
    two hashes. Comparing only the sha256 with the protocol's would accept a lock whose ``resolved`` (the "locked"
    side of every drift diff) or name@version was edited. A lock rewritten consistently by hand is not caught here;
    the store's ``name@version -> sha256`` record refuses changed content under a used version at freeze and run
    time, and the committed lock's own history (version control) shows a dropped entry.
    """
    resolved = lock["resolved"]
    if not isinstance(resolved, dict):
        return "its 'resolved' field is not a mapping"
    try:
        digest = sha256_text(canonical_json(resolved))
    except ValueError:
        return "its 'resolved' content holds NaN or infinity, which no protocol hash covers"
    if digest != lock["sha256"]:
        return (f"its 'resolved' content hashes to {digest[:12]}, not to its recorded sha256 "
                f"{str(lock['sha256'])[:12]}")
    for key in ("name", "version"):
        if lock.get(key) != resolved.get(key):
            return f"its {key} {lock.get(key)!r} is not the {key} {resolved.get(key)!r} of its 'resolved' content"
    if "versions" not in lock:
        return None
    entries = lock["versions"]
    if not isinstance(entries, list) or not all(_version_entry_ok(e) for e in entries):
        return "its 'versions' list is not a list of {name, version, sha256, frozen_at} entries"
    seen: dict[tuple[str, str], str] = {}
    for e in entries:
        ref = (e["name"], e["version"])
        if seen.setdefault(ref, e["sha256"]) != e["sha256"]:
            return f"its 'versions' list gives {ref[0]}@{ref[1]} two hashes"
    if seen.get((lock["name"], lock["version"])) != lock["sha256"]:
        return f"its 'versions' list does not hold its current {lock['name']}@{lock['version']}"
    return None


def _version_entry_ok(e: Any) -> bool:
    return (isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("name", "version", "sha256", "frozen_at"))
            and len(e["sha256"]) == 64)


def lock_versions(lock: dict[str, Any]) -> list[dict[str, str]]:
    """Every ``{name, version, sha256, frozen_at}`` a lock document froze, oldest first.

    A format-1 lock (written before ``versions`` existed) read as the one version it holds; a format-2 lock's
    ``versions`` list as written. A list that is not well formed gives its well-formed entries (a damaged lock still
    refuses what it can).
    """
    if "versions" not in lock:
        return [{k: str(lock.get(k) or "") for k in ("name", "version", "sha256", "frozen_at")}]
    entries = lock["versions"] if isinstance(lock["versions"], list) else []
    return [{k: e[k] for k in ("name", "version", "sha256", "frozen_at")} for e in entries if _version_entry_ok(e)]


def read_lock(lp: LoadedProtocol) -> dict[str, Any] | None:
    """The lock file's content, or None when the protocol was never frozen.

    Raises:
        BadInput: the lock file exists but is not valid lock JSON, or its fields disagree (``lock_problem``).
    """
    if not lp.lock_path.is_file():
        return None
    try:
        lock = json.loads(read_text(lp.lock_path))
        lock["sha256"], lock["resolved"]  # noqa: B018 - required keys
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise BadInput(f"{lp.lock_path}: not a valid protocol lock file; delete it and run protocol freeze") from e
    problem = lock_problem(lock)
    if problem:
        raise BadInput(f"{lp.lock_path}: the lock file is inconsistent: {problem}, so it was edited or damaged after "
                       f"freeze. Restore it (e.g. from version control), or rewrite it from the protocol file with "
                       f"'evalgate protocol freeze {shlex.quote(str(lp.path))}'")
    return lock


def verify(lp: LoadedProtocol) -> None:
    """Check a protocol against its lock.

    Raises:
        BadInput: no lock file (the protocol was never frozen), or a lock that disagrees with itself (``lock_problem``:
            e.g. its recorded ``resolved`` content was edited while its sha256 was kept).
        ProtocolDrift: content differs from the lock; ``diff`` holds the field-level rows (field, locked, now).
    """
    lock = read_lock(lp)
    if lock is None:
        raise BadInput(
            f"protocol {lp.path} has no lock file {lp.lock_path.name}; run "
            f"'evalgate protocol freeze {shlex.quote(str(lp.path))}' before evaluating with it"
        )
    if lock["sha256"] != lp.sha256:
        rows = diff_resolved(lock["resolved"], lp.resolved)
        raise ProtocolDrift(
            f"protocol {lp.path} ({lp.ref}) no longer matches its lock: {len(rows)} field(s) changed. "
            "Revert the change, or bump 'version' and freeze again.\n" + format_diff(rows, "locked", "now"),
            rows,
        )


def format_diff(rows: list[tuple[str, Any, Any]], left: str = "a", right: str = "b") -> str:
    """Human-readable field-level diff: one ``field: left=... right=...`` line per row."""

    def short(v: Any) -> str:
        s = json.dumps(v, ensure_ascii=False)
        return s if len(s) <= 120 else s[:117] + "..."

    return "\n".join(f"  {f}: {left}={short(a)} {right}={short(b)}" for f, a, b in rows)


class LockedVersion(ReadByKey, Result):
    """One version a lock froze (``ProtocolLock.versions``)."""

    name: str
    """The protocol's name."""
    version: str
    """Its version."""
    sha256: str
    """The hash that version names for good."""
    frozen_at: str
    """When it was first frozen (ISO time, UTC)."""


class ProtocolLock(ReadByKey, Result):
    """A protocol's lock as ``freeze`` leaves it (``Workspace.freeze``; ``evalgate protocol freeze --json`` prints
    ``as_dict()``, the ``.lock`` file's document). A format-1 lock, kept as it is when its content is frozen again,
    has no ``format`` and no ``versions``: None here, absent from ``as_dict()``. Read by key as the dict it was, for
    one release (``DeprecationWarning``)."""

    format: int | None = None
    """The lock file's format (``LOCK_FORMAT``, 2); None: a format-1 lock."""
    name: str
    """The protocol's name."""
    version: str
    """The version frozen now (the lock's current one)."""
    sha256: str
    """Its hash: sha256 of the resolved protocol's canonical JSON."""
    frozen_at: str | None = None
    """When the current version was first frozen (ISO time, UTC)."""
    resolved: dict[str, Any]
    """The resolved protocol (templates inlined): the "locked" side of every drift diff."""
    versions: list[LockedVersion] | None = None
    """Every version the lock froze, oldest first (None: a format-1 lock)."""

    @classmethod
    def of(cls, doc: dict[str, Any]) -> ProtocolLock:
        """The lock of a lock document (``lock_document``'s, or a lock file's that ``lock_problem`` found
        consistent): a key this evalgate does not know is left out of the value (the file keeps it), so a freeze
        that worked before still works."""
        return cls.model_validate({k: v for k, v in doc.items() if k in cls.model_fields})


def lock_document(lp: LoadedProtocol, versions: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """The JSON document written to ``<file>.lock`` (format ``LOCK_FORMAT``).

    Args:
        lp: the protocol frozen now (the lock's current version).
        versions: the versions the lock held before (``lock_versions``), kept in order; this one is appended
            unless it is there already (then its first ``frozen_at`` is kept).
    """
    kept = [dict(e) for e in versions]
    mine = next((e for e in kept if (e["name"], e["version"], e["sha256"]) == (lp.spec.name, lp.spec.version,
                                                                               lp.sha256)), None)
    if mine is None:
        mine = {"name": lp.spec.name, "version": lp.spec.version, "sha256": lp.sha256,
                "frozen_at": datetime.now(UTC).isoformat(timespec="seconds")}
        kept.append(mine)
    return {
        "format": LOCK_FORMAT,
        "name": lp.spec.name,
        "version": lp.spec.version,
        "sha256": lp.sha256,
        "frozen_at": mine["frozen_at"],
        "resolved": lp.resolved,
        "versions": kept,
    }
