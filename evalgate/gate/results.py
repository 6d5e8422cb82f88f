"""What the gate found, as typed values: per-checkpoint and per-seed results, the decision runs, the statistics, the
rule outcomes and the ``Verdict`` that holds them. ``Verdict.as_dict`` is the one place the JSON document (``gate
--json``, the JSON report, the HTML report's data) is built."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from evalgate.core.formatting import num
from evalgate.core.results import Metrics, ReadByKey, Result, dict_read
from evalgate.core.stats import DETECTION_POWER, TOO_SMALL_DIFFERENCE, items_to_detect, minimum_detectable_difference
from evalgate.diagnostics.guards import SeedGuards
from evalgate.diagnostics.signals import Finding
from evalgate.gate.policy import GatePolicy
from evalgate.rlhf.reward_rules import RewardAuditRules


@dataclass
class CheckpointResult:
    """One checkpoint's selection run (the latest per checkpoint digest).

    Attributes:
        digest: checkpoint digest. path: checkpoint path as run. step: training step (None: unknown).
        train_run: training run name. run_id: the selection run. status: the run's status.
        value: the policy metric on the selection split (None when the run has none). stderr: its stderr.
        metrics: behaviour metrics (``mean_completion_tokens``, ``truncation_rate``, ``mean_repetition``), a
            ``Metrics``.
        failed_reasons: why the checkpoint is failed (empty: not failed).
        error: the run's error (a failed run).
        provenance: where the run's train_run, train_seed and step came from (``Checkpoint.provenance``; None for
            runs stored before migration 16).
    """

    digest: str
    path: str
    step: int | None
    train_run: str | None
    run_id: str
    status: str
    value: float | None
    stderr: float | None
    metrics: Metrics
    failed_reasons: list[str] = field(default_factory=list)
    error: str | None = None
    provenance: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Every field, ``metrics`` as its plain dict (``document``)."""
        return document(self)


_ATOMS: tuple[type, ...] = (str, int, float, type(None))
"""Immutable leaves ``document`` returns as they are (``copy.deepcopy`` returns them too, slower: most of a
verdict's thousands of values are these)."""


