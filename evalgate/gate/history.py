"""Stored gate verdicts (the store's ``gates`` table, migration 10): what each gate considered, the decision runs it
used, its verdict and the whole verdict document.

Two uses:

- **reuse**: a gate whose inputs are unchanged -- the same policy (``policy_sha256``), protocol hash, selection and
  decision split contents, candidate runs (hence checkpoints) and baseline checkpoint -- takes the decision runs of
  the latest stored gate with those inputs instead of reading the private split again, and spends no budget: the
  numbers it would read are the ones that gate already read. Any changed input decides afresh.
- **re-rendering**: ``load_verdict`` rebuilds the ``Verdict`` from its stored document, so ``evalgate report
  GATE_ID`` writes the HTML / JSON / JUnit / Markdown again without reading a split.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import types
import uuid
from datetime import UTC, datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel

from evalgate.core.enums import Outcome
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.core.results import Metrics
from evalgate.gate.policy import GatePolicy
from evalgate.gate.results import ReusedDecision, Verdict, document
from evalgate.store import GateRepo, GateRow, RunRow, Store


def _sha256(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def policy_sha256(policy: GatePolicy) -> str:
    """sha256 of the loaded policy's canonical JSON (paths resolved, defaults filled in): any change of a field,
    a rule or a path changes it."""
    return _sha256(policy.model_dump(mode="json"))


def gate_inputs(policy: GatePolicy, protocol_hash: str | None, selection_sha256: str, decision_sha256: str,
                candidate_runs: list[RunRow], baseline_digest: str | None) -> dict[str, Any]:
    """What a gate's decision depends on, as a JSON-ready dict (hashed by ``inputs_sha256``).

    Args:
        policy: the policy. protocol_hash: the protocol's frozen hash.
        selection_sha256, decision_sha256: the two splits' current content hashes.
        candidate_runs: the selection runs the gate used (``RunPartition.usable``): their run ids and checkpoint
            digests are recorded, sorted.
        baseline_digest: the baseline checkpoint's digest (None: a fixed value).
    """
    return {"policy_sha256": policy_sha256(policy), "protocol_hash": protocol_hash,
            "selection_split": policy.selection_split, "selection_sha256": selection_sha256,
            "decision_split": policy.decision_split, "decision_sha256": decision_sha256, "backend": policy.backend,
            "candidate_runs": sorted(r.run_id for r in candidate_runs),
            "checkpoint_digests": sorted({r.checkpoint_digest for r in candidate_runs}),
            "baseline_digest": baseline_digest}


def inputs_sha256(inputs: dict[str, Any]) -> str:
    """sha256 of ``gate_inputs``' canonical JSON."""
    return _sha256(inputs)


def reusable(store: Store, inputs: dict[str, Any],
             digests: list[str | None]) -> tuple[GateRow, list[RunRow]] | None:
    """The latest stored gate with the same inputs whose decision runs cover the checkpoints to decide
    (``digests``: a training log that changed since may have changed a seed's best), with its decision runs (store
    rows, in its order), when every one of them is still a complete run in the store; else None."""
    for row in reversed(store.gates(inputs_sha256=inputs_sha256(inputs))):
        if not set(digests) <= {d["checkpoint_digest"] for d in row.decision_runs}:
            continue
        runs = [store.runs(run_id=d["run_id"], status="complete") for d in row.decision_runs]
        if all(runs):
            return row, [r[0] for r in runs]
    return None


