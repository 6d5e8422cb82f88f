"""Stage 3 of a run, ``score``: judge every sample with the protocol's scorer and compute the run's metrics."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from evalgate.protocol.spec import LoadedProtocol
from evalgate.runner.generate import Generated, progress_bar
from evalgate.runner.plan import RunPlan
from evalgate.scoring import SampleToScore, ScoreResult, aggregate_behavior, sample_behavior
from evalgate.scoring.base import SCORERS
from evalgate.scoring.metrics import run_metrics
from evalgate.scoring.reasoning import prompt_opens, strip_reasoning

# Samples scored per scorer call, so the scoring progress bar moves; large enough to keep the scorer's worker
# pool busy.
SCORE_CHUNK = 64


@dataclass(frozen=True)
class Scored:
    """A run's judged samples.

    Attributes:
        samples: one ``samples`` row per sample key, in key order (item_id, sample_index, seed, score, status,
            extracted, detail, cached, behavior).
        metrics: the run's metrics (``compute_metrics``).
        score_s: wall seconds spent scoring.
        reasoning: the protocol's ``reasoning.strip`` and, over the samples, how many held a reasoning block
            (``with_reasoning``) and how many never closed it (``unclosed``).
    """

    samples: list[dict[str, Any]]
    metrics: dict[str, Any]
    score_s: float
    reasoning: dict[str, Any]


def compute_metrics(protocol: LoadedProtocol, per_item: dict[str, list[dict[str, Any]]],
                    items: dict[str, dict[str, Any]] | None = None, scorer: Any = None) -> dict[str, Any]:
    """Run metrics from scored samples grouped by item.

    pass@k is the unbiased estimator per item, averaged over items (Chen et al. 2021), with the stderr of that
    mean over items. Behaviour metrics are means over samples. A greedy protocol (temperature 0) reports
    pass@1 only: its samples are copies of one decode, so pass@k for k > 1 would be pass@1 renamed. A scorer
    without a "solved" status (``ScorerEntry.pass_at_k`` False) reports no pass@k, one that generates nothing no
    behaviour metrics; a scorer's own metrics (``ScorerEntry.metrics``) are added, given the split's ``items`` by id
    and the ``scorer`` that judged the run (the run passes both; so does an agentic run recomputing its metrics).
    """
    from evalgate.core.registry import load_reference

    entry = SCORERS[protocol.spec.scorer.name]
    metrics: dict[str, Any] = dict(run_metrics(per_item, protocol.spec.pass_at_k if entry.pass_at_k else [],
                                                greedy=protocol.spec.sampling.temperature == 0 and entry.pass_at_k))
    if entry.generates and entry.request == "generate":  # no completion, no behaviour to measure
        metrics.update(aggregate_behavior([s["behavior"] for ss in per_item.values() for s in ss]))
    if entry.metrics is not None:
        metrics.update(load_reference(entry.metrics)(per_item, items or {}, protocol.scorer_options, scorer))
    return metrics


def _unclosed(plan: RunPlan, found: str | None, finish_reason: str) -> ScoreResult:
    """The result of a sample whose reasoning never closed: truncated when cut at max_tokens (and truncated samples
    are not scored), else no answer; never an answer taken from the draft."""
    if finish_reason == "length" and not plan.protocol.spec.extraction.score_truncated:
        return ScoreResult(0.0, "truncated", None, f"finish_reason length: cut off at max_tokens inside the {found} "
                                                   "reasoning block")
    return ScoreResult(0.0, "no_answer", None, f"the {found} reasoning block was opened and never closed: no "
                                               "answer is taken from the draft")


def _judge(plan: RunPlan, generated: Generated) -> tuple[list[ScoreResult], dict[str, Any]]:
    """The scorer's results for every sample key (reasoning removed first, ``scoring.reasoning``), scored in
    chunks of ``SCORE_CHUNK``, and the reasoning counts."""
    items = {str(it["id"]): it for it in plan.items}
    gens = generated.samples
    formats = plan.protocol.spec.reasoning.strip
    opens = {iid: prompt_opens(r.text, formats) for iid, r in plan.prompts.rendered.items()}
    fixed: dict[int, ScoreResult] = {}
    to_score: list[SampleToScore] = []
    found = unclosed = 0
    for i, k in enumerate(plan.keys):
        r = strip_reasoning(gens[k]["text"], formats, opens[k[0]])
        found += r.found is not None
        if not r.closed:
            unclosed += 1
            if not r.answer.strip():
                fixed[i] = _unclosed(plan, r.found, gens[k]["finish_reason"])
                continue
        to_score.append(SampleToScore(items[k[0]], r.answer, plan.prompts.rendered[k[0]].response_prefix,
                                      gens[k]["finish_reason"], k))
    begin = getattr(plan.scorer, "begin", None)  # a scorer that needs the run (the judge: cache, access log)
    if begin is not None:
        begin(plan, to_score)
    scored: list[ScoreResult] = []
    with progress_bar(len(plan.keys), "score", plan.options.progress) as bar:
        bar.update(len(fixed))
        for c in range(0, len(to_score), SCORE_CHUNK):
            scored.extend(plan.scorer.score(to_score[c:c + SCORE_CHUNK]))
            bar.update(len(to_score[c:c + SCORE_CHUNK]))
    rest = iter(scored)
    results = [fixed[i] if i in fixed else next(rest) for i in range(len(plan.keys))]
    return results, {"strip": list(formats), "with_reasoning": found, "unclosed": unclosed}


def score(plan: RunPlan, generated: Generated) -> Scored:
    """Stage 3: judge every sample and compute metrics.

    Raises:
        Whatever the scorer raises (the caller marks the run failed).
    """
    s0 = time.perf_counter()
    results, reasoning = _judge(plan, generated)
    score_s = time.perf_counter() - s0
    samples: list[dict[str, Any]] = []
    per_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rule = plan.protocol.spec.extraction.rule
    completions = SCORERS[plan.protocol.spec.scorer.name].request == "generate"  # else no text to measure
    for (iid, j, seed), res in zip(plan.keys, results, strict=True):
        g = generated.samples[(iid, j, seed)]
        behavior = sample_behavior(g["text"], g["completion_tokens"], g["finish_reason"], rule=rule) if completions \
            else {}
        sample = {"item_id": iid, "sample_index": j, "seed": seed, "score": res.score, "status": res.status,
                  "extracted": res.extracted, "detail": res.detail, "cached": not g.get("fresh", False),
                  "behavior": behavior}
        samples.append(sample)
        per_item[iid].append(sample)
    items = {str(it["id"]): it for it in plan.items}
    return Scored(samples, compute_metrics(plan.protocol, per_item, items, plan.scorer), score_s, reasoning)
