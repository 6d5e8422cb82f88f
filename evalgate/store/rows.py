"""The typed rows the store's readers return: one frozen dataclass per table (or join) a reader gives back, its
fields the columns in table order. Each row still reads by key as the dict it was for one release
(``core.results.ReadByKey``, with a ``DeprecationWarning``); ``as_dict()`` is that dict, what ``--json`` prints.

Frozen dataclasses rather than pydantic models: a run's samples are thousands of rows and the cache reads are on
every run's path, and the store has already typed the values (bench/store_rows.py measures the difference).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from evalgate.core.results import Metrics, ReadByKey

T = TypeVar("T", bound="Row")


class Row(ReadByKey):
    """A stored row: frozen, its fields the columns in order; ``as_dict()`` the dict a reader returned before it
    was typed (a ``Metrics`` as its plain dict)."""

    COLUMNS: ClassVar[tuple[str, ...]] = ()
    """The field names in order (filled in for each row type below)."""

    def as_dict(self) -> dict[str, Any]:
        """The row as column -> value, in column order (JSON columns as decoded data)."""
        return {c: _plain(getattr(self, c)) for c in self.COLUMNS}

    @classmethod
    def from_dicts(cls: type[T], rows: list[dict[str, Any]]) -> list[T]:
        """Typed rows of ``rows`` (column -> value dicts with exactly this row type's columns, in any order),
        without a dataclass ``__init__`` per row: each row's values are its ``__dict__``, a fifth of the cost
        (bench/store_rows.py).

        Raises:
            TypeError: a row whose columns are not this row type's.
        """
        out = []
        new, columns, names = object.__new__, cls.COLUMNS, set(cls.COLUMNS)
        for r in rows:
            if len(r) != len(columns) or (tuple(r) != columns and r.keys() != names):
                raise TypeError(f"{cls.__name__} has the columns {', '.join(columns)}; a row has "
                                f"{', '.join(r)}")
            row = new(cls)
            row.__dict__.update(r)
            out.append(row)
        return out

    @classmethod
    def from_cursor(cls: type[T], cur: Any) -> list[T]:
        """Typed rows of a cursor's result (``execute(...)`` on a store connection) whose columns are exactly this
        row type's, in any order: each tuple becomes a row's ``__dict__`` directly, with no dict per row in between
        (what ``from_dicts`` builds on; for a reader on a hot path: ``Store.access_rows``, read on every append).

        Raises:
            TypeError: the result's columns are not this row type's.
        """
        columns = tuple(d[0] for d in cur.description)
        if len(columns) != len(cls.COLUMNS) or (columns != cls.COLUMNS and set(columns) != set(cls.COLUMNS)):
            raise TypeError(f"{cls.__name__} has the columns {', '.join(cls.COLUMNS)}; the result has "
                            f"{', '.join(columns)}")
        out = []
        new = object.__new__
        for values in cur.fetchall():
            row = new(cls)
            row.__dict__.update(zip(columns, values, strict=True))
            out.append(row)
        return out


def _plain(value: Any) -> Any:
    return value.as_dict() if isinstance(value, Metrics) else value


def _columns(cls: type[T]) -> type[T]:
    cls.COLUMNS = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    return cls


@_columns
@dataclass(frozen=True)
class RunRow(Row):
    """A stored run (``runs``; ``Store.runs``): JSON columns decoded, ``metrics`` a ``Metrics`` (None until
    complete). ``runner.record.RunRecord.from_row`` gives the nested run record of one."""

    run_id: str
    status: str
    """``running``, ``complete``, ``failed`` or ``interrupted``."""
    protocol_name: str
    protocol_version: str
    protocol_hash: str
    checkpoint_digest: str
    checkpoint_path: str
    train_run: str | None
    train_seed: int | None
    step: int | None
    split: str
    tier: str
    split_sha256: str
    sampling_seed: int
    backend: str
    backend_info: dict[str, Any] | None
    effective_params: dict[str, Any] | None
    actor: str | None
    purpose: str | None
    started_at: datetime
    finished_at: datetime | None
    wall_s: float | None
    metrics: Metrics | None
    counts: dict[str, Any] | None
    error: str | None
    """Why a failed or interrupted run ended (opened for a key holder, else marked unreadable)."""
    host: str | None
    pid: int | None
    protocol_path: str | None
    checkpoint_kind: str | None
    items: int | None
    versions: dict[str, str] | None
    warnings: list[str] | None
    settings_sha256: str | None
    checkpoint_provenance: dict[str, str] | None
    record_version: int | None

    def __post_init__(self) -> None:
        if self.metrics is not None and not isinstance(self.metrics, Metrics):
            object.__setattr__(self, "metrics", Metrics(self.metrics))

    @classmethod
    def from_dicts(cls, rows: list[dict[str, Any]]) -> list[RunRow]:
        """As ``Row.from_dicts``, ``metrics`` held as a ``Metrics``."""
        out = super().from_dicts(rows)
        for r in out:
            if r.metrics is not None:
                r.__dict__["metrics"] = Metrics(r.metrics)
        return out


@_columns
@dataclass(frozen=True)
class SampleScore(Row):
    """One sample's score (``Store.sample_scores``): what paired statistics need."""

    item_id: str
    sample_index: int
    score: float
    status: str


@_columns
@dataclass(frozen=True)
class SampleRow(Row):
    """One scored sample with its generation and prompt (``Store.samples``; a sample whose generation is no longer
    cached has None there)."""

    run_id: str
    item_id: str
    sample_index: int
    seed: int
    """The per-sample sampling seed."""
    score: float
    status: str
    extracted: str | None
    detail: str | None
    cached: bool
    behavior: dict[str, Any]
    text: str | None
    """The completion."""
    completion_tokens: int | None
    prompt_tokens: int | None
    finish_reason: str | None
    prompt: str | None
    """The rendered prompt."""


@_columns
@dataclass(frozen=True)
class GateRow(Row):
    """A stored gate verdict (``gates``; ``Store.gates``: JSON columns decoded)."""

    gate_id: str
    name: str
    policy_sha256: str
    protocol_hash: str | None
    inputs_sha256: str
    inputs: Any
    decision_runs: list[dict[str, Any]]
    verdict: str
    reason: str
    reasons: list[Any]
    document: Any
    """The verdict document (``Verdict.as_dict()``), decoded."""
    reused_from: str | None
    created_at: datetime
    actor: str


@_columns
@dataclass(frozen=True)
class HumanScore(Row):
    """A person's score of one sample (``human_scores``; ``Store.human_scores``): imported from a file or mirrored
    from a rating, next to the sample's automatic score. ``note`` opened for a key holder."""

    split: str
    item_id: str
    run_id: str
    sample_index: int
    rater: str
    score: float
    auto_score: float | None
    note: str | None
    source_sha256: str
    """The imported file's sha256, or ``batch:<id>`` for a rating."""
    imported_by: str
    imported_at: datetime


@_columns
@dataclass(frozen=True)
class BatchRow(Row):
    """A rating batch (``audit_batches``, with ``n_items``, its samples; ``Store.batches``)."""

    batch_id: str
    run_id: str
    split: str
    rubric: str
    scale_min: int
    scale_max: int
    stratify: str | None
    selection_seed: int
    created_by: str
    created_at: datetime
    show_gold: bool | None
    n_items: int


@_columns
@dataclass(frozen=True)
class BatchItem(Row):
    """One sample of a rating batch (``Store.batch_items``): its blind key, position, item and sample index."""

    sample_key: str
    position: int
    item_id: str
    sample_index: int


@_columns
@dataclass(frozen=True)
class RatingRow(Row):
    """A rater's current rating of one sample of a batch (``audit_ratings``; ``Store.ratings``): ``score`` None
    and ``skipped`` for a skip; ``submissions`` counts every form sent for it."""

    batch_id: str
    rater: str
    item_id: str
    sample_index: int
    score: float | None
    skipped: bool
    note: str | None
    rated_at: datetime
    submissions: int


@_columns
@dataclass(frozen=True)
class RatingEvent(Row):
    """One submission to a batch (``audit_rating_events``; ``Store.rating_events``): ``action`` ``scored``,
    ``replaced`` or ``skipped``, with the score it replaced."""

    batch_id: str
    rater: str
    item_id: str
    sample_index: int
    score: float | None
    skipped: bool
    note: str | None
    previous_score: float | None
    action: str
    ts: datetime


@_columns
@dataclass(frozen=True)
class RaterRow(Row):
    """A rater as a token or a browser session names one (``Store.rater_by_token``, ``Store.session_rater``)."""

    name: str
    role: str
    """``rater`` or ``admin``."""


@_columns
@dataclass(frozen=True)
class RunPrompt(Row):
    """A run's rendered prompt of one item (``run_prompts`` with the prompt's ``text``; ``Store.run_prompts``)."""

    run_id: str
    item_id: str
    prompt_sha256: str
    prompt_tokens: int | None
    bos_count: int | None
    """BOS tokens in the rendered prompt."""
    bos_added: bool | None
    """Whether the tokenizer added a BOS token of its own."""
    system_merged: bool
    """Whether the system prompt was merged into the first user turn (a template without a system role)."""
    text: str
    """The rendered prompt (opened for a key holder on a sealed tier)."""


@_columns
@dataclass(frozen=True)
class AccessRow(Row):
    """One access-log row (``access_log``; ``Store.access_rows``, ``Store.access_content_changes``): who read,
    was refused, or changed which split, for what, chained to the row before it. ``row_hash`` is the sha256 of
    ``prev_hash`` and every field before it (``evalgate.access.log.row_hash``)."""

    seq: int
    """The row's place in the chain, from 1."""
    ts: datetime
    actor: str
    ci: str | None
    """The CI system the read ran under (``github_actions`` ...), None outside CI."""
    split: str
    tier: str
    purpose: str
    outcome: str
    """``read``, ``override``, ``refused``, ``re-read``, ``reserved-read``, ``added``, ``replaced``, ``result`` ..."""
    cached: bool
    """The read was served from the generation cache."""
    checkpoint_digest: str | None
    protocol_hash: str | None
    run_id: str | None
    detail: str | None
    """Free text: a refusal's or an override's reason, a data change's content hashes."""
    prev_hash: str
    row_hash: str


@_columns
@dataclass(frozen=True)
class PromptRun(Row):
    """The earlier run whose recorded prompts a rerun takes (``Store.reusable_prompts``)."""

    run_id: str
    backend_info: dict[str, Any]
    """Its ``backend_info``, decoded (``renderer``, ``chat_template_sha256``, ``tokenizer`` ...)."""


@_columns
@dataclass(frozen=True)
class TurnRow(Row):
    """One stored turn of an agentic sample (``trajectories``; ``Store.trajectory_turns``): the model's text and
    the tool calls it made, keyed by checkpoint, protocol, generation settings, sample and turn; ``calls`` decoded
    (each call a dict: ``name``, ``arguments``, ``status``, ``violation``, ``result``, ``wall_s`` ...)."""

    checkpoint_digest: str
    protocol_hash: str
    settings_sha256: str
    item_id: str
    sample_index: int
    seed: int
    """The sample's sampling seed."""
    turn: int
    """From 0."""
    turn_seed: int
    prompt_sha256: str
    """The hash of the prompt this turn answered."""
    text: str
    prompt_tokens: int | None
    completion_tokens: int
    finish_reason: str
    calls: list[dict[str, Any]]
    parse_error: str | None
    violation: str | None
    ended: str | None
    """How the trajectory ended at this turn (``answered``, ``max_turns`` ...), None while it goes on."""
    gen_s: float | None
    """Seconds generating this turn."""
    tool_s: float | None
    """Seconds running its tools."""
    run_id: str | None
    created_at: datetime
