"""What a model wrote: a run's samples (``evalgate samples``) and the items whose status changed between two runs
(``evalgate compare``, with an exact McNemar test).

Both show per-item results derived from a split, so both are reads of it, under its tier policy: a permitted view
is logged (cached, purpose ``inspect-samples`` or ``compare-runs``; the run id in the row), and a refused one is
logged as refused before the error is raised. Per-item outputs of the private tier are never shown here, to any
caller (the gate reads per-item scores for its statistics, never texts); the human-audit tier's are
shown to raters through ``evalgate splits export-audit NAME --run RUN_ID``, not here. Sample text is read through
``Store.samples`` only, which owns how stored text is kept (encrypted or not).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evalgate.core.enums import SampleStatus, Tier
from evalgate.core.errors import BadInput
from evalgate.core.results import Result
from evalgate.scoring.base import STATUSES, score_statuses
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import actor_name
from evalgate.store import RunRow, Store

# What a stored sample's status can be: the scorers' statuses, plus the agent loop's ``tool_violation`` (a sample
# ended by a tool violation under ``tools.violation: end``, ``evalgate.runner.agent.metrics``).
AGENT_STATUSES = (SampleStatus.TOOL_VIOLATION.value,)
SAMPLE_STATUSES = (*STATUSES, *AGENT_STATUSES)
"""The built-in statuses; ``sample_statuses()`` adds plugin scorers'."""


def sample_statuses() -> tuple[str, ...]:
    """Every status a stored sample can have: the registered scorers' (``scoring.base.score_statuses``) and the
    agent loop's."""
    return (*score_statuses(), *AGENT_STATUSES)
SAMPLES_PURPOSE = "inspect-samples"
COMPARE_PURPOSE = "compare-runs"
# Tiers whose per-item outputs this module never shows (DESIGN.md: private outputs are never shown; human-audit
# samples go to raters through export-audit, which is its own logged read).
GUARDED_TIERS = (Tier.PRIVATE, Tier.HUMAN_AUDIT)


class Sample(Result):
    """One sample of a run as shown to a person."""

    item_id: str
    """The item's id in the split."""
    sample_index: int
    """Index among the item's n samples (0-based)."""
    status: str
    """The scorer's status (``sample_statuses()``: correct, wrong, truncated, ...; a plugin scorer may add its own)."""
    score: float
    """The sample's score (0..1)."""
    extracted: str | None
    """The answer the scorer extracted, or None."""
    detail: str | None
    """The scorer's note (why wrong, the error), or None."""
    prompt: str | None
    """The rendered prompt sent to the engine, or None when the store holds none."""
    completion: str | None
    """The completion text, or None when the store holds none."""
    finish_reason: str | None
    """``stop`` or ``length`` (cut off at max_tokens), or None."""
    completion_tokens: int | None
    """Tokens in the completion, or None."""
    cached: bool
    """Whether the completion came from the generation cache."""


class Samples(Result):
    """A run's samples, filtered (``run_samples``, ``Workspace.samples``; ``evalgate samples --json`` prints
    ``as_dict()``)."""

    run_id: str
    """The run."""
    split: str
    """The run's split."""
    tier: Tier
    """The split's tier (never private or human-audit: those runs' samples are not shown here)."""
    protocol: str
    """``name@version`` of the run's protocol."""
    checkpoint_path: str
    """The checkpoint the run evaluated, as given."""
    counts: dict[str, int]
    """Samples per status over the whole run (not only the filtered ones)."""
    total: int
    """Samples that match the filters."""
    shown: int
    """Samples in ``samples``: ``total`` cut to the limit."""
    samples: list[Sample]
    """The samples shown, in item and sample-index order."""


class RunSide(Result):
    """One of the two runs of a ``Comparison``."""

    run_id: str
    """The run."""
    checkpoint_path: str
    """Its checkpoint, as given."""
    train_run: str | None
    """The training run the checkpoint belongs to, or None."""
    train_seed: int | None
    """The training seed, or None."""
    step: int | None
    """The training step, or None."""
    metrics: dict[str, Any]
    """The run's metrics as stored (``pass@1``, ``pass@1_stderr``, ...)."""


class ChangedSample(Result):
    """A sample whose status differs between the two runs of a ``Comparison``."""

    item_id: str
    """The item's id."""
    sample_index: int
    """The sample's index among the item's samples."""
    a_status: str
    """Its status in run a."""
    b_status: str
    """Its status in run b."""
    a_score: float
    """Its score in run a."""
    b_score: float
    """Its score in run b."""


