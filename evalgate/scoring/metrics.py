"""Run metrics defined once: each is a per-item value over that item's scored samples, aggregated as the mean over
items with its stderr (items as the unit). The run computes them with ``run_metrics``; the gate takes the same
per-item values with ``item_values`` for its paired statistics (the shape of lighteval's ``Metric(sample_level_fn,
corpus_level_fn)`` and inspect_ai's ``@scorer(metrics=[accuracy(), stderr()])``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.registry import Registry
from evalgate.core.stats import mean_stderr
from evalgate.scoring.passk import pass_at_k

_PASS_AT = re.compile(r"^pass@([1-9]\d*)$")
_FAMILY = re.compile(r"@[1-9]\d*$")

ItemValue = Callable[[Sequence[Mapping[str, Any]]], float]
"""One item's scored samples (each a mapping with ``status`` and ``score``) -> the item's value in [0, 1]."""


@dataclass(frozen=True)
class Metric:
    """One per-item metric.

    Attributes:
        name: ``pass@k``, ``mean_score`` or a plugin's name.
        item_value: maps one item's scored samples (each a mapping with ``status`` and ``score``) to a value in
            [0, 1].
    """

    name: str
    item_value: ItemValue


@dataclass(frozen=True)
class MetricEntry:
    """One registered metric, or a family of metrics with a whole-number parameter ``k >= 1`` written after ``@``
    (registered as ``pass@k``, used as ``pass@1``, ``pass@10``).

    Attributes:
        help: what the per-item value is, with the source of its formula.
        item_value: a plain metric's per-item function; None for a family.
        family: a family's ``family(k) -> item_value``; None for a plain metric.
        rate: whether every per-item value is a share in [0, 1] (pass@k, IFEval accuracies), so a difference of two
            runs lies in [-1, 1] and a gate threshold outside it is refused at load; false where the range is the
            scorer's (``mean_score`` of a reward model, a plugin's metric). Default: false.
    """

    help: str
    item_value: ItemValue | None = None
    family: Callable[[int], ItemValue] | None = None
    rate: bool = False


def _pass_at(k: int) -> ItemValue:
    def value(samples: Sequence[Mapping[str, Any]]) -> float:
        return pass_at_k(len(samples), sum(1 for s in samples if s["status"] == "correct"), k)
    return value


def _mean_score(samples: Sequence[Mapping[str, Any]]) -> float:
    if not samples:
        raise BadInput("mean_score of an item with no samples is undefined")
    return sum(float(s["score"]) for s in samples) / len(samples)


METRICS: Registry[MetricEntry] = Registry("metric", MetricEntry, entry_point_group="evalgate.metrics",
                                          alias=lambda name: _FAMILY.sub("@k", name))
"""Metrics by name (a gate policy's ``metric``); a family is registered as ``<name>@k``; plugins through the
``evalgate.metrics`` entry-point group (each names a ``MetricEntry``)."""

METRICS.register("pass@k", MetricEntry(
    "the unbiased per-item estimator 1 - C(n-c, k)/C(n, k) with n samples and c correct (Chen et al. 2021, eq. 1); "
    "an item with fewer than k samples is an error, never pass@k = 1", family=_pass_at, rate=True))
METRICS.register("mean_score", MetricEntry("the mean sample score of the item", item_value=_mean_score))
METRICS.register("ifeval_prompt_strict", MetricEntry(
    "IFEval prompt-level strict accuracy: the share of the item's samples that follow every instruction as written "
    "(Zhou et al. 2023; the ifeval scorer; equals pass@1 under its default score: strict)",
    item_value=lambda samples: _ifeval().prompt_strict(samples), rate=True))
METRICS.register("ifeval_prompt_loose", MetricEntry(
    "IFEval prompt-level loose accuracy: the share of the item's samples some loose variant of which (first or last "
    "line dropped, '*' removed) follows every instruction (Zhou et al. 2023; the ifeval scorer)",
    item_value=lambda samples: _ifeval().prompt_loose(samples), rate=True))


def _ifeval() -> Any:
    from evalgate.scoring import ifeval

    return ifeval


def get_metric(name: str) -> Metric:
    """The metric called ``name``: a plain metric of ``METRICS`` or a family's member (``pass@k`` as ``pass@1``,
    ``pass@10``; each entry's ``help`` says what it is).

    Raises:
        BadInput: an unknown name (the message lists the known ones; ``pass@0`` is unknown).
    """
    entry = METRICS.require(name)
    if entry.family is not None:
        if not _FAMILY.search(name):
            raise BadInput(f"metric {name!r}: write k as a whole number >= 1 ({name.rsplit('@', 1)[0]}@1)")
        return Metric(name, entry.family(int(name.rsplit("@", 1)[1])))
    if entry.item_value is None:
        raise BadInput(f"metric {name!r} ({METRICS.origin(name)}) has neither item_value nor family; give one")
    return Metric(name, entry.item_value)


def registered_name(name: str) -> str:
    """The name ``name`` is registered under in ``METRICS``: a family member's family (``pass@10`` -> ``pass@k``),
    any other name itself."""
    return _FAMILY.sub("@k", name)


def check_metric(name: str) -> str:
    """``name`` when it is a known metric (``get_metric``); the gate policy's ``metric`` field validator.

    Raises:
        ValueError: an unknown name (``get_metric``'s message), as pydantic validators raise.
    """
    try:
        get_metric(name)
    except BadInput as e:
        raise ValueError(e.message) from e
    return name


def is_rate(name: str) -> bool:
    """Whether metric ``name`` is a share in [0, 1] per item (``MetricEntry.rate``); false for an unknown name."""
    entry = METRICS.get(name)
    return bool(entry is not None and entry.rate)


def pass_at_k_of(name: str) -> int | None:
    """k of a ``pass@k`` metric name, or None for another metric."""
    m = _PASS_AT.match(name)
    return int(m.group(1)) if m else None


def group_by_item(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Sample rows (each with ``item_id``) grouped by item id, in first-seen order."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by.setdefault(str(r["item_id"]), []).append(r)
    return by


def item_values(per_item: Mapping[str, Sequence[Mapping[str, Any]]], name: str) -> dict[str, float]:
    """Per-item values of metric ``name``: ``{item_id: value}``.

    Raises:
        BadInput: unknown metric, or an item with fewer than k samples for pass@k.
    """
    metric = get_metric(name)
    return {i: metric.item_value(ss) for i, ss in per_item.items()}


def aggregate(per_item: Mapping[str, Sequence[Mapping[str, Any]]], name: str) -> tuple[float, float]:
    """Mean over items of the metric's per-item value and the stderr of that mean (``stats.mean_stderr``).

    Raises:
        BadInput: unknown metric, no items, or too few samples for pass@k.
    """
    values = item_values(per_item, name)
    if not values:
        raise BadInput(f"{name} over zero items is undefined")
    return mean_stderr(list(values.values()))


def run_metrics(per_item: Mapping[str, Sequence[Mapping[str, Any]]], pass_at: Sequence[int],
                greedy: bool) -> dict[str, float]:
    """The score metrics a run reports: ``pass@k`` and ``pass@k_stderr`` for each k, ``mean_score`` and
    ``mean_score_stderr``.

    A greedy protocol (temperature 0) reports pass@1 only: its samples are copies of one decode, so pass@k for
    k > 1 would be pass@1 renamed.
    """
    out: dict[str, float] = {}
    for k in [1] if greedy else pass_at:
        out[f"pass@{k}"], out[f"pass@{k}_stderr"] = aggregate(per_item, f"pass@{k}")
    out["mean_score"], out["mean_score_stderr"] = aggregate(per_item, "mean_score")
    return out
