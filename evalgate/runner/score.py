"""Stage 3 of a run, ``score``: judge every sample with the protocol's scorer and compute the run's metrics."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from evalgate.protocol import LoadedProtocol
from evalgate.runner.generate import Generated, progress_bar
from evalgate.runner.plan import RunPlan
from evalgate.scoring import SampleToScore, ScoreResult, aggregate_behavior, sample_behavior
from evalgate.scoring.metrics import run_metrics

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
    """

    samples: list[dict[str, Any]]
    metrics: dict[str, Any]
    score_s: float


def compute_metrics(protocol: LoadedProtocol, per_item: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Run metrics from scored samples grouped by item.

    pass@k is the unbiased estimator per item, averaged over items (Chen et al. 2021), with the stderr of that
    mean over items. Behaviour metrics are means over samples. A greedy protocol (temperature 0) reports
    pass@1 only: its samples are copies of one decode, so pass@k for k > 1 would be pass@1 renamed.
    """
    metrics: dict[str, Any] = dict(run_metrics(per_item, protocol.spec.pass_at_k,
                                                greedy=protocol.spec.sampling.temperature == 0))
    metrics.update(aggregate_behavior([s["behavior"] for ss in per_item.values() for s in ss]))
    return metrics


def _judge(plan: RunPlan, generated: Generated) -> list[ScoreResult]:
    """The scorer's results for every sample key, scored in chunks of ``SCORE_CHUNK``."""
    items = {str(it["id"]): it for it in plan.items}
    gens = generated.samples
    to_score = [SampleToScore(items[k[0]], gens[k]["text"], plan.prompts.rendered[k[0]].response_prefix,
                              gens[k]["finish_reason"]) for k in plan.keys]
    results: list[ScoreResult] = []
    with progress_bar(len(to_score), "score", plan.options.progress) as bar:
        for c in range(0, len(to_score), SCORE_CHUNK):
            results.extend(plan.scorer.score(to_score[c:c + SCORE_CHUNK]))
            bar.update(len(to_score[c:c + SCORE_CHUNK]))
    return results


def score(plan: RunPlan, generated: Generated) -> Scored:
    """Stage 3: judge every sample and compute metrics.

    Raises:
        Whatever the scorer raises (the caller marks the run failed).
    """
    s0 = time.perf_counter()
    results = _judge(plan, generated)
    score_s = time.perf_counter() - s0
    samples: list[dict[str, Any]] = []
    per_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rule = plan.protocol.spec.extraction.rule
    for (iid, j, seed), res in zip(plan.keys, results, strict=True):
        g = generated.samples[(iid, j, seed)]
        sample = {"item_id": iid, "sample_index": j, "seed": seed, "score": res.score, "status": res.status,
                  "extracted": res.extracted, "detail": res.detail, "cached": not g.get("fresh", False),
                  "behavior": sample_behavior(g["text"], g["completion_tokens"], g["finish_reason"], rule=rule)}
        samples.append(sample)
        per_item[iid].append(sample)
    return Scored(samples, compute_metrics(plan.protocol, per_item), score_s)
