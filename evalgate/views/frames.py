"""Runs, samples, gates and the access log as Arrow tables, pandas or polars frames, straight from DuckDB
(``relation.to_arrow_table()`` / ``.df()`` / ``.pl()``: columnar, no row-by-row Python). docs/FRAMES.md.

Samples are per-item results of a split, so ``samples_frame`` is a read of it exactly like ``evalgate samples``
(``evalgate.views.samples``: purpose ``inspect-samples``, logged per run, under the split's tier policy and budget), and
it is refused, logged, for the private and human-audit tiers. Sample texts are not in the frame (they are read
through ``evalgate samples``, which owns how stored text is kept); scores, statuses and extracted answers are.
The other frames show what ``evalgate runs``, ``evalgate report`` and ``evalgate audit log`` show, and read no split.
"""

from __future__ import annotations

from typing import Any, Literal

from evalgate.core.errors import BadInput, MissingExtra
from evalgate.core.version import install_hint
from evalgate.store import Store, handed_down
from evalgate.store.frames import ACCESS_SQL, FRAME_METHODS, GATES_SQL, RUNS_SQL, SAMPLES_SQL

Kind = Literal["arrow", "pandas", "polars"]
KINDS: tuple[str, ...] = ("arrow", "pandas", "polars")
_PACKAGE = {"arrow": "pyarrow", "pandas": "pandas", "polars": "polars"}



def query_frame(sql: str, params: list[Any] | None = None, kind: Kind = "arrow", store: Store | None = None) -> Any:
    """Run ``sql`` (one ``SELECT``: it reads, never writes) on the store and return the result as ``kind``,
    converted by DuckDB itself.

    Raises:
        BadInput: an unknown kind; ``sql`` is not one SELECT statement (an ``UPDATE access_log`` through here edited
            the log without the store's lock; ``UPDATE gates`` or ``runs`` changed records no chain covers).
        MissingExtra: pyarrow / pandas / polars is not installed (``evalgate[frames]``).
    """
    if kind not in FRAME_METHODS:
        raise BadInput(f"frame kind {kind!r}: one of {', '.join(KINDS)}")
    try:
        __import__(_PACKAGE[kind])
        if kind != "arrow":
            __import__("pyarrow")
    except ImportError as e:
        raise MissingExtra(f"{kind} frames need {_PACKAGE[kind]}: {install_hint('frames')}") from e
    return handed_down(store, "query_frame").frame(sql, params, kind)


def runs_frame(kind: Kind = "arrow", store: Store | None = None) -> Any:
    """Every stored run (the ``runs`` table: ids, protocol, checkpoint, train_run / train_seed / step, split and
    tier, status, ``metrics`` and ``counts`` as JSON text), oldest first."""
    return query_frame(RUNS_SQL, None, kind, handed_down(store, "runs_frame"))


def samples_frame(run_ids: str | list[str], kind: Kind = "arrow", actor: str | None = None,
                  store: Store | None = None) -> Any:
    """The samples of ``run_ids`` (one row per item and sample: run, split, tier, train_run, train_seed, step,
    item_id, sample_index, seed, score, status, extracted, detail, cached); a logged read of each run's split.

    Raises:
        BadInput: an unknown run, or one not complete.
        RefusedByPolicy: a private or human-audit run, or the split's policy or budget refuses (logged first).
    """
    from evalgate.splits.manifest import actor_name
    from evalgate.views.samples import SAMPLES_PURPOSE, admit_view, stored_run

    store = handed_down(store, "samples_frame")
    ids = [run_ids] if isinstance(run_ids, str) else list(dict.fromkeys(run_ids))
    who = actor_name(actor, env=store.env)
    with store.session():  # one connection for the checks, the logged reads and the query
        runs = [stored_run(store, r) for r in ids]
        for run in runs:
            if run.status != "complete":
                raise BadInput(f"run {run.run_id} is {run.status}, not complete: it has no scored samples")
        for run in runs:  # every run is checked and logged before any row is returned
            admit_view(store, run, SAMPLES_PURPOSE, who)
        return query_frame(SAMPLES_SQL, [ids], kind, store)


def gates_frame(kind: Kind = "arrow", store: Store | None = None) -> Any:
    """Every stored gate verdict (the ``gates`` table: policy and input hashes, verdict, reason, reasons, the
    verdict document as JSON text, reused_from, created_at, actor), oldest first."""
    return query_frame(GATES_SQL, None, kind, handed_down(store, "gates_frame"))


def access_log_frame(kind: Kind = "arrow", store: Store | None = None) -> Any:
    """The access log (every read, refusal and data change, with its hash chain columns), in ``seq`` order."""
    return query_frame(ACCESS_SQL, None, kind, handed_down(store, "access_log_frame"))