class Comparison(Result):
    """Two runs of one protocol on one split, sample by sample (``compare_runs``, ``Workspace.compare``;
    ``evalgate compare --json`` prints ``as_dict()``)."""

    a: RunSide
    """The first run (e.g. the earlier checkpoint)."""
    b: RunSide
    """The second run."""
    split: str
    """The split both runs read."""
    tier: Tier
    """Its tier."""
    protocol: str
    """``name@version`` of the protocol."""
    pairs: int
    """Samples present in both runs (paired by item id and sample index)."""
    unpaired: int
    """Samples present in one run only (left out of every count below)."""
    both_correct: int
    """Pairs correct in both runs."""
    both_not_correct: int
    """Pairs not correct in either run."""
    a_only_correct: int
    """Pairs correct in run a only (McNemar's b)."""
    b_only_correct: int
    """Pairs correct in run b only (McNemar's c)."""
    changed: int
    """Pairs whose status differs (``rows``); a change between two not-correct statuses counts too."""
    transitions: dict[str, int]
    """``"a_status -> b_status"`` -> pairs, most frequent first."""
    mcnemar_p: float
    """The two-sided exact McNemar p-value on correct / not correct (``mcnemar_exact``)."""
    rows: list[ChangedSample]
    """The changed pairs, in item and sample-index order."""


def stored_run(store: Store, run_id: str) -> RunRow:
    """The stored run ``run_id`` (its ``runs`` row: ``run_id``, ``split``, ``tier``, ``status``,
    ``checkpoint_digest``, ``protocol_hash``, ...). Reads no split.

    Raises:
        BadInput: no such run in the store (names the store and ``evalgate runs``).
    """
    rows = store.runs(run_id=run_id)
    if not rows:
        raise BadInput(f"no run {run_id!r} in the store {store.path}; list runs with 'evalgate runs'")
    return rows[0]


def admit_view(store: Store, run: RunRow, purpose: str, actor: str) -> None:
    """Check and log a view of ``run``'s per-item results as a read of its split: call it before showing any
    sample of a stored run (``run_samples``, ``compare_runs``, ``frames.samples_frame``).

    Args:
        store: the store holding the run and the access log.
        run: the run's row (``stored_run``).
        purpose: the read's purpose, checked against the split's policy (``SAMPLES_PURPOSE``, ``COMPARE_PURPOSE``).
        actor: who reads (logged).

    Raises:
        RefusedByPolicy: a guarded tier, the split's policy refuses ``purpose``, or its budget is used up (each
            logged as refused first).
        BadInput: the run's split has no manifest any more.
    """
    manager = SplitManager(store)
    split, tier = run.split, run.tier
    # the tier the signed access log logged the run under outranks its unsigned row (``RunRepo.run_tiers``)
    logged = store.run_tiers(run.run_id)
    guarded = [t for t in GUARDED_TIERS if t in logged]
    if guarded:
        tier = guarded[0]
        split = logged[tier]
    if tier in GUARDED_TIERS:
        how = ("per-item outputs of the private tier are never shown; use 'evalgate runs' for the run's metrics"
               if tier == Tier.PRIVATE else
               f"raters see its samples through 'evalgate splits export-audit {split} --run {run.run_id}' "
               "(a logged read)")
        manager.refuse(split, purpose, actor, f"run {run.run_id} is on split {split} (tier {tier}): {how}")
    m, _ = manager.check(split, purpose, actor, None, run.checkpoint_digest, run.protocol_hash)
    manager.log_read(m, actor, purpose, True, run.checkpoint_digest, run.protocol_hash, run.run_id)


