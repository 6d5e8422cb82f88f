"""Reward-model accuracy on preference pairs: overall, per category, and split by length (RewardBench's measure,
Lambert et al. 2024, "RewardBench: Evaluating Reward Models for Language Modeling", arXiv:2403.13787).

Each pair (prompt, chosen, rejected, category) is one item; the ``reward_preference`` scorer marks it ``correct``
(score 1) when the reward model gives the chosen answer the higher reward, else ``wrong`` (score 0; a tie is wrong,
as RewardBench counts it). Accuracy is the mean over pairs, with a percentile bootstrap CI over pairs
(``stats.bootstrap_ci``, seeded). The length bias compares the accuracy on pairs whose chosen answer is the shorter
(in characters) with the accuracy where it is the longer: a reward model that prefers long answers scores well
on the second group and badly on the first (the verbosity bias of Singhal et al. 2023, "A Long Way to Go:
Investigating Length Correlations in RLHF"). Pairs scored ``error`` (beyond the RM's context) are left out and
counted.

Beside the pooled accuracy, RewardBench's own score (``rewardbench_score``): each subset's accuracy, the subsets of a
section averaged weighted by their example counts, and the mean of the sections (allenai/reward-bench
``calculate_scores_per_section`` and its leaderboard's average). The subset is the pair's category; its section the
item's ``section`` field (the ``rewardbench`` importer writes RewardBench's), else RewardBench's section of a subset it
lists, else the subset alone; its weight RewardBench's ``EXAMPLE_COUNTS`` for a subset it lists (math-prm's 447 pairs
count 984), else the subset's pairs in the run.

On a private or human-audit split (the sealed tiers, whose per-item outputs are never shown) the metrics hold no
group smaller than ``MIN_SEALED_GROUP`` pairs: a category is a label many pairs share (the importers' ``gsm8k-
wrong-final``, a benchmark's ``chat`` / ``safety``), but nothing stops a split's author from giving one pair its own
category (its question, a topic, an id), and a group of one pair is that pair's outcome. So a smaller category is
reported neither by name nor by accuracy (``preference_categories_withheld`` counts them and their pairs, which
stay in the overall accuracy), and a length group that small keeps its ``n`` with its accuracy and CI None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalgate.core.stats import bootstrap_ci
from evalgate.datasets.rewardbench import EXAMPLE_COUNTS, SECTION_OF
from evalgate.keys.sealing import SEALED_TIERS

CONFIDENCE = 0.95
RESAMPLES = 10_000
MIN_SEALED_GROUP = 10
"""On a sealed tier, the fewest pairs a category or length group must hold to be reported (see the module
docstring; 10, a common minimum cell size of statistical disclosure control)."""


def accuracy_ci(correct: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """``{"n", "accuracy", "low", "high"}`` of 0/1 outcomes: the mean and its 95% percentile bootstrap CI
    (``stats.bootstrap_ci``, ``RESAMPLES`` resamples, seeded); accuracy and bounds None for no pairs."""
    if not correct:
        return {"n": 0, "accuracy": None, "low": None, "high": None}
    low, high = bootstrap_ci(correct, CONFIDENCE, RESAMPLES, seed)
    return {"n": len(correct), "accuracy": sum(correct) / len(correct), "low": low, "high": high}


def preference_metrics(per_item: Mapping[str, Sequence[Mapping[str, Any]]], items: Mapping[str, Mapping[str, Any]],
                       options: Any, scorer: Any = None) -> dict[str, Any]:
    """The ``reward_preference`` run metrics.

    Args:
        per_item: scored samples by item id (one sample per pair; ``score`` 1 or 0, ``status``).
        items: the split's items by id (the pair's answers and category).
        options: the scorer's ``PreferenceOptions`` (which item fields hold the answers and the category).
        scorer: the ``PreferenceScorer`` that scored the run: its ``tier`` (the split's) says whether small groups
            are withheld (a sealed tier, or no scorer: unknown, so withheld too).

    Returns:
        ``preference_accuracy`` (with ``preference_accuracy_low`` / ``_high``, the 95% CI), ``preference_pairs``,
        ``preference_errors``; ``preference_by_category``: ``{category: accuracy_ci}`` sorted by name;
        ``preference_categories_withheld``: ``{"categories", "pairs"}`` left out of it (sealed tiers: those under
        ``MIN_SEALED_GROUP`` pairs; else zeros); ``length_bias``: ``chosen_shorter`` and ``chosen_longer`` (each
        ``accuracy_ci``; on a sealed tier a group under ``MIN_SEALED_GROUP`` pairs has accuracy and CI None),
        ``equal_length`` (pairs of equal length, in neither group) and ``gap`` (chosen_longer minus chosen_shorter
        accuracy; None when a group's accuracy is); ``rewardbench_score`` and ``rewardbench_sections``
        (``rewardbench_score``; on a sealed tier a section under ``MIN_SEALED_GROUP`` pairs is left out of the
        sections shown, and a subset withheld above out of its section's list, both still in the score).
    """
    outcomes: list[tuple[str, float, int]] = []  # (category, 0/1, len(chosen) - len(rejected))
    section_of: dict[str, str] = {}
    errors = 0
    for iid, samples in per_item.items():
        s = samples[0]
        if s["status"] == "error":
            errors += 1
            continue
        it = items[iid]
        category = str(it[options.category_field])
        section_of.setdefault(category, str(it.get("section") or SECTION_OF.get(category, category)))
        outcomes.append((str(it[options.category_field]), float(s["score"]),
                         len(str(it[options.chosen_field])) - len(str(it[options.rejected_field]))))
    least = MIN_SEALED_GROUP if getattr(scorer, "tier", None) in (*SEALED_TIERS, None) else 1
    overall = accuracy_ci([o for _, o, _ in outcomes])
    groups = {c: [o for cat, o, _ in outcomes if cat == c] for c in sorted({c for c, _, _ in outcomes})}
    by_cat = {c: accuracy_ci(g) for c, g in groups.items() if len(g) >= least}
    withheld = [len(g) for c, g in groups.items() if c not in by_cat]
    shorter = _group([o for _, o, d in outcomes if d < 0], least)
    longer = _group([o for _, o, d in outcomes if d > 0], least)
    gap = (longer["accuracy"] - shorter["accuracy"]
           if longer["accuracy"] is not None and shorter["accuracy"] is not None else None)
    score, sections = rewardbench_score(groups, section_of)
    shown = {name: sec for name, sec in sections.items() if sec["pairs"] >= least}
    for sec in shown.values():
        sec["subsets"] = {c: w for c, w in sec["subsets"].items() if c in by_cat}
    return {"preference_accuracy": overall["accuracy"], "preference_accuracy_low": overall["low"],
            "preference_accuracy_high": overall["high"], "preference_pairs": overall["n"],
            "preference_errors": errors, "preference_by_category": by_cat,
            "rewardbench_score": score, "rewardbench_sections": shown,
            "preference_categories_withheld": {"categories": len(withheld), "pairs": sum(withheld)},
            "length_bias": {"chosen_shorter": shorter, "chosen_longer": longer,
                            "equal_length": sum(1 for _, _, d in outcomes if d == 0), "gap": gap}}


def _group(correct: list[float], least: int) -> dict[str, Any]:
    """``accuracy_ci`` of a length group, its accuracy and CI None when it holds fewer than ``least`` pairs."""
    if len(correct) >= least:
        return accuracy_ci(correct)
    return {"n": len(correct), "accuracy": None, "low": None, "high": None}


def rewardbench_score(subsets: Mapping[str, Sequence[float]], section_of: Mapping[str, str]
                      ) -> tuple[float | None, dict[str, dict[str, Any]]]:
    """RewardBench's score: per section the subsets' accuracies weighted by example count, then the mean of the
    sections (allenai/reward-bench ``rewardbench/utils.py`` ``calculate_scores_per_section``, whose section
    scores the leaderboard averages).

    Args:
        subsets: each subset's 0/1 outcomes (a subset with none is left out, as RewardBench leaves out a subset it
            has no result for).
        section_of: each subset's section.

    Returns:
        (score, sections): the mean of the section scores (None without a pair) and per section
        ``{"score", "pairs", "subsets": {subset: weight}}``, the weight RewardBench's ``EXAMPLE_COUNTS`` for a
        subset it lists, else the subset's pairs.
    """
    sections: dict[str, dict[str, Any]] = {}
    for subset in sorted(subsets):
        got = subsets[subset]
        if not got:
            continue
        sec = sections.setdefault(section_of[subset], {"weighted": 0.0, "weight": 0.0, "pairs": 0, "subsets": {}})
        weight = EXAMPLE_COUNTS.get(subset, len(got))
        sec["weighted"] += sum(got) / len(got) * weight
        sec["weight"] += weight
        sec["pairs"] += len(got)
        sec["subsets"][subset] = weight
    out = {name: {"score": s["weighted"] / s["weight"], "pairs": s["pairs"], "subsets": s["subsets"]}
           for name, s in sorted(sections.items())}
    score = sum(s["score"] for s in out.values()) / len(out) if out else None
    return score, out