def new_gate_id() -> str:
    """``gate-YYYYmmddTHHMMSS-<8 hex>`` (UTC)."""
    return f"gate-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def record(store: GateRepo, verdict: Verdict, inputs: dict[str, Any], actor: str) -> str:
    """Store ``verdict`` as a new gate (its ``gate_id`` is set here) and return the id.

    ``decision_runs`` lists every decision run the verdict used (the baseline's first, then each seed's best), with
    its checkpoint digest and path, so a later gate with the same inputs can reuse them.
    """
    verdict.gate_id = new_gate_id()
    dec: list[dict[str, Any]] = []
    b = verdict.baseline
    if b is not None and b.decision is not None:
        dec.append({"role": "baseline", "train_seed": None, "checkpoint_path": b.checkpoint,
                    "checkpoint_digest": b.decision.digest, "run_id": b.decision.run_id})
    for s in verdict.seeds:
        if s.decision is not None and s.best is not None:
            dec.append({"role": "seed", "train_seed": s.train_seed, "checkpoint_path": s.best.path,
                        "checkpoint_digest": s.decision.digest, "run_id": s.decision.run_id})
    store.put_gate({
        "gate_id": verdict.gate_id, "name": verdict.policy.name, "policy_sha256": inputs["policy_sha256"],
        "protocol_hash": verdict.protocol_hash, "inputs_sha256": inputs_sha256(inputs), "inputs": inputs,
        "decision_runs": dec, "verdict": "PASS" if verdict.passed else "FAIL", "reason": verdict.reason,
        "reasons": verdict.reasons, "document": dump_verdict(verdict),
        "reused_from": verdict.reused_from.gate_id if verdict.reused_from else None, "actor": actor})
    return verdict.gate_id


def verdict_sha256(row: GateRow) -> str:
    """sha256 of a stored gate as ``report`` renders it: its id, verdict and whole document (a ``gates`` row as the
    store returns it)."""
    return _sha256({"gate_id": row.gate_id, "verdict": row.verdict, "document": row.document})


VERDICT_DETAIL = "verdict sha256 {sha256} of gate {gate_id} ({verdict})"
"""The detail of the uncounted ``result`` row a gate appends to the decision split's log when it stores its verdict
(``verdict_sha256``), which ``check_recorded`` reads back."""
_VERDICT_SHA256 = re.compile(r"verdict sha256 ([0-9a-f]{64}) of gate (\S+) ")


def check_recorded(store: Store, row: GateRow) -> None:
    """Check a stored gate before it is rendered again (``evalgate report``): the access log's chain and signed
    head hold (``access.log.verify``) and its ``result`` row for the gate records this very verdict. The gates table
    is not signed, so a failing gate's verdict set to PASS in the store must not render, or exit, as a pass.

    Raises:
        RefusedByPolicy: the log does not hold, cannot be checked (no signing key here: said as such, not as a
            broken log), records no verdict for the gate (a gate stored before verdicts were recorded: run it
            again), or records another one (the store was edited).
    """
    from evalgate.access import log as accesslog

    chain = accesslog.verify(store)
    gate = row.gate_id
    if not chain["ok"] and chain["reason"] is None and not chain["signature"]["checked"]:
        raise RefusedByPolicy(f"gate {gate}: its stored verdict cannot be checked here, so it is not rendered: "
                              f"{chain['signature']['reason']}. A stored verdict renders only once the signed access "
                              "log confirms it (the gates table is not signed), so 'evalgate report' needs the "
                              "store's signing key, as a gate does")
    if not chain["ok"]:
        why = chain["reason"] or chain["signature"]["reason"]
        raise RefusedByPolicy(f"gate {gate}: the access log does not hold ({why}), so its stored verdict cannot be "
                              "checked against it; see 'evalgate audit verify'")
    recorded = [m.group(1) for r in store.access_rows() if r.outcome == Outcome.RESULT.value
                and (m := _VERDICT_SHA256.search(r.detail or "")) and m.group(2) == gate]
    if not recorded:
        raise RefusedByPolicy(f"gate {gate}: the access log records no verdict for it (it was stored before gates "
                              "recorded theirs, or not by 'evalgate gate'); run the gate again")
    if recorded[-1] != verdict_sha256(row):
        raise RefusedByPolicy(f"gate {gate}: its stored verdict (sha256 {verdict_sha256(row)[:12]}) is not the one "
                              f"the access log recorded ({recorded[-1][:12]}): the store was edited after the gate; "
                              "restore it from a good copy and find out who edited it")


def reused_decision(row: GateRow) -> ReusedDecision:
    """The ``ReusedDecision`` a verdict carries when it took ``row``'s decision runs."""
    created = row.created_at
    return ReusedDecision(row.gate_id, created.isoformat(timespec="seconds") if isinstance(created, datetime)
                          else str(created))