def run_samples(run_id: str, item: str | None = None, status: str | None = None, limit: int | None = None,
                actor: str | None = None, *, store: Store) -> Samples:
    """A run's samples with rendered prompt, completion, extracted answer, score and status (a logged read).

    Args:
        run_id: the run.
        item: only this item id.
        status: only samples with this status (one of ``SAMPLE_STATUSES``).
        limit: at most this many samples (after filtering), in item and sample-index order.
        actor: who reads (default the store's environment's, ``actor_name``).
        store: the store (the workspace's).

    Returns:
        The ``Samples``: the run's split, tier, protocol and checkpoint, ``counts`` by status over the whole run,
        ``total`` (matching the filters), ``shown`` and the ``samples``.

    Raises:
        BadInput: unknown run, a run not complete (interrupted, failed, running), unknown status, an item the run
            does not have, a limit below 1.
        RefusedByPolicy: the view is refused (see ``admit_view``; logged).
    """
    if status is not None and status not in sample_statuses():
        raise BadInput(f"--status {status!r} is not a sample status; known: {', '.join(sample_statuses())}")
    if limit is not None and limit < 1:
        raise BadInput(f"--limit {limit}: give a positive number of samples")
    run = stored_run(store, run_id)
    if run.status != "complete":  # before the read: an unfinished run has no scored samples to show
        raise BadInput(f"run {run_id} is {run.status}, not complete: its samples are scored and stored when "
                       "the run completes. Rerun the same 'evalgate run' command (what it generated is reused), "
                       "then look again")
    admit_view(store, run, SAMPLES_PURPOSE, actor_name(actor, env=store.env))
    rows = store.samples(run_id)
    if item is not None and not any(r.item_id == item for r in rows):
        raise BadInput(f"run {run_id} has no item {item!r} ({len({r.item_id for r in rows})} items)")
    picked = [r for r in rows if (item is None or r.item_id == item) and (status is None or r.status == status)]
    shown = [Sample(item_id=r.item_id, sample_index=r.sample_index, status=r.status, score=r.score,
                    extracted=r.extracted, detail=r.detail, prompt=r.prompt, completion=r.text,
                    finish_reason=r.finish_reason, completion_tokens=r.completion_tokens, cached=bool(r.cached))
             for r in picked[:limit]]
    return Samples(run_id=run_id, split=run.split, tier=run.tier,
                   protocol=f"{run.protocol_name}@{run.protocol_version}",
                   checkpoint_path=run.checkpoint_path, counts=dict(Counter(r.status for r in rows)),
                   total=len(picked), shown=len(shown), samples=shown)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for paired binary outcomes.

    Under the null hypothesis that both runs are equally often correct, each discordant pair is equally likely to
    go either way, so ``b`` given ``b + c`` is Binomial(b + c, 1/2) (McNemar 1947, "Note on the sampling error of
    the difference between correlated proportions or percentages", Psychometrika 12(2):153-157; the exact
    conditional form of his test). Concordant pairs carry no information about the difference.

    Args:
        b: pairs correct in run A and not in run B.
        c: pairs correct in run B and not in run A.

    Returns:
        The two-sided p-value (``scipy.stats.binomtest``); 1.0 when there is no discordant pair.
    """
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


def compare_runs(run_a: str, run_b: str, actor: str | None = None, *, store: Store) -> Comparison:
    """Samples whose status changed between two runs of one protocol on one split, paired by item id and sample
    index, with an exact McNemar test on correct/not correct (a logged read of the split, once per run).

    Args:
        run_a: the first run (e.g. the earlier checkpoint).
        run_b: the second run.
        actor: who reads (default the store's environment's, ``actor_name``).
        store: the store (the workspace's).

    Returns:
        The ``Comparison``: both runs, the pair counts (McNemar's b is ``a_only_correct``, c ``b_only_correct``),
        ``transitions`` (``"wrong -> correct"`` -> n), ``mcnemar_p`` and the changed pairs (``rows``).

    Raises:
        BadInput: an unknown or unfinished run, the same run twice, runs of different protocol hashes, splits or
            split contents (their items cannot be paired).
        RefusedByPolicy: the view is refused (private or human-audit tier, split policy or budget; logged).
    """
    if run_a == run_b:
        raise BadInput(f"compare needs two different runs, got {run_a} twice")
    a, b = stored_run(store, run_a), stored_run(store, run_b)
    for r in (a, b):
        if r.status != "complete":
            raise BadInput(f"run {r.run_id} is {r.status}, not complete: it has no scored samples to compare")
    for key, what in (("protocol_hash", "protocol hashes"), ("split", "splits"), ("split_sha256", "split contents")):
        va, vb = getattr(a, key), getattr(b, key)
        if va != vb:
            names = "" if key == "split" else (  # hashes need the names beside them; split names say it already
                f"; protocols {a.protocol_name}@{a.protocol_version} vs {b.protocol_name}@"
                f"{b.protocol_version}, splits {a.split} vs {b.split}")
            raise BadInput(
                f"runs {run_a} and {run_b} have different {what} ({str(va)[:16]} vs {str(vb)[:16]}{names}): "
                "their samples are not paired outcomes of one evaluation. Compare runs of one protocol on one "
                "split's current content")
    who = actor_name(actor, env=store.env)
    admit_view(store, a, COMPARE_PURPOSE, who)
    admit_view(store, b, COMPARE_PURPOSE, who)
    sa = {(r.item_id, r.sample_index): r for r in store.sample_scores(run_a)}
    sb = {(r.item_id, r.sample_index): r for r in store.sample_scores(run_b)}
    keys = sorted(sa.keys() & sb.keys())
    cells = Counter((sa[k].status == "correct", sb[k].status == "correct") for k in keys)
    rows = [ChangedSample(item_id=k[0], sample_index=k[1], a_status=sa[k].status, b_status=sb[k].status,
                          a_score=sa[k].score, b_score=sb[k].score)
            for k in keys if sa[k].status != sb[k].status]
    only_a, only_b = cells[(True, False)], cells[(False, True)]

    def side(r: RunRow) -> RunSide:
        return RunSide(run_id=r.run_id, checkpoint_path=r.checkpoint_path, train_run=r.train_run,
                       train_seed=r.train_seed, step=r.step, metrics=dict(r.metrics or {}))

    return Comparison(
        a=side(a), b=side(b), split=a.split, tier=a.tier,
        protocol=f"{a.protocol_name}@{a.protocol_version}", pairs=len(keys),
        unpaired=len(sa.keys() ^ sb.keys()), both_correct=cells[(True, True)],
        both_not_correct=cells[(False, False)], a_only_correct=only_a, b_only_correct=only_b, changed=len(rows),
        transitions=dict(Counter(f"{r.a_status} -> {r.b_status}" for r in rows).most_common()),
        mcnemar_p=mcnemar_exact(only_a, only_b), rows=rows)
