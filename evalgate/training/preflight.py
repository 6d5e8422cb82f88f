"""``preflight``: the reward histogram the chapter asks for before any training (``../shared/seeds/``, "look at the
reward distribution": almost all 0 = too sparse, almost all 1 = too lenient, a heavy tail = a few samples dominate
the gradient, mixed-up signs = the reward does not say what the task wants).

The base policy is sampled on the training prompts under the frozen protocol, through ``evaluate()`` (so the read is
logged and the generations cached like any run). ``--samples K`` larger than the protocol's ``n`` runs the protocol
again with sampling seeds ``seed+1, seed+2, ...`` until every prompt has K samples; the first K per prompt are used.
Per prompt the pass rate is the mean score of its samples; prompts whose samples all score the same give a group
with zero reward variance, which GRPO/RLOO turn into a zero advantage and so no gradient (Shao et al. 2024, GRPO:
advantage = (r - mean) / std within the group).

Trivial baselines are scored by the protocol's own scorer on the same items: an empty answer, a constant answer
(``0``) and the most common gold answer; a scorer that gives any of them credit rewards nonsense.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from markupsafe import Markup

from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write
from evalgate.core.formatting import num, pct
from evalgate.core.html import render, svg
from evalgate.protocol.spec import load_protocol
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.scoring import SampleToScore, get_scorer
from evalgate.splits.data import read_unlogged
from evalgate.splits.discovery import load_manifest
from evalgate.store import Store

# Verdict thresholds (shares of samples). The chapter names the shapes, not numbers; these are ours.
SPARSE_SHARE = 0.95
"""Too sparse: at least this share of samples scores 0 ("almost all 0")."""
LENIENT_SHARE = 0.95
"""Too lenient: at least this share of samples scores 1 ("almost all 1")."""
TAIL_SHARE = 0.5
"""Heavy tail: the top 1% of samples by |score - mean| (at least one) hold more than this share of the sum of
squared deviations, i.e. of the GRPO/PPO advantage signal."""
TRUNCATION_SHARE = 0.2
"""Truncation first: more than this share of the samples was cut at ``max_tokens`` (finish reason ``length``), the
default limit of the training-log ``truncation`` signal (DAPO, Yu et al. 2025, sec. 3.4: truncated answers add
reward noise), or more than half of the zero scores are truncations ("mostly"). A histogram shaped by the length
limit says nothing yet about the reward."""
CONSTANT_ANSWER = "0"
NOT_JUDGED = "not_judged"
"""A shape's status when truncation fired and the shape did not: the histogram was not the reward's."""


@dataclass
class ShapeCheck:
    """One of the chapter's histogram shapes, checked (not the gate's ``Verdict``: ``evalgate.gate.results``).

    Attributes:
        name: ``truncation`` (first, when finish reasons are known), ``too_sparse``, ``too_lenient``, ``heavy_tail``
            or ``sign_confusion``.
        status: ``fired``, ``ok``, ``not_checkable`` (the reward has no such shape: a two-valued reward has no
            tail) or ``not_judged`` (truncation fired, so the scores measure the length limit: a shape that did not
            fire on them says nothing about the reward).
        message: the measured figure and what it means (and, when fired, the chapter's remedy).
    """

    name: str
    status: str
    message: str


@dataclass
class PreflightResult:
    """What ``preflight`` measured.

    Attributes:
        protocol, checkpoint, split: what was sampled (names / paths).
        samples: samples per prompt (K); ``prompts`` the number of prompts.
        run_ids: the runs that produced the samples (one per sampling seed used).
        pass_rates: per prompt (item id -> mean score over its K samples), in item order.
        histogram: ``[(pass rate, prompts)]`` over the K+1 possible rates of 0/1 scores (or 10 bins otherwise).
        all_correct, all_wrong, other_constant: shares of prompts whose K samples all score 1 / all 0 / all the
            same other value; ``zero_variance`` their sum.
        mean, std: of the per-sample score; ``pass_rate_std`` the spread of the per-prompt pass rates.
        truncated: share of samples cut at ``max_tokens`` (finish reason ``length``); ``truncated_zeros`` the share
            of zero-score samples that were.
        baselines: trivial answer -> mean score under the scorer; ``baseline_deserved`` what each deserves (the
            share of items whose gold answer it is).
        verdicts: the chapter's four shapes.
        notes: sentences on how to read the figures (a greedy protocol, ...).
    """

    protocol: str
    checkpoint: str
    split: str
    samples: int
    prompts: int
    run_ids: list[str]
    pass_rates: dict[str, float]
    histogram: list[tuple[float, int]]
    all_correct: float
    all_wrong: float
    other_constant: float
    zero_variance: float
    mean: float
    std: float
    pass_rate_std: float
    baselines: dict[str, float]
    baseline_deserved: dict[str, float] = field(default_factory=dict)
    truncated: float = 0.0
    truncated_zeros: float = 0.0
    verdicts: list[ShapeCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``--json`` prints)."""
        return asdict(self)


def _std(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def histogram(rates: list[float], k: int, binary: bool) -> list[tuple[float, int]]:
    """Prompts per pass rate: the K+1 exact rates ``j/K`` for 0/1 scores, else 10 equal bins over [0, 1] (value =
    bin's lower edge; 1.0 falls in the last bin)."""
    if binary:
        counts = Counter(round(r * k) for r in rates)
        return [(j / k, counts.get(j, 0)) for j in range(k + 1)]
    counts = Counter(min(int(r * 10), 9) for r in rates)
    return [(b / 10, counts.get(b, 0)) for b in range(10)]


def truncation_verdict(scores: list[float], finish: list[str | None]) -> ShapeCheck:
    """Were the samples cut at ``max_tokens``? Fired when more than ``TRUNCATION_SHARE`` of them were (finish reason
    ``length``), or more than half of the zero scores are truncations; the remedy is the length limit, not the
    reward (raise ``max_tokens`` or ask for shorter answers).

    Args:
        scores: per-sample scores.
        finish: the finish reason of each sample, in the same order (None: unknown).
    """
    n = len(scores)
    cut = [f == "length" for f in finish]
    n_cut = sum(cut)
    zeros = sum(s == 0 for s in scores)
    cut_zeros = sum(c and s == 0 for c, s in zip(cut, scores, strict=True))
    msg = (f"{n_cut} of {n} samples ({n_cut / n:.0%}) were cut at max_tokens; {cut_zeros} of the {zeros} zero "
           f"scores are truncations")
    if n_cut / n > TRUNCATION_SHARE or (zeros and cut_zeros / zeros > 0.5):
        return ShapeCheck("truncation", "fired", msg + ": the histogram measures the length limit, not the reward; "
                          "raise max_tokens or ask for shorter answers (a stop sequence, a terser prompt), then look "
                          "again before changing the reward")
    return ShapeCheck("truncation", "ok", msg)


def verdicts(scores: list[float], baselines: dict[str, float], deserved: dict[str, float] | None = None,
             finish: list[str | None] | None = None) -> list[ShapeCheck]:
    """The chapter's four histogram shapes over per-sample scores, after truncation when ``finish`` is given.

    - truncation (``truncation_verdict``; first, and when it fires too_sparse points to it instead of advising
      intermediate rewards: zeros that are cut-off answers are no reward design problem);
    - too sparse: share of scores == 0 at least ``SPARSE_SHARE`` (remedy: intermediate rewards, a curriculum,
      more exploration);
    - too lenient: share of scores == 1 at least ``LENIENT_SHARE`` (remedy: harder tasks, split the score);
    - heavy tail: ``TAIL_SHARE`` rule; not checkable for a two-valued reward (no tail beyond its two values);
    - sign confusion: the reward does not point toward the task: a trivial answer scores more than it deserves
      (``deserved``: the share of items whose gold answer it is; 0 when not given), or scores are both negative
      and positive (remedy: read the samples one by one).

    When truncation fired, too sparse, too lenient and heavy tail are judged on cut-off answers: one that did not
    fire is ``not_judged`` (never ``ok``; a 87.5 % share of zeros was printed "ok" beside a fired truncation), one
    that fired keeps pointing to truncation. Sign confusion reads the trivial answers only and is judged.
    """
    n = len(scores)
    mean = sum(scores) / n
    zeros, ones = sum(s == 0 for s in scores) / n, sum(s == 1 for s in scores) / n
    out = [truncation_verdict(scores, finish)] if finish is not None else []
    cut = bool(out) and out[0].status == "fired"
    remedy = ": mostly truncated answers; fix the length limit first (see truncation)" if cut else \
        ": almost no gradient; add intermediate rewards, a curriculum or more exploration"
    out += [ShapeCheck("too_sparse", "fired" if zeros >= SPARSE_SHARE else "ok",
                       f"{zeros:.1%} of samples score 0" + (remedy if zeros >= SPARSE_SHARE else "")),
            ShapeCheck("too_lenient", "fired" if ones >= LENIENT_SHARE else "ok",
                       f"{ones:.1%} of samples score 1" + (": the reward is too easy; make the task harder or "
                                                           "split the score" if ones >= LENIENT_SHARE else ""))]
    out += [_tail(scores, mean)]
    if cut:  # the scores measure the length limit: a shape that did not fire was not judged, not found fine
        out = [out[0], *(ShapeCheck(v.name, NOT_JUDGED, f"not judged: {v.message}, but truncation fired: the "
                                    "histogram measures the length limit; fix it and run preflight again")
                         if v.status == "ok" else v for v in out[1:])]
    out.append(_sign(scores, baselines, deserved))
    return out


def _tail(scores: list[float], mean: float) -> ShapeCheck:
    """The heavy-tail shape (``TAIL_SHARE``); not checkable for a two-valued reward."""
    n = len(scores)
    if len(set(scores)) <= 2:
        return ShapeCheck("heavy_tail", "not_checkable", f"the reward takes {len(set(scores))} value(s): a "
                          "two-valued reward has no tail (see too_sparse / too_lenient)")
    dev = sorted(((s - mean) ** 2 for s in scores), reverse=True)
    top = max(1, n // 100)
    share = sum(dev[:top]) / sum(dev) if sum(dev) else 0.0
    fired = share > TAIL_SHARE
    return ShapeCheck("heavy_tail", "fired" if fired else "ok",
                      f"the top {top} sample(s) hold {share:.1%} of the squared deviation from the mean"
                      + ("; a few samples dominate the gradient: clip or normalise the reward" if fired else ""))


def _sign(scores: list[float], baselines: dict[str, float], deserved: dict[str, float] | None) -> ShapeCheck:
    """Sign confusion: a trivial answer scores more than it deserves, or scores of both signs."""
    due = deserved or {}
    bad = {k: v for k, v in baselines.items() if v > due.get(k, 0.0) + 1e-9}
    mixed = any(s < 0 for s in scores) and any(s > 0 for s in scores)
    if bad or mixed:
        why = [f"the {k} answer scores {v:.3f}, more than the {due.get(k, 0.0):.3f} of items whose gold answer it is"
               for k, v in bad.items()]
        why += ["scores are both negative and positive"] if mixed else []
        return ShapeCheck("sign_confusion", "fired", "; ".join(why) + ": the reward does not point toward the "
                          "task; read the samples one by one")
    return ShapeCheck("sign_confusion", "ok", "no trivial answer scores more than the share of items whose gold "
                      "answer it is; scores have one sign")


def score_baselines(protocol_path: str | Path, items: list[dict[str, Any]]) -> tuple[dict[str, float],
                                                                                   dict[str, float]]:
    """Mean score of trivial answers under the protocol's scorer, over ``items``: ``empty``, ``constant`` (the text
    ``0``) and, when the scorer compares with a gold field, ``most_common_gold`` (that field's most common value).

    Returns:
        (score per answer, what each deserves: the share of items whose gold answer is that text; 0 for a scorer
        without a gold field).
    """
    protocol = load_protocol(protocol_path)
    scorer = get_scorer(protocol)
    answers = {"empty": "", "constant": CONSTANT_ANSWER}
    gold_field = getattr(scorer, "answer_field", None)
    if gold_field and all(gold_field in it for it in items):
        answers["most_common_gold"] = str(Counter(str(it[gold_field]) for it in items).most_common(1)[0][0])
    out, due = {}, {}
    for name, text in answers.items():
        results = scorer.score([SampleToScore(it, text, "", "stop") for it in items])
        out[name] = sum(r.score for r in results) / len(results)
        due[name] = sum(str(it[gold_field]).strip() == text for it in items) / len(items) if gold_field else 0.0
    return out, due


def preflight(protocol_path: str | Path, checkpoint: str | Path, split: str, samples: int | None = None,
              options: RunOptions | None = None, *, store: Store) -> PreflightResult:
    """Sample the base policy on a split and measure its reward distribution.

    Args:
        protocol_path: frozen protocol YAML.
        checkpoint: the base policy (HF directory or GGUF file).
        split: the training prompts' split (or a sample of them).
        samples: samples per prompt K (default: the protocol's ``n``).
        options: RunOptions for every run (purpose defaults to ``preflight``).
        store: the Store.

    Returns:
        The PreflightResult.

    Raises:
        BadInput: ``samples`` < 1; whatever ``evaluate`` raises (bad protocol, split, checkpoint; refusals).
    """
    if samples is not None and samples < 1:
        raise BadInput(f"--samples must be at least 1, got {samples}")
    opts = options or RunOptions(purpose="preflight")
    protocol = load_protocol(protocol_path)
    sampling = protocol.spec.sampling
    greedy = sampling.temperature == 0
    k = 1 if greedy else (samples or sampling.n)
    base_seed = sampling.seed if opts.seed is None else opts.seed
    per_item: dict[str, list[tuple[float, str | None]]] = {}
    run_ids: list[str] = []
    r = 0
    while not per_item or min(len(v) for v in per_item.values()) < k:
        doc = evaluate(protocol_path, checkpoint, split, replace(opts, seed=base_seed + r), store)
        run_ids.append(doc["run_id"])
        for row in sorted(store.samples(doc["run_id"]), key=lambda r: (str(r.item_id), r.sample_index)):
            per_item.setdefault(str(row.item_id), []).append((float(row.score or 0.0), row.finish_reason))
        r += 1
    # the run above logged this read; the baselines score the same items
    items = read_unlogged(load_manifest(split, store.env.splits), env=store.env)
    order = [str(it["id"]) for it in items]
    scores = {i: [sc for sc, _ in per_item[i][:k]] for i in order}
    finish = [f for i in order for _, f in per_item[i][:k]]
    flat = [s for v in scores.values() for s in v]
    n_zero = sum(s == 0 for s in flat)
    cut_zeros = sum(f == "length" and s == 0 for s, f in zip(flat, finish, strict=True))
    rates = {i: sum(v) / k for i, v in scores.items()}
    binary = all(s in (0.0, 1.0) for s in flat)
    n = len(order)
    const = [v[0] for v in scores.values() if len(set(v)) == 1]
    baselines, deserved = score_baselines(protocol_path, items)
    notes = []
    if greedy:
        notes.append("the protocol decodes greedily (temperature 0): every sample of a prompt would be the same, so "
                     "one sample per prompt is drawn and every prompt is zero-variance by construction; freeze a "
                     "sampled protocol at the training temperature to measure the training reward")
    return PreflightResult(
        protocol=f"{protocol.spec.name}@{protocol.spec.version}", checkpoint=str(checkpoint), split=split, samples=k,
        prompts=n, run_ids=run_ids, pass_rates=rates, histogram=histogram(list(rates.values()), k, binary),
        all_correct=sum(c == 1 for c in const) / n, all_wrong=sum(c == 0 for c in const) / n,
        other_constant=sum(c not in (0, 1) for c in const) / n, zero_variance=len(const) / n,
        mean=sum(flat) / len(flat), std=_std(flat), pass_rate_std=_std(list(rates.values())), baselines=baselines,
        baseline_deserved=deserved, truncated=sum(f == "length" for f in finish) / len(finish),
        truncated_zeros=cut_zeros / n_zero if n_zero else 0.0, verdicts=verdicts(flat, baselines, deserved, finish),
        notes=notes)


def format_summary(res: PreflightResult) -> str:
    """The terminal summary: histogram as text bars, zero-variance shares, mean/spread, baselines, verdicts."""
    width = max((c for _, c in res.histogram), default=1) or 1
    lines = [f"preflight {res.protocol} on {res.split}: {res.prompts} prompts x {res.samples} samples "
             f"({res.checkpoint})", "pass rate  prompts"]
    lines += [f"  {rate:5.2f}  {c:5d} {'#' * round(30 * c / width)}" for rate, c in res.histogram]
    lines += [f"zero-variance prompts: {pct(res.zero_variance)} (all correct {pct(res.all_correct)}, all wrong "
              f"{pct(res.all_wrong)}, other constant {pct(res.other_constant)})",
              f"score: mean {num(res.mean)}, std {num(res.std)}; per-prompt pass rate std {num(res.pass_rate_std)}",
              f"cut at max_tokens: {pct(res.truncated)} of samples ({pct(res.truncated_zeros)} of the zero scores)",
              "trivial baselines (same scorer; deserved = share of items with that gold answer): "
              + ", ".join(f"{k} {num(v)} (deserves {num(res.baseline_deserved.get(k, 0.0))})"
                          for k, v in res.baselines.items())]
    lines += [f"{v.name}: {v.status}: {v.message}" for v in res.verdicts]
    lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def histogram_svg(res: PreflightResult) -> Markup:
    """The histogram of per-prompt pass rates as inline SVG (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 2.6), dpi=72)
    ax = fig.add_subplot()
    step = 1 / res.samples if len(res.histogram) == res.samples + 1 else 0.1
    ax.bar([r for r, _ in res.histogram], [c for _, c in res.histogram], width=step * 0.8,
           align="center" if step != 0.1 else "edge", color="#0969da")
    ax.set_xlabel("per-prompt pass rate")
    ax.set_ylabel("prompts")
    ax.set_title(f"{res.protocol} on {res.split}: {res.prompts} prompts x {res.samples} samples", fontsize=9)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.2, top=0.88)
    return svg(fig)


def write_report(res: PreflightResult, path: str | Path) -> Path:
    """Write the self-contained HTML report (histogram SVG inline, the summary, the verdicts). Returns the path."""
    p = Path(path)
    atomic_write(p, render("preflight.html.j2", chart=histogram_svg(res), verdicts=res.verdicts,
                           summary=format_summary(res)))
    return p
