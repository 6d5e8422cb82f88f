"""Blind human rating of a run's samples: raters and their tokens, rating batches, the per-rater queue, and
submissions (the library behind ``evalgate serve`` and ``evalgate audit add-rater`` / ``audit batch create``).

- A **rater** has a name, a role (``rater`` or ``admin``) and a secret token; the store keeps only the token's
  sha256. Adding a rater again issues a new token and the old one stops working (a stale token is refused).
- A **batch** is a sample of one run's samples on a human-audit split, with a rubric and an integer score scale
  (one key per score, so at most ten points). Raters never see the checkpoint, the run or the automatic score.
- Each rater sees the batch in their own order: a shuffle seeded per rater and batch, recorded in the store the
  first time the rater opens the batch, so the order can be reproduced.
- Every view of a sample is a logged read of the split under the rater's name (``SplitManager.open``, purpose
  ``human-audit-rating``); a sample is shown only after its read is logged.
- A rater logs in to the browser with their token once; the page then holds a **session** id (the store keeps its
  sha256), which logout, ``SESSION_TTL`` or a new token for the rater ends.
- A rater sees the item's fields the run's protocol renders (the question), and the other fields (the gold answer,
  a reference solution, tests) only where the batch was made with ``show_gold``, below the question.
- A submission carries a one-time form token issued with the page to that rater; the token is spent in the same
  transaction that stores the rating, so a replayed form is refused and a refused submission writes nothing.
"""

from __future__ import annotations

import hashlib
import random
import secrets
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from evalgate.core.enums import Tier
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.core.fileio import read_text
from evalgate.core.text import name_key
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import actor_name
from evalgate.store import BatchItem, BatchRow, RaterRow, RunRow, SampleScore, Store

RATING_PURPOSE = "human-audit-rating"
"""The access-log purpose of a rater's view of a sample."""
BATCH_PURPOSE = "human-audit-batch"
"""The access-log purpose of a refused batch creation (a run on a split of another tier)."""
FORM_PURPOSE = "rate"
"""The purpose a rating form's one-time token is issued for."""
FORM_TOKEN_TTL = timedelta(hours=12)
"""How long a rating page's one-time form token stays valid (a rater's working day); older ones are refused and
pruned when the next token is issued, so the ``form_tokens`` table stays small."""
DEFAULT_RUBRIC = ("Score how well the completion answers the item: the lowest score for a wrong, empty or evasive "
                  "answer, the highest for a correct, complete and concise one. Judge the answer, not its length.")
ROLES = ("rater", "admin")


class NotAuthorized(RefusedByPolicy):
    """No valid token (HTTP 401) or a token whose role may not see the page (HTTP 403). Exit 2."""

    def __init__(self, message: str, status: int = 401):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Rater:
    """An authenticated rater: ``name`` and ``role`` (``rater`` or ``admin``)."""

    name: str
    role: str


SESSION_TTL = timedelta(hours=12)
"""How long a browser session lasts after login (a rater's working day, as a form token)."""
NOTE_MAX_CHARS = 4000  # a rater's note: a few paragraphs, sealed and stored with the score


