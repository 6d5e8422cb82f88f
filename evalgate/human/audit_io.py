"""The human-audit tier: export items (and a run's samples) for people to score, import their scores.

``export_audit`` writes one JSONL record per item, or per sample when a run is given, with ``human_score`` left
empty; raters fill in ``human_score`` (and optionally ``rater`` and ``note``); ``import_audit`` validates the file
and stores the scores in the store's ``human_scores`` table, next to the automatic score of the same sample, so
reward models and judges can be calibrated against people. A run's samples are exported blind: the export makes a
rating batch (``human.rating.create_batch``) and the file names each sample by the batch's opaque sample key only
(no run id, no automatic score); the import stores the scores as that batch's ratings, which count for calibration
as ratings made in ``evalgate serve`` do. Both read the split and are logged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError

from evalgate.core.enums import Tier
from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write, iter_jsonl
from evalgate.core.models import StrictModel
from evalgate.human.rating import rater_name
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import actor_name
from evalgate.store import BatchRow, SampleRow, Store

EXPORT_PURPOSE = "human-audit-export"
IMPORT_PURPOSE = "human-audit-import"


class AuditRecord(StrictModel):
    """One line of a human-audit file: what raters see, and the score they give."""

    model_config = ConfigDict(frozen=False)

    split: str
    """The human-audit split the item belongs to."""
    item_id: str
    """The item's id in the split."""
    batch_id: str | None = None
    """A run's sample: the rating batch the export made (the run behind it stays in the store). None: an
    item-level record, or a file written before exports were blind."""
    sample_key: str | None = None
    """A run's sample: its opaque key in that batch (the store maps it to the run's item and sample index)."""
    scale: list[int] | None = None
    """A run's sample: the batch's rating scale ``[min, max]``; ``human_score`` must be a whole number on it (not
    imported)."""
    run_id: str | None = None
    """Files written before exports were blind: the run whose sample is scored (no longer written). None: an
    item-level score or a blind record."""
    sample_index: int | None = None
    """Files written before exports were blind: the sample's index within its item in that run."""
    item: dict[str, Any] = {}
    """The item's fields, for the rater to read (not imported): every field for an item-level record; for a run's
    sample, ``id`` and the fields its protocol renders into the prompt (what the model saw)."""
    gold: dict[str, Any] | None = None
    """A run's sample exported with ``show_gold``: the item's other fields (the gold answer, a reference solution,
    tests), for the rater to read (not imported). None: not shown."""
    completion: str | None = None
    """The model's completion, for the rater to read (not imported)."""
    auto_score: float | None = None
    """Files written before exports were blind: the automatic score (never written now; the import takes it from
    the store)."""
    human_score: float | None = None
    """Filled in by the rater (e.g. 0 or 1, or a 1-5 rating); records left empty are skipped on import."""
    rater: str | None = None
    """Who scored; default the importer's ``--rater`` or actor. Stored with white space trimmed, and as the rater
    the store (or an earlier line) already names when it reads as that name (case, width, invisible characters and
    look-alike letters of other scripts aside: ``human.rating.rater_name``)."""
    note: str | None = None
    """The rater's free-text note."""


def _human_audit_manifest(manager: SplitManager, split: str, purpose: str, actor: str) -> None:
    """Refuse (logged) a split of another tier: exporting a private split would put its items in a plain file."""
    m = manager.manifest(split)
    if m.tier != Tier.HUMAN_AUDIT:
        manager.refuse(split, purpose, actor, f"split {split} is tier {m.tier}; human scoring works on human-audit "
                       "splits: add the items with 'evalgate splits add NAME --tier human-audit --file F.jsonl'",
                       BadInput)


def export_audit(split: str, out: str | Path, run_id: str | None = None, actor: str | None = None, *,
                 store: Store, show_gold: bool = False, scale: str = "0-1") -> dict[str, Any]:
    """Write a human-audit split's items, or one run's samples on it, as JSONL for human scoring (a logged read).

    A run's samples are exported blind, as the rating page shows them: a rating batch of all the run's samples is
    made (``rating.create_batch``, scale ``scale``) and each record names its sample by the batch's opaque sample
    key, with the item fields the run's protocol renders (``item``), the completion and the other fields (``gold``)
    only with ``show_gold``; never the run id or the automatic score.

    Returns:
        ``{"split", "run_id", "batch_id" (None for items), "scale", "records", "out"}``.

    Raises:
        BadInput: unknown split, a split not of tier human-audit, a run that is not on this split or whose
            protocol the store does not hold, a bad scale.
        RefusedByPolicy: the run was not made on a human-audit split (``rating.create_batch``).
    """
    manager = SplitManager(store)
    _human_audit_manifest(manager, split, EXPORT_PURPOSE, actor_name(actor, env=store.env))
    samples: list[SampleRow] = []
    batch: dict[str, Any] = {}
    if run_id is not None:
        runs = store.runs(run_id=run_id)
        if not runs or runs[0].split != split:
            raise BadInput(f"run {run_id} is not a run on split {split}; list runs with 'evalgate audit' or the "
                           "run's JSON output")
        from evalgate.human.rating import create_batch, question_fields

        shown = {"id", *question_fields(store, runs[0])}
        samples = store.samples(run_id)
        batch = create_batch(run_id, samples=max(len(samples), 1), scale=scale, store=store, actor=actor,
                             show_gold=show_gold)
    opened = manager.open(split, EXPORT_PURPOSE, actor_name(actor, env=store.env),
                          detail=f"run {run_id}" if run_id else None)
    items = {str(it["id"]): it for it in opened.items}
    if run_id is None:
        records = [AuditRecord(split=split, item_id=i, item=it) for i, it in items.items()]
    else:
        text = {(s.item_id, s.sample_index): s.text for s in samples}
        records = [AuditRecord(split=split, item_id=b.item_id, batch_id=batch["batch_id"],
                               sample_key=b.sample_key, scale=batch["scale"],
                               item={k: v for k, v in it.items() if k in shown},
                               completion=text.get((b.item_id, b.sample_index)),
                               gold={k: v for k, v in it.items() if k not in shown} if show_gold else None)
                   for b, it in ((b, items.get(b.item_id, {})) for b in store.batch_items(batch["batch_id"]))]
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(r.model_dump_json(exclude={"run_id", "sample_index", "auto_score"}) + "\n"
                               for r in records))
    return {"split": split, "run_id": run_id, "batch_id": batch.get("batch_id"), "scale": batch.get("scale"),
            "records": len(records), "out": str(path)}