def stored_row(store: GateRepo, gate_id: str) -> GateRow:
    """A stored gate's ``gates`` row (a single gate's or a suite's, ``gate.suite_results``), JSON decoded.

    Raises:
        BadInput: no gate with that id (the message lists the latest ones).
    """
    rows = store.gates(gate_id=gate_id)
    if not rows:
        latest = [r.gate_id for r in store.gates()[-5:]]
        raise BadInput(f"no stored gate {gate_id!r}; "
                       + (f"the latest are {', '.join(latest)}" if latest else "no gate has been stored yet: run "
                          "'evalgate gate --policy FILE' first"))
    return rows[0]


def stored_verdict(store: GateRepo, gate_id: str) -> tuple[GateRow, Verdict]:
    """A stored gate's row and its ``Verdict`` (rebuilt from the document; no split is read).

    Raises:
        BadInput: no gate with that id (the message lists the latest ones), or it is a suite's (its members are
            gates of their own).
    """
    row = stored_row(store, gate_id)
    if (row.document or {}).get("kind") == "suite":
        raise BadInput(f"gate {gate_id} is a suite's verdict, not a single gate's: render it with 'evalgate report "
                       f"{gate_id}' (Workspace.report)")
    return row, load_verdict(row.document)


# -- the verdict document ----------------------------------------------------------------------------------------
def dump_verdict(verdict: Verdict) -> dict[str, Any]:
    """Every field of ``verdict`` (nested dataclasses as dicts, the policy as its JSON), for ``load_verdict``."""
    doc = document(dataclasses.replace(verdict, policy=None))  # type: ignore[arg-type]
    doc["policy"] = verdict.policy.model_dump(mode="json")
    return doc


def load_verdict(doc: dict[str, Any]) -> Verdict:
    """The ``Verdict`` that ``dump_verdict`` wrote (after a JSON round trip: dict keys as text, tuples as lists).

    Raises:
        BadInput: the document does not fit the current ``Verdict`` (written by another evalgate version).
    """
    try:
        out = _load(Verdict, {"version": 1, **doc})  # a document stored before it carried its version
    except (TypeError, ValueError, KeyError) as e:
        raise BadInput(f"the stored verdict cannot be read by this evalgate version ({e}); run the gate again") from e
    assert isinstance(out, Verdict)
    return out


def _key(tp: Any, key: str) -> Any:
    """A JSON object key back as the dict key type ``tp`` (``int | None`` keys came back as ``"1"``, ``"null"``)."""
    args = get_args(tp) or (tp,)
    if key == "null" and type(None) in args:
        return None
    return int(key) if int in args else key


def from_json(tp: Any, data: Any) -> Any:
    """``data`` (decoded JSON, as ``gate.results.document`` wrote it) back as type ``tp``: dataclasses, pydantic
    models, ``Metrics``, lists, tuples, dicts (their keys as ``tp`` says), unions with None.

    Raises:
        TypeError, KeyError, ValueError: ``data`` does not fit ``tp``.
    """
    return _load(tp, data)


def _load(tp: Any, data: Any) -> Any:
    """``data`` (decoded JSON) as type ``tp``: dataclasses, pydantic models, ``Metrics``, lists, tuples, dicts,
    unions."""
    if data is None or tp is Any:
        return data
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _load(options[0], data) if len(options) == 1 else data
    if isinstance(tp, type) and hasattr(tp, "from_document"):  # a row the documents hold flat (ProxyEntry)
        return tp.from_document(data)
    if dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        return tp(**{f.name: _load(hints[f.name], data[f.name])  # type: ignore[operator]
                     for f in dataclasses.fields(tp) if f.name in data})
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_validate(data)
    if tp is Metrics:
        return Metrics(data)
    if origin is list:
        return [_load(args[0], x) for x in data]
    if origin is tuple:
        return tuple(_load(args[0] if args[-1] is Ellipsis else a, x)
                     for a, x in zip(args if args[-1] is not Ellipsis else [args[0]] * len(data), data, strict=True))
    if origin is dict:
        return {_key(args[0], k): _load(args[1], v) for k, v in data.items()}
    if tp is float and isinstance(data, int | float):
        return float(data)
    return data
