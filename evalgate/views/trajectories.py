"""Reading a run's trajectories back: every turn of every sample, with its calls, results and violations, as
JSON-able records, as text for a human reader (``evalgate trajectories RUN_ID``) and as the release report's
trajectory viewer shows them (``trajectory_view``)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.keys.sealing import SEALED_TIERS
from evalgate.store import RunRow, Store, TurnRow

TRAJECTORIES_PURPOSE = "inspect-trajectories"
"""The access-log purpose of ``evalgate trajectories``: a view of a run's per-item outputs, as ``evalgate samples``."""


def run_trajectories(store: Store, run_id: str, item: str | None = None,
                     actor: str | None = None) -> list[dict[str, Any]]:
    """The trajectories of run ``run_id`` (stored under its checkpoint, protocol and generation settings, by runs
    on its split content): a read of its split, checked and logged as ``evalgate samples`` is
    (``samples.admit_view``), so a private or human-audit run's turns are refused (logged) like its samples.

    Args:
        store: the store.
        run_id: a run of an agentic protocol.
        item: only this item's samples.
        actor: who reads (default the store's environment's, ``actor_name``).

    Returns:
        One record per sample, in (item, sample index) order: item_id, sample_index, seed, status (how it ended),
        turns (its ``TurnRow``s, ``calls`` decoded).

    Raises:
        BadInput: no such run, or it stored no trajectory (not an agentic protocol).
        RefusedByPolicy: the view is refused (private or human-audit tier, split policy or budget; logged).
    """
    from evalgate.splits.manifest import actor_name
    from evalgate.views.samples import admit_view, stored_run

    run = stored_run(store, run_id)
    admit_view(store, run, TRAJECTORIES_PURPOSE, actor_name(actor, env=store.env))
    by_sample = turns_by_sample(store, run, [item] if item is not None else None)
    if not by_sample:
        raise BadInput(f"run {run_id} has no stored trajectories{f' for item {item!r}' if item else ''}: its "
                       f"protocol ({run.protocol_name}@{run.protocol_version}) offers no tools, or the item "
                       "is not in it")
    return [{"item_id": k[0], "sample_index": k[1], "seed": k[2], "status": status(turns), "turns": turns}
            for k, turns in sorted(by_sample.items())]


def status(turns: list[TurnRow]) -> str:
    """How a trajectory ended (its last turn's ``ended``), ``incomplete`` while it has not."""
    return turns[-1].ended or "incomplete"


def turns_by_sample(store: Store, run: RunRow, items: list[str] | None = None
                    ) -> dict[tuple[str, int, int], list[TurnRow]]:
    """The stored turns of a run (a ``Store.runs`` row: its checkpoint, protocol and generation settings), of
    ``items`` only when given, by sample key (item id, sample index, sample seed), each in turn order; empty for a
    run of a protocol without tools. Only turns stored by runs on the run's split content: another split whose items
    share ids is never mixed in. A sealed tier's turns come back in clear (the key is needed); a run of an open tier
    (by the access log, ``RunRepo.run_tiers``) gets no sealed turn: one is refused (RefusedByPolicy), its
    rows were edited to reach another run's."""
    settings = (run.backend_info or {}).get("generation_settings_sha256") or ""
    by_sample: dict[tuple[str, int, int], list[TurnRow]] = defaultdict(list)
    sealed = bool(set(store.run_tiers(run.run_id, logged_only=True)) & set(SEALED_TIERS))
    for r in store.trajectory_turns(run.checkpoint_digest, run.protocol_hash, settings, items,
                                    split_sha256=run.split_sha256, sealed=sealed):
        by_sample[(r.item_id, r.sample_index, r.seed)].append(r)
    return dict(by_sample)


def trajectory_view(turns: list[TurnRow], max_chars: int = 1500) -> dict[str, Any]:
    """One sample's stored turns as the release report shows them: how it ended, its counts, and per turn the
    model's text, each call (name, arguments as JSON, status, violation, result) and any parse error; each text cut
    to ``max_chars``.

    Returns:
        ``{"status", "tool_calls", "violations", "parse_errors", "turns": [{"turn", "text", "completion_tokens",
        "finish_reason", "parse_error", "ended", "calls": [{"name", "arguments", "status", "violation",
        "result"}]}]}``.
    """
    out: list[dict[str, Any]] = [
        {"turn": t.turn, "text": _short(t.text or "", max_chars), "completion_tokens": t.completion_tokens,
         "finish_reason": t.finish_reason, "parse_error": t.parse_error, "ended": t.ended,
         "calls": [{"name": c["name"], "arguments": _short(json.dumps(c["arguments"], ensure_ascii=False), max_chars),
                    "status": c["status"], "violation": c["violation"], "result": _short(c["result"], max_chars)}
                   for c in t.calls]} for t in turns]
    calls = [c for t in out for c in t["calls"]]
    return {"status": status(turns), "tool_calls": len(calls), "violations": sum(bool(c["violation"]) for c in calls),
            "parse_errors": sum(t["parse_error"] is not None for t in out), "turns": out}


def _short(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} chars]"


def format_trajectories(records: list[dict[str, Any]]) -> str:
    """A text view: per sample its status, then per turn the model's text and each call with its result."""
    out: list[str] = []
    for rec in records:
        out.append(f"== {rec['item_id']} #{rec['sample_index']} (seed {rec['seed']}): {rec['status']}")
        for t in rec["turns"]:
            out.append(f"-- turn {t.turn} ({t.completion_tokens} tokens, {t.finish_reason}, "
                       f"generate {t.gen_s or 0:.2f} s, tools {t.tool_s or 0:.2f} s)")
            out.extend("   " + line for line in _short(t.text).splitlines())
            if t.parse_error:
                out.append(f"   !! parse error: {t.parse_error}")
            for c in t.calls:
                flag = f"VIOLATION {c['violation']}" if c["violation"] else c["status"]
                out.append(f"   >> {c['name']}({_short(str(c['arguments']), 200)}) [{flag}]")
                out.extend("      " + line for line in _short(c["result"]).splitlines())
    return "\n".join(out)