def document(value: Any) -> Any:
    """``value`` as a verdict document holds it: ``dataclasses.asdict``'s shape (a dataclass as a dict of its fields,
    recursively; lists, tuples and dicts through) with each ``Metrics`` as its plain dict, a pydantic model as its
    ``model_dump()`` and a row the documents hold flat as its ``as_dict()``, so ``json.dumps`` takes
    it and ``gate.history.load_verdict`` reads it back."""
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, Metrics):
        return value.as_dict()
    if isinstance(value, ProxyCheckpoint | ProxyEntry | AuditSamples):
        return value.as_dict()
    if isinstance(value, Result):
        return value.as_dict()
    if isinstance(value, BaseModel):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: document(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple, as asdict rebuilds it
        return type(value)(*(document(v) for v in value))
    if isinstance(value, list | tuple):
        return type(value)(document(v) for v in value)
    if isinstance(value, dict):
        return {k: document(v) for k, v in value.items()}
    return copy.deepcopy(value)


@dataclass(frozen=True)
class AuditSample:
    """One dev sample the report shows for audit (``Verdict.samples``; never a private split's): from a seed's best
    checkpoint's selection run.

    Attributes:
        seed: the training seed. step: the checkpoint's training step. run_id: the selection run.
        item_id, sample_index: the sample. sample_seed: its sampling seed. score: its score. status: its status
        (``SampleStatus``). completion_tokens, finish_reason, extracted: as stored. text: the completion, cut to the
        report's limit (1,500 characters).
        trajectory: an agentic run's turns as the report shows them (``views.trajectories.trajectory_view``'s
            document); None for a run without tools.
    """

    seed: int | None
    step: int | None
    run_id: str
    item_id: str
    sample_index: int
    sample_seed: int
    score: float
    status: str
    completion_tokens: int | None
    finish_reason: str | None
    extracted: Any
    text: str
    trajectory: dict[str, Any] | None = None


@dataclass(frozen=True)
class AuditSamples:
    """The dev samples the report shows for audit (``Verdict.samples``): the seeds' best checkpoints' selection-run
    samples, ``k`` of each kind (3), as ``AuditSample`` rows. Empty (false) when those runs have no stored samples.

    Attributes:
        highest_scoring: by score, highest first (ties: item id). lowest_scoring: by score, lowest first.
        longest: by completion tokens, most first.
    """

    highest_scoring: list[AuditSample] = field(default_factory=list)
    lowest_scoring: list[AuditSample] = field(default_factory=list)
    longest: list[AuditSample] = field(default_factory=list)

    KINDS = ("highest_scoring", "lowest_scoring", "longest")
    """The kinds, in the order every report shows them."""

    def __bool__(self) -> bool:
        return any(getattr(self, k) for k in self.KINDS)

    def rows(self) -> list[AuditSample]:
        """Every shown sample, kind by kind (a sample shown under two kinds twice)."""
        return [r for k in self.KINDS for r in getattr(self, k)]

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> AuditSamples:
        """From a stored verdict's ``samples`` (``as_dict``; ``{}``: none; a row stored before trajectories were
        kept has none)."""
        return cls(**{k: [AuditSample(**r) for r in doc.get(k, [])] for k in cls.KINDS})

    def as_dict(self) -> dict[str, Any]:
        """``{"highest_scoring", "lowest_scoring", "longest"}`` of the rows' fields; ``{}`` when empty (as the
        stored verdict and the ``--json`` document held it before it was typed)."""
        return {k: [dataclasses.asdict(r) for r in getattr(self, k)] for k in self.KINDS} if self else {}

    def __getitem__(self, kind: str) -> list[AuditSample]:
        """``samples["longest"]``, as when ``Verdict.samples`` was a dict: deprecated for one release (read the
        attribute)."""
        dict_read(f"Verdict.samples[{kind!r}]", f"samples.{kind}")
        if kind not in self.KINDS:
            raise KeyError(kind)
        return list(getattr(self, kind))

    def items(self) -> list[tuple[str, list[AuditSample]]]:
        """``(kind, rows)`` of the kinds that have rows, as the dict's ``items()`` gave them: deprecated for one
        release (``rows()``, or the attributes)."""
        dict_read("Verdict.samples.items()", "samples.rows() or the attributes")
        return [(k, list(getattr(self, k))) for k in self.KINDS if self]

    def values(self) -> list[list[AuditSample]]:
        """Each kind's rows, as the dict's ``values()`` gave them: deprecated for one release (``rows()``)."""
        dict_read("Verdict.samples.values()", "samples.rows()")
        return [list(getattr(self, k)) for k in self.KINDS if self]


@dataclass(frozen=True)
class SuspiciousSample:
    """A sample the reward audit flags (``rlhf.reward_audit``): the sample, why (``reasons``: reward-human mismatch,
    length inflation, repetition), its reward and mean human score in [0, 1], token counts (the baseline's mean on the
    item), repetition ratio and completion ``text`` (cut to the report's limit; never in the ``--json`` document)."""

    item_id: str
    sample_index: int
    reasons: list[str]
    reward: float | None
    human: float | None
    completion_tokens: int | None
    baseline_tokens: float | None
    repetition: float | None
    text: str


@dataclass(frozen=True)
class SpearmanCI(ReadByKey):
    """Spearman's rho of n paired scores with its percentile bootstrap CI (``human.agreement.spearman_ci``).

    Attributes:
        n: pairs. rho: Spearman's rho (None when n < 3 or a side is constant). ci: ``[low, high]`` at 95 % (None
            without rho, or when every resample had a constant side).
    """

    n: int
    rho: float | None
    ci: list[float] | None


@dataclass(frozen=True)
class AgreementCI(ReadByKey):
    """An agreement statistic with its percentile bootstrap CI over samples (``human.agreement.proxy_agreement``:
    Cohen's kappa, the quadratic-weighted kappa, Krippendorff's alpha). ``value`` None where undefined (no pairs, one
    side constant), and then ``ci`` None too; ``ci`` is ``[low, high]`` at 95 %."""

    value: float | None
    ci: list[float] | None


@dataclass(frozen=True)
class BinaryKappa(ReadByKey):
    """Cohen's kappa of two scores binarised at 0.5 (``human.agreement.cohen_kappa``; Cohen 1960).

    Attributes:
        kappa: ``(p_o - p_e) / (1 - p_e)`` (None: no pairs, or chance agreement 1). observed: ``p_o``, the share of
            pairs on the same side (None: no pairs). confusion: ``[[auto-/human-, auto-/human+], [auto+/human-,
            auto+/human+]]`` counts.
    """

    kappa: float | None
    observed: float | None
    confusion: list[list[int]]


@dataclass(frozen=True)
class RewardAgreement(ReadByKey):
    """A rated run's reward (or automatic score) against the raters' mean (``RewardAudit.agreement``;
    ``human.agreement.run_agreement`` without its per-sample rows).

    Attributes:
        run_id: the rated run. against: ``reward`` or ``automatic score``. n_samples: samples with both. raters: who
        rated. spearman: ``SpearmanCI``. kappa: ``BinaryKappa``. alpha: Krippendorff's alpha (ordinal) between raters
        (None: fewer than two raters, or no sample rated twice).
    """

    run_id: str
    against: str
    n_samples: int
    raters: list[str]
    spearman: SpearmanCI
    kappa: BinaryKappa
    alpha: float | None


@dataclass(frozen=True)
class AuditRule(ReadByKey):
    """The reward audit's gate rule on one run (``RewardAudit.rule``; ``rlhf.reward_audit.spearman_rule``):
    ``passed`` None when the rule is off or not applicable (no human scores, or rho undefined), ``detail`` says
    which and why, or the rho against its threshold."""

    passed: bool | None
    detail: str


@dataclass(frozen=True)
class RewardAudit:
    """The reward audit of one best checkpoint's human-rated run (``Verdict.reward_audit``;
    ``rlhf.reward_audit.reward_audit``, whose document it holds field by field).

    Attributes:
        run_id: the rated run. reward_source: the training reward's file, or ``automatic score``.
        unmatched_rollouts: rollouts that matched no sample. rules: the thresholds applied
        (``RewardAuditRules``). checked: samples checked. suspicious: the flagged ones. counts: flags per reason.
        not_checkable: checks that had nothing to read, and why. agreement: reward vs human (``RewardAgreement``).
        rule: the Spearman rule's outcome (``AuditRule``). checkpoint, step, train_seed: the run's checkpoint.
    """

    run_id: str
    reward_source: str
    unmatched_rollouts: int
    rules: RewardAuditRules
    checked: int
    suspicious: list[SuspiciousSample]
    counts: dict[str, int]
    not_checkable: list[str]
    agreement: RewardAgreement
    rule: AuditRule
    checkpoint: str
    step: int | None
    train_seed: int | None

    @classmethod
    def from_dict(cls, audit: dict[str, Any]) -> RewardAudit:
        """From ``rlhf.reward_audit.audits_for_checkpoints``' document (or a stored verdict's row: the same keys).

        Raises:
            KeyError, TypeError, pydantic.ValidationError: a key is missing or unknown, or ``rules`` does not fit.
        """
        a = audit["agreement"]
        agreement = RewardAgreement(**{**a, "spearman": SpearmanCI(**a["spearman"]),
                                       "kappa": BinaryKappa(**a["kappa"])})
        return cls(**{**audit, "rules": RewardAuditRules.model_validate(audit["rules"]),
                      "suspicious": [SuspiciousSample(**s) for s in audit["suspicious"]],
                      "agreement": agreement, "rule": AuditRule(**audit["rule"])})

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` document's: every field, the suspicious samples without their text."""
        out = document(self)
        out["suspicious"] = [{k: v for k, v in s.items() if k != "text"} for s in out["suspicious"]]
        return out


@dataclass(frozen=True)
class CalibrationRow:
    """One proxy scorer's agreement with people on the human-audit tier (``Verdict.calibration``;
    ``rlhf.calibration.calibration_section``, whose rows it holds field by field).

    Attributes:
        protocol: the proxy's protocol (``name@version``). scorer: its scorer (None: the file is missing).
        role: ``gated``, ``reward model`` or ``proxy``. runs: the rated runs pooled. n_samples: rated samples.
        n, levels: pairs compared and the rating scale's points. spearman: ``SpearmanCI``. kappa (both sides
        binarised at 0.5), weighted_kappa (quadratic, on the levels), alpha (Krippendorff's, ordinal): each an
        ``AgreementCI`` (``human.agreement.proxy_agreement``).
    """

    protocol: str
    scorer: str | None
    role: str
    runs: list[str]
    n_samples: int
    n: int
    levels: int
    spearman: SpearmanCI
    kappa: AgreementCI
    weighted_kappa: AgreementCI
    alpha: AgreementCI

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> CalibrationRow:
        """From ``rlhf.calibration.calibration_section``'s row (or a stored verdict's: the same keys).

        Raises:
            KeyError, TypeError: a key is missing or unknown.
        """
        return cls(**{**row, "spearman": SpearmanCI(**row["spearman"]),
                      **{k: AgreementCI(**row[k]) for k in ("kappa", "weighted_kappa", "alpha")}})

    def as_dict(self) -> dict[str, Any]:
        return document(self)


Number = int | float
"""A count or a rate as the run stored it: an int stays an int, a float a float (so a document dumps as it was)."""


class PairwiseScores(ReadByKey, Result):
    """A pairwise judge's numbers against its baseline (``JudgeScores.pairwise``; ``rlhf.pairwise.win_rate``): the
    win rate (both orders, ties half) with its paired bootstrap CI ``low``/``high``, AlpacaEval 2's length-controlled
    win rate with its standard error and extreme-change warning, the position-flip and first-position rates, the
    items judged, parsed and unparseable (``unparseable_as``: counted as losses), and the verdict counts. A field a
    run stored before it was kept is None and absent from ``as_dict()``."""

    win_rate: Number | None = None
    low: Number | None = None
    high: Number | None = None
    lc_win_rate: Number | None = None
    lc_standard_error: Number | None = None
    lc_extreme_change: bool | None = None
    position_flip_rate: Number | None = None
    first_position_rate: Number | None = None
    items: int | None = None
    parsed_items: int | None = None
    unparseable_items: int | None = None
    unparseable_as: str | Number | None = None
    wins: Number | None = None
    ties: Number | None = None
    losses: Number | None = None


class JudgeScores(ReadByKey, Result):
    """An LLM judge's numbers on one proxy run (``ProxyScores.judge``; ``gate.proxies.proxy_row``): its ``mode``
    (``pairwise`` or ``pointwise``), samples ``judged``, ``unparseable`` verdicts and ``baseline`` (the judge's
    baseline checkpoint or run, as its options name it); pairwise its ``PairwiseScores``, pointwise its
    ``mean_rating`` on ``scale`` with ``unparseable_as``. Fields of the other mode are None and absent from
    ``as_dict()``."""

    mode: str | None = None
    judged: int | None = None
    unparseable: int | None = None
    baseline: dict[str, Any] | None = None
    pairwise: PairwiseScores | None = None
    mean_rating: Number | None = None
    scale: list[Number] | None = None
    unparseable_as: str | Number | None = None


class ProxyScores(ReadByKey, Result):
    """What one proxy run's metrics hold (``ProxyCheckpoint.scores``; ``gate.proxies.proxy_row``): its ``samples``
    and their count ``by_status``, ``mean_score`` and its stderr (every scorer); a reward model's ``reward_mean``, its
    stderr and ``reward_errors`` (samples it could not score); a judge's ``judge`` (``JudgeScores``). Never a
    per-item value. What the scorer does not report is None and absent from ``as_dict()``."""

    samples: int | None = None
    by_status: dict[str, int] | None = None
    mean_score: Number | None = None
    mean_score_stderr: Number | None = None
    reward_mean: Number | None = None
    reward_mean_stderr: Number | None = None
    reward_errors: int | None = None
    judge: JudgeScores | None = None


@dataclass(frozen=True)
class ProxyCheckpoint:
    """One checkpoint a proxy protocol scored (``ProxyEntry.checkpoints``): ``role`` (``baseline`` or ``seed``), its
    path, digest, training run, seed and step, the proxy run's id, and ``scores``: that run's numbers
    (``ProxyScores``), which the documents hold beside the other fields."""

    role: str
    path: str
    digest: str | None
    train_run: str | None
    train_seed: int | None
    step: int | None
    run_id: str
    scores: ProxyScores

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> ProxyCheckpoint:
        """From a document's row (``as_dict``: the fields, then the scores).

        Raises:
            KeyError: a field is missing. pydantic.ValidationError: a score that ``ProxyScores`` does not know.
        """
        named = {f.name for f in dataclasses.fields(cls)} - {"scores"}
        return cls(**{k: doc[k] for k in named},
                   scores=ProxyScores.model_validate({k: v for k, v in doc.items() if k not in named}))

    def as_dict(self) -> dict[str, Any]:
        """The row as the documents hold it: the fields, then the scores beside them."""
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "scores"},
                **self.scores.as_dict()}


@dataclass(frozen=True)
class BradleyTerryPlayer(ReadByKey):
    """One checkpoint's Bradley-Terry rating (``BradleyTerry.players``; ``rlhf.bradley_terry.ratings``).

    Attributes:
        player: ``baseline``, ``seed K best (step S)`` or the judge's baseline. rating: on the Elo-like scale
        (None: unbounded, see ``bound``). low, high: its percentile bootstrap CI (None: unbounded that side).
        win_rate_vs_anchor: the fitted P(player beats the anchor) (Arena-Hard's "score"; None: unbounded).
        games: games it played. bound: None, or ``above`` / ``below`` / ``unlinked`` when its games cannot bound the
        rating. role, train_seed, step, run_id: its proxy row's (``judge baseline`` and None for a judge's baseline
        that is no target).
    """

    player: str
    rating: float | None
    low: float | None
    high: float | None
    win_rate_vs_anchor: float | None
    games: int
    bound: str | None
    role: str
    train_seed: int | None
    step: int | None
    run_id: str | None


@dataclass(frozen=True)
class BradleyTerry(ReadByKey):
    """A pairwise judge proxy's Bradley-Terry ratings of the checkpoints it compared with its baseline
    (``ProxyEntry.bradley_terry``; ``gate.proxies.bradley_terry``): P(i beats j) = 1 / (1 + base^((R_j - R_i) /
    scale)), the ``anchor`` held at ``anchor_rating``, fitted over ``games`` with a ``confidence`` percentile
    bootstrap over games (``resamples`` refits); ``players`` by rating, highest first."""

    anchor: str
    anchor_rating: float
    scale: float
    base: float
    games: int
    confidence: float
    resamples: int
    players: list[BradleyTerryPlayer]

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> BradleyTerry | BradleyTerryNote:
        """From ``gate.proxies.bradley_terry``'s document: the ratings, or a ``BradleyTerryNote`` (``{"note"}``)."""
        if "note" in doc:
            return BradleyTerryNote(**doc)
        return cls(**{**doc, "players": [BradleyTerryPlayer(**p) for p in doc["players"]]})


@dataclass(frozen=True)
class BradleyTerryNote(ReadByKey):
    """Why a pairwise judge proxy of three or more checkpoints has no Bradley-Terry ratings (a run holds no
    per-item verdicts: a private or human-audit split, or a run stored before they were kept)."""

    note: str


@dataclass(frozen=True)
class ProxyEntry:
    """One proxy protocol's numbers (``Verdict.proxies``; ``gate.proxies.proxy_section``): the protocol, its hash,
    scorer and dev-tier split, each checkpoint it scored, and a pairwise judge's Bradley-Terry ratings
    (``BradleyTerry``, or a ``BradleyTerryNote`` saying why none; None: not rated, and then absent from the
    documents)."""

    protocol: str
    protocol_hash: str
    scorer: str | None
    split: str
    checkpoints: list[ProxyCheckpoint]
    bradley_terry: BradleyTerry | BradleyTerryNote | None = None

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> ProxyEntry:
        """From a document's entry (``as_dict``)."""
        bt = doc.get("bradley_terry")
        return cls(doc["protocol"], doc["protocol_hash"], doc["scorer"], doc["split"],
                   [ProxyCheckpoint.from_document(c) for c in doc["checkpoints"]],
                   None if bt is None else BradleyTerry.from_document(bt))

    def as_dict(self) -> dict[str, Any]:
        """The entry as the documents hold it (``bradley_terry`` only when rated)."""
        out: dict[str, Any] = {"protocol": self.protocol, "protocol_hash": self.protocol_hash, "scorer": self.scorer,
               "split": self.split, "checkpoints": [c.as_dict() for c in self.checkpoints]}
        if self.bradley_terry is not None:
            out["bradley_terry"] = document(self.bradley_terry)
        return out


@dataclass(frozen=True)
class TrainLogInfo:
    """Which training log a seed's guards read: file or directory, format, canonical keys found."""

    source: str
    format: str
    keys: list[str]


@dataclass(frozen=True)
class DecisionRun:
    """A run on the decision split (a seed's best checkpoint or the baseline): run id, its metrics (``Metrics``),
    the digest."""

    run_id: str
    metrics: Metrics
    digest: str


@dataclass(frozen=True)
class DevRun:
    """The baseline checkpoint's run on the selection split: run id and its metrics (``Metrics``)."""

    run_id: str
    metrics: Metrics


@dataclass(frozen=True)
class Estimate:
    """A mean over a run's items with its stderr (``evalgate.core.stats.stderr``) and, for a seed, a bootstrap CI."""

    value: float
    stderr: float
    items: int
    ci: tuple[float, float] | None = None


@dataclass
class SeedResult:
    """One training seed: its checkpoints by step, best (None: every checkpoint failed) and last, training-log
    diagnostics, and the best checkpoint's decision run.

    Attributes:
        train_seed: the training seed. train_run: the training run name.
        checkpoints: every checkpoint's selection result, by step. best, last: two of them.
        diagnostics: the findings that fail checkpoints (severity in ``guards.fail_on``), then the reward-hacking
            triad, from the training log.
        guards: the seed's whole diagnosis, the signals its log cannot check and the coverage warnings (None: the
            guards were not run).
        train_log: the log read (None: none found). train_series: its series (for the charts; not in the JSON).
        decision: the best checkpoint's decision run (None: no best, or not evaluated yet).
        triad_checked: dev checkpoint steps the reward-hacking triad could check (``guards.reward_hacking``).
    """

    train_seed: int | None
    train_run: str | None
    checkpoints: list[CheckpointResult]
    best: CheckpointResult | None
    last: CheckpointResult | None
    diagnostics: list[Finding] = field(default_factory=list)
    guards: SeedGuards | None = None
    train_log: TrainLogInfo | None = None
    train_series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    decision: DecisionRun | None = None
    triad_checked: int = 0

    @property
    def failed(self) -> list[CheckpointResult]:
        """The failed checkpoints, by step."""
        return [c for c in self.checkpoints if c.failed_reasons]


@dataclass(frozen=True)
class BaselineResult:
    """The comparison point: a checkpoint (with its decision and selection runs) or a fixed value."""

    checkpoint: str | None = None
    value: float | None = None
    decision: DecisionRun | None = None
    dev: DevRun | None = None


@dataclass(frozen=True)
class Aggregate:
    """The mean of the seeds' decision means and its stderr under three assumptions (each formula in
    ``evalgate.core.stats``); ``stderr_over_seeds`` is None for one seed."""

    mean_of_seed_means: float
    stderr_seeds_fixed: float
    stderr_items_paired: float
    stderr_over_seeds: float | None


@dataclass(frozen=True)
class Difference:
    """Candidate minus baseline on the decision split: observed difference, percentile CI, bootstrap stderr."""

    diff: float
    low: float
    high: float
    stderr: float
    resamples: int
    confidence: float
    method: str


# formulas as shown in the report, one per stderr of ``Aggregate`` and the paired stderr
FORMULAS = {
    "stderr_seeds_fixed": "sqrt(sum_s se_s^2) / S, se_s = sd_items(x_s) / sqrt(n) (seeds fixed, independent item "
                          "errors)",
    "stderr_items_paired": "sd_items(mean_s x_s,i) / sqrt(n) (items as the unit; the seeds share items)",
    "stderr_over_seeds": "sd_s(seed means) / sqrt(S) (seeds as the random unit)",
    "paired_stderr": "sd_items(mean_s x_s,i - b_i) / sqrt(n)",
}


@dataclass(frozen=True)
class Statistics:
    """Everything the gate computed on the decision split.

    Attributes:
        metric: the policy metric. items: items every seed's decision run scored. seeds: seeds compared.
        per_seed: training seed -> that seed's best checkpoint's decision mean over its own items.
        baseline: the baseline checkpoint's mean over the shared items (None: fixed-value baseline).
        aggregate: mean of seed means and its stderrs. paired_stderr: stderr of the paired difference (None: fixed
        value). difference: the bootstrap of candidate - baseline.
    """

    metric: str
    items: int
    seeds: int
    per_seed: dict[int | None, Estimate]
    baseline: Estimate | None
    aggregate: Aggregate
    paired_stderr: float | None
    difference: Difference

    def as_dict(self) -> dict[str, Any]:
        a = self.aggregate
        agg: dict[str, Any] = {"mean_of_seed_means": a.mean_of_seed_means,
                               "stderr_seeds_fixed": a.stderr_seeds_fixed,
                               "stderr_seeds_fixed_formula": FORMULAS["stderr_seeds_fixed"],
                               "stderr_items_paired": a.stderr_items_paired,
                               "stderr_items_paired_formula": FORMULAS["stderr_items_paired"]}
        if a.stderr_over_seeds is not None:
            agg.update(stderr_over_seeds=a.stderr_over_seeds, stderr_over_seeds_formula=FORMULAS["stderr_over_seeds"])
        out: dict[str, Any] = {"metric": self.metric, "items": self.items, "seeds": self.seeds, "aggregate": agg}
        if self.paired_stderr is not None:
            out.update(paired_stderr=self.paired_stderr, paired_stderr_formula=FORMULAS["paired_stderr"])
        out["difference"] = dataclasses.asdict(self.difference)
        return out


@dataclass(frozen=True)
class SetAside:
    """A selection-split run the gate did not use as it stands, and why (``Verdict.stale``, ``.ignored``,
    ``.failures``).

    Attributes:
        run_id, checkpoint_digest, checkpoint_path, train_run, train_seed, step, status: the run's.
        reason: why it was set aside and what that means for its checkpoint.
    """

    run_id: str
    checkpoint_digest: str
    checkpoint_path: str
    train_run: str | None
    train_seed: int | None
    step: int | None
    status: str
    reason: str


@dataclass(frozen=True)
class RuleOutcome:
    """One rule's result: name, passed, human-readable detail, and whether it could check anything.

    Attributes:
        checkable: False when the rule had nothing to check (no training log, no tool metrics, no pair of dev
            checkpoints, ...); such a rule passes only under ``rules.accept_not_checkable``
            (``not_checkable``).
        export_detail: the detail an experiment tracker gets (``evalgate.trackers``) when ``detail`` names a
            per-seed value of the decision split (the seeds' means, truncation rates, ...): counts of seeds only.
            None: ``detail`` holds no such value and is sent as it is.
    """

    rule: str
    passed: bool
    detail: str
    checkable: bool = True
    export_detail: str | None = None

    @property
    def outcome(self) -> str:
        """``pass``, ``fail`` or ``not_checkable`` (passed or failed, as ``rules.accept_not_checkable`` says)."""
        return "not_checkable" if not self.checkable else ("pass" if self.passed else "fail")

    @property
    def label(self) -> str:
        """The outcome as every report format shows it: ``pass``, ``FAIL``, ``not checkable (accepted)`` or
        ``NOT CHECKABLE (FAIL)``."""
        if not self.checkable:
            return "not checkable (accepted)" if self.passed else "NOT CHECKABLE (FAIL)"
        return "pass" if self.passed else "FAIL"

    def as_dict(self) -> dict[str, Any]:
        """``{"rule", "passed", "detail", "checkable", "export_detail", "outcome", "label"}``."""
        return {**dataclasses.asdict(self), "outcome": self.outcome, "label": self.label}


def not_checkable(rule: str, why: str, accept: bool) -> RuleOutcome:
    """The outcome of a rule that could check nothing: it says so and why, and fails unless the policy accepts
    that (``rules.accept_not_checkable``, default false: one setting, the same for every rule).

    Args:
        rule: the rule's name. why: what was missing and what to do. accept: ``policy.rules.accept_not_checkable``.
    """
    tail = ("accepted (rules.accept_not_checkable: true)" if accept
            else "fails: a rule that checks nothing never passes unless the policy sets rules.accept_not_checkable")
    return RuleOutcome(rule, accept, f"not checkable: {why}; {tail}", checkable=False)


def _guards_dict(g: SeedGuards | None) -> dict[str, Any]:
    """A seed's diagnosis (every finding, ``Diagnosis.as_dict``), the signals its log cannot check and the coverage
    warnings; nothing when the guards were not run."""
    if g is None:
        return {}
    return {"diagnosis": g.diagnosis.as_dict() if g.diagnosis else None,
            "not_checkable": [f.signal for f in g.not_checkable], "coverage": g.coverage}


@dataclass(frozen=True)
class ReusedDecision:
    """The stored gate whose decision runs an unchanged gate reused (``evalgate.gate.history``): its id and when it
    was made (ISO time)."""

    gate_id: str
    created_at: str


@dataclass(frozen=True)
class BrokenChain:
    """A gate run although the access log's hash chain is broken (``accept_broken_chain``): where it broke, why, and
    the reason given for going on (logged in the access log; shown in every report format)."""

    first_bad_seq: int | None
    reason: str | None
    accepted_because: str


@dataclass(frozen=True)
class DecisionSize(ReadByKey):
    """How much the decision split can tell (``Verdict.decision_size()``): its item count, the smallest paired
    difference it detects at the policy's confidence with ``power`` 80 % (``mde``, worst case sd 1;
    ``stats.minimum_detectable_difference``), whether that is too small for the gate's statistics
    (``stats.TOO_SMALL_DIFFERENCE``), the items that would detect it, and the sentence every report format shows."""

    split: str
    items: int
    confidence: float
    power: float
    mde: float
    too_small: bool
    items_needed: int
    detail: str


VERDICT_VERSION = 2
"""The stored verdict document's format: 2 since it carries ``version`` (documents stored before read as 1)."""


@dataclass(frozen=True)
class Ship:
    """The checkpoint a gate ships, or why none (``Verdict.ship()``, ``SuiteVerdict.ship()``).

    Attributes:
        checkpoint: its path (None: nothing ships). digest: the identity the gate verified from its files (check a
            shipped copy against it: ``checkpoints.identity.verify_identity``). train_seed, step: its seed and step.
        why: why it ships, or why nothing does, as every report format says it.
    """

    checkpoint: str | None
    digest: str | None
    train_seed: int | None
    step: int | None
    why: str

    @classmethod
    def none(cls, why: str) -> Ship:
        """Nothing ships, because ``why``."""
        return cls(None, None, None, None, why)

    def as_dict(self) -> dict[str, Any]:
        """``{"checkpoint", "digest", "train_seed", "step", "why"}``: the ``ship`` of the ``--json`` documents."""
        return dataclasses.asdict(self)

    def __getitem__(self, key: str) -> Any:
        """``ship()["checkpoint"]``, as when ``ship()`` returned a dict: deprecated for one release (read the
        attribute)."""
        import warnings

        warnings.warn(f"ship()[{key!r}] is deprecated: ship() returns a Ship; read ship().{key} (item access goes "
                      "in the next release)", DeprecationWarning, stacklevel=2)
        return self.as_dict()[key]


def ship_line(ship: dict[str, Any]) -> str:
    """The text output's last line, from a ``--json`` document's ``ship`` (``Ship.as_dict``, or an error
    document's): ``ship: PATH (why)`` or ``ship: none (why)``."""
    return f"ship: {ship['checkpoint'] or 'none'} ({ship['why']})"


@dataclass
class Verdict:
    """The gate's decision and everything the report shows.

    Attributes:
        passed: True for PASS.
        policy: the policy.
        rules: every rule's outcome.
        seeds: per training seed, by seed.
        baseline: the baseline's runs or fixed value (None: the gate stopped before reading it).
        stats: the statistics (None: no seed had a best checkpoint).
        protocol_hash: the protocol's sha256.
        samples: dev samples for audit (never the private split's): an ``AuditSamples`` (``highest_scoring``,
            ``lowest_scoring``, ``longest``: ``AuditSample`` rows; false when the seeds' best checkpoints have no
            stored samples).
        stale: the latest run per checkpoint on older content of the selection split (not used).
        ignored: the latest run per checkpoint that is no candidate (no training run or seed, another backend).
        failures: failed or interrupted runs, each saying whether it counts against its checkpoint.
        reward_audit: ``reward_audit.reward_audit`` of each best checkpoint's human-rated runs.
        calibration: ``rlhf.calibration.calibration_section``: each proxy scorer's (judge, reward model) agreement
            with raters on the human-audit tier (Spearman, kappa, weighted kappa, Krippendorff's alpha with CIs).
        proxies: ``gate.proxies.proxy_section``: each proxy protocol's (``policy.proxy_protocols``) numbers for the
            baseline and each seed's best on its dev-tier split (a judge's win rate with CI and flip rate, a reward
            model's mean score); informational, no rule reads them.
        gate_id: the id it is stored under (``evalgate.gate.history``; None: not stored).
        reused_from: the stored gate whose decision runs it reused without reading (None: it read, or needed no
            read).
        rereads: decision runs shown again (stored results of the same checkpoint, protocol hash, split content and
            backend settings, seen before): logged, not charged. Their run ids.
        broken_chain: the access log's chain was broken and the gate ran under ``accept_broken_chain`` (None: the
            chain was intact).
        version: the stored document's format (``VERDICT_VERSION``; 1: stored before the document carried it).
        decision_not_read: why the decision split was not read: a rule that needs no private data failed first, so
            the gate failed with no private read spent (None: it read, or reused, the decision runs).
    """

    passed: bool
    policy: GatePolicy
    rules: list[RuleOutcome]
    seeds: list[SeedResult] = field(default_factory=list)
    baseline: BaselineResult | None = None
    stats: Statistics | None = None
    protocol_hash: str | None = None
    samples: AuditSamples = field(default_factory=AuditSamples)
    stale: list[SetAside] = field(default_factory=list)
    ignored: list[SetAside] = field(default_factory=list)
    failures: list[SetAside] = field(default_factory=list)
    reward_audit: list[RewardAudit] = field(default_factory=list)
    calibration: list[CalibrationRow] = field(default_factory=list)
    proxies: list[ProxyEntry] = field(default_factory=list)
    gate_id: str | None = None
    reused_from: ReusedDecision | None = None
    rereads: list[str] = field(default_factory=list)
    broken_chain: BrokenChain | None = None
    version: int = VERDICT_VERSION
    decision_not_read: str | None = None

    @property
    def reasons(self) -> list[str]:
        return [f"{r.rule}: {r.detail}" for r in self.rules if not r.passed]

    @property
    def reason(self) -> str:
        """The machine-readable reason of a decided gate: ``pass`` or ``fail`` (a gate that decides nothing exits
        with ``drift``, ``refused``, ``invalid`` or ``error`` instead;
        ``evalgate.gate.report.outputs.error_document``)."""
        return "pass" if self.passed else "fail"

    def ship(self) -> Ship:
        """The checkpoint to ship, or why none: on PASS, the seed's best checkpoint with the highest metric on the
        selection split (ties: the lower seed). The pick is made on the dev split, never on the decision split,
        so the private set chooses nothing (a seed with a lower private score may ship); every seed's best passed
        the rules together. ``why`` says so in every report format.

        Returns:
            The ``Ship`` (``checkpoint`` None on FAIL).
        """
        chosen = [s for s in self.seeds if s.best is not None]
        if not self.passed or not chosen:
            why = "; ".join(self.reasons) or "no seed has a best checkpoint"
            return Ship.none(f"gate FAIL: {why}")
        top = max(chosen, key=lambda s: ((s.best.value or 0.0) if s.best else 0.0, -(s.train_seed or 0)))
        assert top.best is not None
        return Ship(top.best.path, top.best.digest, top.train_seed, top.best.step,
                    f"PASS; seed {top.train_seed}'s best (step {top.best.step}) has the highest "
                    f"{self.policy.metric} on {self.policy.selection_split} ({num(top.best.value)}) of the "
                    f"{len(chosen)} seed(s)' best checkpoints: the dev split picks the seed; the private split "
                    f"{self.policy.decision_split} decides pass/fail for every seed's best together, never which "
                    "seed ships (picking on it would tune on it)")

    def decision_size(self) -> DecisionSize | None:
        """How much the decision split can tell: its item count, the smallest paired difference it detects at the
        policy's confidence with 80 % power (``stats.minimum_detectable_difference``, worst case sd 1), and whether
        that is too small for the statistics (``stats.TOO_SMALL_DIFFERENCE``; flagged in every report format, the
        verdict unchanged). None when nothing was decided on it.

        Returns:
            The ``DecisionSize`` (its ``as_dict()`` the ``--json`` document's ``decision_split_size``).
        """
        if self.stats is None or self.stats.items < 1:
            return None
        p, n = self.policy, self.stats.items
        conf = p.rules.confidence
        mde = minimum_detectable_difference(n, conf)
        small = mde >= TOO_SMALL_DIFFERENCE
        need = items_to_detect(TOO_SMALL_DIFFERENCE, conf)
        detail = (f"decision split {p.decision_split}: {n} items; the smallest difference it can detect at "
                  f"{conf:.0%} confidence with {DETECTION_POWER:.0%} power is {mde:.3f} "
                  "((z_{1-a/2} + z_power) / sqrt(n), sd 1: Bloom 1995; Miller 2024)")
        if small:
            detail = (f"WARNING: {detail}: TOO SMALL for the gate's statistics (a difference under "
                      f"{TOO_SMALL_DIFFERENCE} goes unseen, and its CI can be [0, 0]); add items to the private split "
                      f"(at least {need})")
        return DecisionSize(p.decision_split, n, conf, DETECTION_POWER, mde, small, need, detail)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready verdict (no per-item outputs of any split)."""
        p = self.policy
        return {
            "verdict": "PASS" if self.passed else "FAIL", "gate": p.name, "protocol": p.protocol,
            "protocol_hash": self.protocol_hash, "selection_split": p.selection_split,
            "decision_split": p.decision_split, "metric": p.metric,
            "rules": [r.as_dict() for r in self.rules], "reasons": self.reasons,
            "accept_not_checkable": p.rules.accept_not_checkable,
            "not_checkable": [r.rule for r in self.rules if not r.checkable],
            "seeds": [self._seed_dict(s) for s in self.seeds],
            "baseline": self._baseline_dict(), "stats": self.stats.as_dict() if self.stats else {},
            **{k: [dataclasses.asdict(r) for r in getattr(self, k)] for k in ("stale", "ignored", "failures")},
            "reward_audit": [a.as_dict() for a in self.reward_audit],
            "calibration": [c.as_dict() for c in self.calibration], "proxies": [p.as_dict() for p in self.proxies],
            "reason": self.reason, "gate_id": self.gate_id,
            "reused_from": dataclasses.asdict(self.reused_from) if self.reused_from else None,
            "ship": self.ship().as_dict(), "rereads": list(self.rereads),
            "broken_chain": dataclasses.asdict(self.broken_chain) if self.broken_chain else None,
            "decision_split_size": dataclasses.asdict(size) if (size := self.decision_size()) else None,
            "decision_not_read": self.decision_not_read,
        }

    def _seed_dict(self, s: SeedResult) -> dict[str, Any]:
        out: dict[str, Any] = {
            "train_seed": s.train_seed, "train_run": s.train_run, "checkpoints": [c.as_dict() for c in s.checkpoints],
            "best": s.best.as_dict() if s.best else None, "last": s.last.as_dict() if s.last else None,
            "failed": [c.as_dict() for c in s.failed], "diagnostics": [d.as_dict() for d in s.diagnostics],
            "train_log": dataclasses.asdict(s.train_log) if s.train_log else None, **_guards_dict(s.guards)}
        if s.decision is not None:
            out["decision"] = document(s.decision)
            est = self.stats.per_seed.get(s.train_seed) if self.stats else None
            if est is not None:
                out["decision"].update(items=est.items, value=est.value, stderr=est.stderr,
                                       ci=list(est.ci) if est.ci else None)
        return out

    def _baseline_dict(self) -> dict[str, Any]:
        b = self.baseline
        if b is None:
            return {}
        if b.checkpoint is None:
            return {"value": b.value}
        out: dict[str, Any] = {"checkpoint": b.checkpoint}
        if b.decision is not None:
            out["decision"] = document(b.decision)
            if self.stats and self.stats.baseline:
                e = self.stats.baseline
                out["decision"].update(value=e.value, stderr=e.stderr, items=e.items)
        if b.dev is not None:
            out["dev"] = document(b.dev)
        return out