def token_sha256(token: str) -> str:
    """sha256 of a token's text (what the store keeps instead of the token)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def rater_name(name: str, known: list[str], where: str) -> str:
    """The name a rating is stored under: ``name`` with white space trimmed and runs made one space, and, when it
    reads as a name in ``known`` (``core.text.name_key``: case, NFKC width, invisible characters and look-alike
    letters of other scripts aside), that name as ``known`` writes it, so one person is never counted as two raters
    (the raters count and the agreement between raters). A new name is added to ``known``.

    Raises:
        BadInput: a name that is empty or holds control characters (``where`` says where it came from).
    """
    clean = " ".join(name.split())
    if not name_key(clean) or any(unicodedata.category(c) == "Cc" for c in clean):
        raise BadInput(f"{where}: rater {name!r} is no name (empty, or with control characters); give the rater's "
                       "name")
    for k in known:
        if name_key(k) == name_key(clean):
            return k
    known.append(clean)
    return clean


def add_rater(name: str, admin: bool = False, base_url: str = "http://127.0.0.1:8765", *, store: Store,
              actor: str | None = None) -> dict[str, Any]:
    """Create a rater (or replace an existing rater's token) and return the login URL holding the new token.

    Args:
        name: the rater's name (recorded with every score and every read they make).
        admin: role ``admin`` (may open the dashboard and the agreement page) instead of ``rater``.
        base_url: where ``evalgate serve`` listens, for the printed URL.

    Returns:
        ``{"name", "role", "token", "url", "replaced"}``; the token is shown once and stored only as its sha256.

    Raises:
        BadInput: an empty name or one with characters other than letters, digits, ``.``, ``_``, ``-``, ``@``; a
            name that reads as another rater's the store holds (``core.text.name_key``: case, width, look-alike
            letters of other scripts aside), which would count one person twice.
    """
    if not name or not all(c.isalnum() or c in "._-@" for c in name):
        raise BadInput(f"rater name {name!r}: use letters, digits and . _ - @ only")
    same = [n for n in store.rater_names() if name_key(n) == name_key(name) and n != name]
    if same:
        raise BadInput(f"rater name {name!r} reads as the existing rater {same[0]!r} (case, width or look-alike "
                       f"letters aside): one person is one rater; give {same[0]!r} to replace that rater's token, or "
                       "another name")
    token = secrets.token_urlsafe(24)
    role = "admin" if admin else "rater"
    replaced = store.put_rater(name, token_sha256(token), role, actor_name(actor, env=store.env))
    # the token rides in the fragment, which a browser never sends: the login page posts it (a GET never logs in)
    return {"name": name, "role": role, "token": token, "url": f"{base_url.rstrip('/')}/login#token={token}",
            "replaced": replaced}


def authenticate(store: Store, token: str | None, admin: bool = False) -> Rater:
    """The rater holding ``token``.

    Raises:
        NotAuthorized: no token or an unknown or replaced one (status 401); ``admin`` asked and the rater is not an
            admin (status 403).
    """
    if not token:
        raise NotAuthorized("no rater token: open the URL that 'evalgate audit add-rater NAME' printed")
    found = store.rater_by_token(token_sha256(token))
    if found is None:
        raise NotAuthorized("this rater token is not valid (unknown, or replaced by a newer 'evalgate audit "
                            "add-rater'); ask for a new URL")
    return _role_checked(found, admin)


def _role_checked(found: RaterRow, admin: bool) -> Rater:
    """The rater ``found`` (``name``, ``role``), refused (403) for an admin page unless an admin."""
    if admin and found.role != "admin":
        raise NotAuthorized(f"rater {found.name} is not an admin; this page needs an admin token "
                            "('evalgate audit add-rater NAME --admin')", status=403)
    return Rater(found.name, found.role)


def start_session(store: Store, token: str) -> str:
    """Log the holder of a rater ``token`` in: a new session id (shown once; the store keeps its sha256).

    Raises:
        NotAuthorized: the token is not a rater's (``authenticate``).
    """
    rater = authenticate(store, token)
    session = secrets.token_urlsafe(32)
    store.start_session(token_sha256(session), rater.name)
    return session


def session_rater(store: Store, session: str | None, admin: bool = False) -> Rater:
    """The rater whose session ``session`` is.

    Raises:
        NotAuthorized: no session, or one that ended (logout, ``SESSION_TTL``, a new token for the rater) or is
            unknown (status 401); ``admin`` asked and the rater is not an admin (403).
    """
    if not session:
        raise NotAuthorized("not logged in: open the URL that 'evalgate audit add-rater NAME' printed")
    found = store.session_rater(token_sha256(session), store.clock() - SESSION_TTL)
    if found is None:
        raise NotAuthorized("this session has ended (logged out, older than "
                            f"{SESSION_TTL.total_seconds() / 3600:g} h, or the rater's token was replaced); open "
                            "your login URL again")
    return _role_checked(found, admin)


def end_session(store: Store, session: str | None) -> bool:
    """Log out: end ``session`` in the store, so its cookie no longer works anywhere. Returns whether it was open."""
    return bool(session) and store.end_session(token_sha256(session or ""))


def parse_scale(text: str) -> tuple[int, int]:
    """``"1-5"`` -> ``(1, 5)``: an integer scale of at most ten points within 0..9 (one key per score).

    Raises:
        BadInput: not ``MIN-MAX``, or outside 0..9, or fewer than two points.
    """
    lo, sep, hi = text.partition("-")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise BadInput(f"--scale {text!r}: give MIN-MAX, e.g. 1-5 or 0-1")
    a, b = int(lo), int(hi)
    if not 0 <= a < b <= 9:
        raise BadInput(f"--scale {text!r}: scores must lie within 0..9 (one key each) with MIN < MAX")
    return a, b


def _pick(samples: list[SampleScore], n: int, stratify: str | None, rng: random.Random) -> list[SampleScore]:
    """``n`` samples at random; with ``stratify="score"``, the same share of each automatic-score value (largest
    remainders; every value present gets at least one when ``n`` allows)."""
    if n >= len(samples):
        return list(samples)
    if stratify is None:
        return rng.sample(samples, n)
    strata: dict[float, list[SampleScore]] = defaultdict(list)
    for s in samples:
        strata[s.score].append(s)
    keys = sorted(strata)
    exact = {k: n * len(strata[k]) / len(samples) for k in keys}
    take = {k: min(len(strata[k]), max(1 if n >= len(keys) else 0, int(exact[k]))) for k in keys}
    for k in sorted(keys, key=lambda k: exact[k] - int(exact[k]), reverse=True):
        if sum(take.values()) >= n:
            break
        if take[k] < len(strata[k]):
            take[k] += 1
    while sum(take.values()) > n:  # the minimum of one per value can overshoot: trim the largest strata
        take[max(keys, key=lambda k: take[k])] -= 1
    return [s for k in keys for s in rng.sample(strata[k], take[k])]


def create_batch(run_id: str, samples: int = 50, stratify: str | None = None, rubric_file: str | Path | None = None,
                 scale: str = "1-5", seed: int | None = None, *, store: Store,
                 actor: str | None = None, show_gold: bool = False) -> dict[str, Any]:
    """Make a rating batch from a complete run's samples (``evalgate audit batch create``).

    Args:
        run_id: a complete run on a human-audit split.
        samples: how many of its samples (all of them when the run has fewer).
        stratify: ``"score"`` draws the same share of each automatic-score value, so rare outcomes are rated too.
        rubric_file: text shown to raters above the scale (default ``DEFAULT_RUBRIC``).
        scale: ``MIN-MAX`` integer scale (``parse_scale``).
        seed: the selection's random seed (default: drawn and recorded).
        show_gold: raters see the item's fields the protocol's prompt does not render (the gold answer, a
            reference solution, tests) below the question; default: only what the model saw.

    Returns:
        ``{"batch_id", "run_id", "split", "samples", "scale", "stratify", "selection_seed", "show_gold"}``.

    Raises:
        BadInput: unknown or incomplete run, a run whose protocol the store does not hold, a bad flag or rubric
            file, a run without samples.
        RefusedByPolicy: the run's split is not tier human-audit (logged as refused).
    """
    who = actor_name(actor, env=store.env)
    if samples < 1:
        raise BadInput(f"--samples {samples}: give at least 1")
    if stratify not in (None, "score"):
        raise BadInput(f"--stratify {stratify!r}: the only stratification is 'score'")
    lo, hi = parse_scale(scale)
    rubric = DEFAULT_RUBRIC
    if rubric_file is not None:
        p = Path(rubric_file)
        if not p.is_file():
            raise BadInput(f"--rubric {p}: file not found; pass a text or Markdown file with the rubric")
        rubric = read_text(p).strip() or DEFAULT_RUBRIC  # BadInput naming the line of bytes that are not UTF-8
    runs = store.runs(run_id=run_id)
    if not runs:
        raise BadInput(f"unknown run {run_id!r}; list runs with 'evalgate runs'")
    run = runs[0]
    if run.status != "complete":
        raise BadInput(f"run {run_id} is {run.status}; a batch needs a complete run's samples")
    question_fields(store, run)  # the page shows what the protocol renders: refuse a batch it could not show
    manager = SplitManager(store)
    # the tier the run was made under, as well as its split's manifest today: a split name re-added under another
    # tier (its manifest deleted, then 'splits add NAME --tier human-audit') must not open its private runs to raters;
    # and the tiers the signed access log logged the run under, since its row is not signed (``RunRepo.run_tiers``)
    if run.tier != Tier.HUMAN_AUDIT or manager.manifest(run.split).tier != Tier.HUMAN_AUDIT \
            or set(store.run_tiers(run_id)) != {Tier.HUMAN_AUDIT}:
        manager.refuse(run.split, BATCH_PURPOSE, who,
                       f"run {run_id} is on split {run.split} (tier {run.tier}); people rate samples of "
                       "human-audit splits only: run the checkpoint on a human-audit split first", RefusedByPolicy)
    scored = store.sample_scores(run_id)
    if not scored:
        raise BadInput(f"run {run_id} has no samples to rate")
    selection_seed = seed if seed is not None else secrets.randbits(62)
    picked = _pick(scored, samples, stratify, random.Random(selection_seed))
    picked.sort(key=lambda s: (s.item_id, s.sample_index))
    batch_id = f"b-{store.clock():%Y%m%d}-{secrets.token_hex(4)}"
    store.create_batch(
        {"batch_id": batch_id, "run_id": run_id, "split": run.split, "rubric": rubric, "scale_min": lo,
         "scale_max": hi, "stratify": stratify, "selection_seed": selection_seed, "created_by": who,
         "created_at": store.clock(), "show_gold": show_gold},
        [{"sample_key": secrets.token_hex(8), "position": i, "item_id": s.item_id,
          "sample_index": s.sample_index} for i, s in enumerate(picked)])
    return {"batch_id": batch_id, "run_id": run_id, "split": run.split, "samples": len(picked),
            "scale": [lo, hi], "stratify": stratify, "selection_seed": selection_seed, "show_gold": show_gold}


def batch(store: Store, batch_id: str) -> BatchRow:
    """One batch's row.

    Raises:
        BadInput: unknown batch.
    """
    rows = store.batches(batch_id)
    if not rows:
        raise BadInput(f"unknown batch {batch_id!r}; make one with 'evalgate audit batch create --run RUN'")
    return rows[0]


def rater_order(store: Store, batch_id: str, rater: str) -> tuple[int, list[BatchItem]]:
    """The rater's shuffle seed for the batch (recorded on first use) and the batch's samples in that order."""
    seed = store.rater_seed(batch_id, rater, secrets.randbits(62))
    items = store.batch_items(batch_id)
    random.Random(seed).shuffle(items)
    return seed, items


def queue(store: Store, batch_id: str, rater: str) -> dict[str, Any]:
    """Where the rater stands in a batch: the next sample to show and the progress.

    The next sample is the first, in the rater's order, that the rater has neither scored nor skipped; when only
    skipped ones are left, the first skipped one.

    Returns:
        ``{"seed", "next": batch item or None, "scored", "skipped", "total"}``; only this rater's ratings count.
    """
    seed, items = rater_order(store, batch_id, rater)
    mine = {(r.item_id, r.sample_index): r for r in store.ratings(batch_id, rater)}
    scored = {k for k, r in mine.items() if r.score is not None}
    skipped = {k for k, r in mine.items() if r.score is None}
    key = lambda it: (it.item_id, it.sample_index)  # noqa: E731
    nxt = next((it for it in items if key(it) not in mine), None) or next(
        (it for it in items if key(it) in skipped), None)
    return {"seed": seed, "next": nxt, "scored": len(scored), "skipped": len(skipped - scored), "total": len(items)}


def question_fields(store: Store, run: RunRow) -> list[str]:
    """The item fields ``run``'s protocol renders into the prompt (``protocol.rendered_fields``): the question a
    rater reads.

    Raises:
        BadInput: the store holds no protocol ``name@version`` with the run's hash.
    """
    from evalgate.protocol.spec import rendered_fields

    ref = f"{run.protocol_name}@{run.protocol_version}"
    found = store.protocol_resolved(run.protocol_name, run.protocol_version)
    if found is None or found[0] != run.protocol_hash:
        raise BadInput(f"run {run.run_id}: this store holds no protocol {ref} with the run's hash "
                       f"{run.protocol_hash[:12]}, so the page cannot tell the question from the gold answer; "
                       "rate a run made with this store")
    return rendered_fields(found[1])


def view_sample(store: Store, b: BatchRow, rater: str, sample_key: str) -> dict[str, Any]:
    """The blind view of one sample: the question (the item fields the run's protocol renders), the gold answer
    where the batch shows it (``show_gold``: every other field but ``id``), and the completion, after logging the
    read.

    The read is ``SplitManager.open`` on the batch's split under the rater's name (purpose ``human-audit-rating``,
    detail naming the batch and the sample key), so it is checked against the split's policy and logged before
    anything is returned. Neither the checkpoint, the run nor the automatic score is returned.

    Returns:
        ``{"sample_key", "question": {field: value}, "gold": {field: value} or None, "completion"}``, the fields
        in item order.

    Raises:
        BadInput: the sample key is not in the batch; the run's protocol is not in the store; the split cannot
            be read (logged as refused).
        RefusedByPolicy: the split's policy refuses the read (logged).
    """
    target = next((i for i in store.batch_items(b.batch_id) if i.sample_key == sample_key), None)
    if target is None:
        raise BadInput(f"sample {sample_key!r} is not in batch {b.batch_id}")
    shown = set(question_fields(store, store.runs(run_id=b.run_id)[0]))
    opened = SplitManager(store).open(b.split, RATING_PURPOSE, rater,
                                      detail=f"batch {b.batch_id} sample {sample_key}")
    item = next((it for it in opened.items if str(it["id"]) == target.item_id), {})
    sample = next((s for s in store.samples(b.run_id)
                   if s.item_id == target.item_id and s.sample_index == target.sample_index), None)
    gold = {k: v for k, v in item.items() if k != "id" and k not in shown}
    return {"sample_key": sample_key, "question": {k: v for k, v in item.items() if k in shown},
            "gold": gold if b.show_gold else None, "completion": (sample.text if sample else None) or ""}


def issue_form_token(store: Store, rater: str) -> str:
    """A one-time token for one rating form, bound to ``rater`` (the store keeps its sha256)."""
    token = secrets.token_urlsafe(24)
    store.issue_form_token(token_sha256(token), rater, FORM_PURPOSE, FORM_TOKEN_TTL)
    return token


def parse_score(text: str | None, b: BatchRow) -> float | None:
    """A submitted score: None for a skip (``skip``), else an integer on the batch's scale.

    Raises:
        BadInput: not an integer, or outside the scale.
    """
    raw = (text or "").strip()
    if raw == "skip":
        return None
    if not raw.lstrip("-").isdigit():
        raise BadInput(f"score {raw!r} is not a whole number; give {b.scale_min}..{b.scale_max} or skip")
    value = int(raw)
    if not b.scale_min <= value <= b.scale_max:
        raise BadInput(f"score {value} is outside this batch's scale {b.scale_min}..{b.scale_max}; nothing "
                       "was stored")
    return float(value)


def submit(store: Store, rater: str, batch_id: str, form_token: str, sample_key: str, score: str | None,
           note: str | None = None) -> dict[str, Any]:
    """Store one rating (or skip) from a form; a resubmission replaces the rater's earlier score (both logged in
    ``audit_rating_events``). The score is mirrored into ``human_scores`` (source ``batch:<id>``) next to the
    sample's automatic score, so ``evalgate splits import-audit`` users and the gate read one table.

    Returns:
        ``{"action": "scored" | "replaced" | "skipped", "score"}``.

    Raises:
        BadInput: unknown batch, a sample of another batch, a score that is not on the scale, a note longer than
            ``NOTE_MAX_CHARS``.
        RefusedByPolicy: a replayed, forged or another rater's form (nothing stored).
    """
    b = batch(store, batch_id)
    value = parse_score(score, b)
    if note is not None and len(note) > NOTE_MAX_CHARS:
        raise BadInput(f"the note has {len(note)} characters, more than the {NOTE_MAX_CHARS} allowed; shorten it")
    if not form_token:
        raise RefusedByPolicy("the form carries no form token; reload the page and submit again")
    auto = {(s.item_id, s.sample_index): s.score for s in store.sample_scores(b.run_id)}
    target = next((i for i in store.batch_items(batch_id) if i.sample_key == sample_key), None)
    human = None
    if target is not None:
        human = {"split": b.split, "run_id": b.run_id, "rater": rater,
                 "auto_score": auto.get((target.item_id, target.sample_index)),
                 "source_sha256": f"batch:{batch_id}", "imported_by": rater}
    action = store.submit_rating(form_token_sha256=token_sha256(form_token), purpose=FORM_PURPOSE, ttl=FORM_TOKEN_TTL,
                                 batch_id=batch_id,
                                 rater=rater, sample_key=sample_key, score=value, note=(note or "").strip() or None,
                                 human_score=human)
    return {"action": action, "score": value}