def import_audit(path: str | Path, rater: str | None = None, actor: str | None = None, *,
                 store: Store) -> dict[str, Any]:
    """Validate a scored human-audit file and store its scores (re-importing replaces a rater's earlier score).

    Each split named in the file is read (logged, purpose ``human-audit-import``) to check the item ids. The
    automatic score stored with a human score is the run's sample score from the store. A blind record (``batch_id``
    and ``sample_key``, what ``export_audit`` writes for a run) is stored as a rating of that batch by its rater
    (``Store.import_ratings``), so it counts for the proxies' calibration (``rlhf.calibration``) and the reward
    audit as a rating made in ``evalgate serve`` does; its score must be a whole number on the batch's scale.

    Returns:
        ``{"imported", "skipped_unscored", "splits", "batches": {batch_id: ratings stored}, "agreement"}`` where
        ``agreement`` (over scores that have an automatic score; a batch's scores mapped to [0, 1] by its scale,
        as ``human.agreement`` maps them) is ``{"n", "mean_human", "mean_auto", "mean_abs_diff",
        "exact_agreement"}``: means of the scores, mean of |human - auto|, and the share of samples where both are
        equal (meaningful for 0/1 scores).

    Raises:
        BadInput: missing file, a bad line (named), a split not of tier human-audit, an unknown item, run,
            sample, batch or sample key, a score off its batch's scale; a file with no records, or none with a
            human_score, or one that scores a sample twice by the same rater (nothing read then). Nothing is
            stored unless every line is valid.
    """
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"{p} not found; pass the file written by 'evalgate splits export-audit', with scores")
    raw = p.read_bytes()
    records: list[tuple[int, AuditRecord]] = []
    for i, rec in iter_jsonl(raw, p, "fix that line"):
        try:
            records.append((i, AuditRecord.model_validate(rec)))
        except ValidationError as e:
            err = e.errors()[0]
            raise BadInput(f"{p}:{i}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from e
    if not any(r.human_score is not None for _, r in records):
        raise BadInput(f"{p}: no record has a human_score ({len(records)} record(s), all unscored): fill in "
                       "human_score for the items you scored, then import again" if records else
                       f"{p} holds no records; pass the file written by 'evalgate splits export-audit', with scores")
    who = actor_name(actor, env=store.env)
    known = store.rater_names()  # one person, one rater: a name as another already written is stored as that one
    default_rater = rater_name(rater or who, known, f"{p}: --rater" if rater else f"{p}: the actor")
    for i, r in records:
        if r.rater is not None:
            r.rater = rater_name(r.rater, known, f"{p}:{i}")
    _no_second_score(p, records, default_rater)
    manager = SplitManager(store)
    item_ids: dict[str, set[str]] = {}
    for split in sorted({r.split for _, r in records}):
        _human_audit_manifest(manager, split, IMPORT_PURPOSE, who)
        item_ids[split] = {str(it["id"]) for it in manager.open(split, IMPORT_PURPOSE, who, detail=p.name).items}
    auto: dict[str, dict[tuple[str, int], float]] = {}
    rows: list[dict[str, Any]] = []
    rated: dict[str, list[dict[str, Any]]] = {}
    pairs: list[tuple[float, float]] = []
    skipped = 0
    for i, r in records:
        if r.human_score is None:
            skipped += 1
            continue
        if r.item_id not in item_ids[r.split]:
            raise BadInput(f"{p}:{i}: item {r.item_id!r} is not in split {r.split}")
        auto_score = None
        if r.batch_id is not None or r.sample_key is not None:
            rating, b = _blind_rating(store, p, i, r, auto, default_rater)
            rated.setdefault(b.batch_id, []).append(rating)
            if rating["auto_score"] is not None:
                span = b.scale_max - b.scale_min
                pairs.append(((rating["score"] - b.scale_min) / span, rating["auto_score"]))
            continue
        if r.run_id is not None:
            if r.run_id not in auto:
                auto[r.run_id] = {(s.item_id, s.sample_index): s.score for s in store.samples(r.run_id)}
            if r.sample_index is None or (r.item_id, r.sample_index) not in auto[r.run_id]:
                raise BadInput(f"{p}:{i}: run {r.run_id} has no sample {r.item_id!r} #{r.sample_index}")
            auto_score = auto[r.run_id][(r.item_id, r.sample_index)]
            pairs.append((r.human_score, auto_score))
        rows.append({"split": r.split, "item_id": r.item_id, "run_id": r.run_id or "",
                     "sample_index": -1 if r.sample_index is None else r.sample_index,
                     "rater": r.rater or default_rater, "score": r.human_score, "auto_score": auto_score,
                     "note": r.note, "source_sha256": hashlib.sha256(raw).hexdigest(), "imported_by": who,
                     "imported_at": store.clock()})
    store.put_human_scores(rows)
    sha = hashlib.sha256(raw).hexdigest()
    for batch_id, ratings in rated.items():
        b = store.batches(batch_id)[0]
        store.import_ratings(batch_id, ratings, {"split": b.split, "run_id": b.run_id, "source_sha256": sha,
                                                 "imported_by": who})
    return {"imported": len(rows) + sum(map(len, rated.values())), "skipped_unscored": skipped,
            "splits": sorted(item_ids), "batches": {k: len(v) for k, v in rated.items()},
            "agreement": agreement(pairs)}


def _no_second_score(p: Path, records: list[tuple[int, AuditRecord]], default_rater: str) -> None:
    """Refuse a file that scores one sample (a blind record's batch and sample key, else the split, item, run and
    sample index) twice by the same rater: the later line would silently replace the earlier one.

    Raises:
        BadInput: naming both lines.
    """
    seen: dict[tuple[Any, ...], int] = {}
    for i, r in records:
        if r.human_score is None:
            continue
        who = r.rater or default_rater
        key = (("batch", r.batch_id, r.sample_key, who) if r.batch_id is not None or r.sample_key is not None
               else ("item", r.split, r.item_id, r.run_id, r.sample_index, who))
        if key in seen:
            raise BadInput(f"{p}:{i}: rater {who!r} already scored this sample on line {seen[key]} (item "
                           f"{r.item_id!r}); keep one score per sample and rater, then import again (nothing was "
                           "stored)")
        seen[key] = i


def _blind_rating(store: Store, p: Path, line: int, r: AuditRecord, auto: dict[str, dict[tuple[str, int], float]],
                  default_rater: str) -> tuple[dict[str, Any], BatchRow]:
    """A blind record's rating (``Store.import_ratings`` row) and its batch, checked: the batch exists on the
    record's split, the sample key is one of its samples and names the record's item, the score is a whole number
    on the batch's scale.

    Raises:
        BadInput: naming the line and what to fix.
    """
    found = store.batches(r.batch_id) if r.batch_id else []
    if not found or not r.sample_key:
        raise BadInput(f"{p}:{line}: batch {r.batch_id!r} / sample_key {r.sample_key!r}: no such rating batch; "
                       "import the file 'evalgate splits export-audit --run' wrote, unchanged but for human_score, "
                       "rater and note")
    b = found[0]
    if b.split != r.split:
        raise BadInput(f"{p}:{line}: batch {b.batch_id} is on split {b.split}, not {r.split}")
    items = {it.sample_key: (it.item_id, it.sample_index) for it in store.batch_items(b.batch_id)}
    if items.get(r.sample_key, (None,))[0] != r.item_id:
        raise BadInput(f"{p}:{line}: sample_key {r.sample_key!r} is not item {r.item_id!r} of batch {b.batch_id}")
    score = float(r.human_score or 0.0)
    if not score.is_integer() or not b.scale_min <= score <= b.scale_max:
        raise BadInput(f"{p}:{line}: human_score {r.human_score:g} is not a whole number on this batch's scale "
                       f"{b.scale_min}..{b.scale_max}")
    if b.run_id not in auto:
        auto[b.run_id] = {(s.item_id, s.sample_index): s.score for s in store.samples(b.run_id)}
    return {"sample_key": r.sample_key, "rater": r.rater or default_rater, "score": score, "note": r.note,
            "auto_score": auto[b.run_id].get(items[r.sample_key])}, b


def agreement(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    """Human vs automatic scores over ``(human, auto)`` pairs: n, both means, mean |human - auto|, and the share
    of exactly equal pairs. Values are None when there are no pairs."""
    n = len(pairs)
    if not n:
        return {"n": 0, "mean_human": None, "mean_auto": None, "mean_abs_diff": None, "exact_agreement": None}
    return {"n": n, "mean_human": sum(h for h, _ in pairs) / n, "mean_auto": sum(a for _, a in pairs) / n,
            "mean_abs_diff": sum(abs(h - a) for h, a in pairs) / n,
            "exact_agreement": sum(1 for h, a in pairs if h == a) / n}
