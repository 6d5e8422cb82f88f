"""The sealing rule, once: which stored columns hold text derived from a sealed tier's items, and the codec that
seals them on write and opens them on read (``evalgate.keys.sealing`` holds the key and the cipher).

A run on a sealed tier (``evalgate.keys.sealing.SEALED_TIERS``: private, human-audit) stores every ``SEALED_COLUMNS``
value of its rows encrypted; raters' notes are always sealed (they may quote a human-audit item). Readers open the
same columns (``SEALED_READ``: the names they have in the store's read queries). Everything else stays in clear.
Migration 9 (``evalgate.store.migrations``) sealed the columns of its time with its own frozen copy of this list, as a
migration must.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalgate.core.environment import Environment
from evalgate.core.errors import RefusedByPolicy
from evalgate.keys.sealing import Sealer, open_or_mark, open_rows, sealer, sealer_for
from evalgate.store.db import Connection

SEALED_COLUMNS: dict[str, tuple[str, ...]] = {
    "prompts": ("text",),
    "generations": ("text",),
    "samples": ("extracted", "detail"),
    "runs": ("error",),
    "trajectories": ("text", "calls", "parse_error", "violation"),
    "human_scores": ("note",),
    "audit_ratings": ("note",),
    "audit_rating_events": ("note",),
}
"""Table -> its columns that can quote a sealed item (prompt, completion, extracted answer, score detail, an error
message, a turn's text, tool calls and messages, a rater's note)."""

SEALED_READ: dict[str, tuple[str, ...]] = {
    "samples": ("text", "prompt", "extracted", "detail"),  # ``samples`` joined with generations and prompts
    "run_prompts": ("text",),  # ``run_prompts`` joined with prompts
    **{t: SEALED_COLUMNS[t] for t in ("generations", "trajectories", "human_scores")},
}
"""A read query's name -> the columns of its rows that may be sealed (their names in that query)."""


class Codec:
    """Seals one write's sealed columns with one key, or nothing (``PLAIN``).

    Args:
        seal: the Sealer of the key (None: values stay in clear).
    """

    def __init__(self, seal: Sealer | None) -> None:
        self.sealer = seal

    def value(self, table: str, column: str, v: str | None) -> str | None:
        """``v`` as stored in ``table.column``: sealed when the codec has a key and the column is sealed."""
        if self.sealer is None or column not in SEALED_COLUMNS.get(table, ()):
            return v
        return self.sealer.seal(v)

    def row(self, table: str, row: Mapping[str, Any]) -> dict[str, Any]:
        """``row`` with ``table``'s sealed columns sealed (a non-text value, e.g. a turn's ``calls``, is sealed as
        its JSON text)."""
        out = dict(row)
        if self.sealer is not None:
            for c in SEALED_COLUMNS.get(table, ()):
                if c in out and out[c] is not None and not isinstance(out[c], str):
                    out[c] = json.dumps(out[c])
                if c in out:
                    out[c] = self.sealer.seal(out[c])
        return out


PLAIN = Codec(None)
"""The codec of a run on a tier whose outputs stay in clear."""


def open_read(query: str, rows: list[dict[str, Any]], env: Environment) -> list[dict[str, Any]]:
    """Decrypt, in place, the sealed values of the ``SEALED_READ[query]`` columns of ``rows`` (``env``'s key).

    Raises:
        RefusedByPolicy: a sealed value and no key, or the wrong key.
    """
    return open_rows(rows, SEALED_READ[query], env)


def open_errors(rows: list[dict[str, Any]], env: Environment) -> list[dict[str, Any]]:
    """Runs rows with ``error`` opened, or marked unreadable without the key (listings must work without it)."""
    return open_or_mark(rows, "error", env)


def run_codec(con: Connection, run_id: str | None, env: Environment) -> Codec:
    """The codec for values derived from run ``run_id``'s items: ``PLAIN`` unless it ran on a sealed tier (then
    sealed with ``env``'s key).

    Raises:
        RefusedByPolicy: a sealed tier and no key, or not the key the store's sealed values use.
    """
    if run_id is None:
        return PLAIN
    row = con.execute("SELECT tier FROM runs WHERE run_id=?", [run_id]).fetchone()
    s = sealer_for(row[0], env) if row else None
    return Codec(same_key(con, s, env)) if s else PLAIN


def note_codec(con: Connection, needed: bool, env: Environment) -> Codec:
    """The codec for raters' notes (always sealed, with ``env``'s key): ``PLAIN`` when no row has a note (no key
    needed).

    Raises:
        RefusedByPolicy: a note, and no key or not the store's key.
    """
    return Codec(same_key(con, sealer(env=env), env)) if needed else PLAIN


def same_key(con: Connection, s: Sealer, env: Environment) -> Sealer:
    """``s``, after checking that it is the key the store's sealed values use (the first seal records it, at
    ``env``'s clock's time).

    Raises:
        RefusedByPolicy: another key sealed the store's values (nothing is written).
    """
    row = con.execute("SELECT fingerprint FROM sealed_key LIMIT 1").fetchone()
    if row is None:
        con.execute("INSERT INTO sealed_key VALUES (?, ?)", [s.fingerprint, env.clock()])
    elif row[0] != s.fingerprint:
        raise RefusedByPolicy(f"the private key (fingerprint {s.fingerprint[:12]}) is not the key this store's "
                              f"encrypted outputs were written with (fingerprint {row[0][:12]}); use that key "
                              "(EVALGATE_PRIVATE_KEY or EVALGATE_PRIVATE_KEY_FILE)")
    return s
