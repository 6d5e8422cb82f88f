"""A generative judge evaluated on preference pairs, the ``judge_preference`` scorer: the pairwise LLM judge of
``rlhf.judge`` is shown each pair's chosen and rejected answers in both orders (the position swap of MT-Bench,
Zheng et al. 2023, sec. 3.4) and the pair's score is its preference for the chosen answer, ``rlhf.pairwise``'s item
preference with the chosen answer as the model (1: chosen in both orders, 0.5: one each or ties, 0: neither). The
judge's accuracy is the mean over pairs, with the ``reward_preference`` metrics (per category, length bias,
RewardBench's score).

RewardBench's own generative judges (allenai/reward-bench ``scripts/run_generative.py``) show each pair once in a
random order and count a tie or an unreadable verdict as 0.5; here both orders are always judged, so position bias
cancels and shows as the position-flip rate, and an unreadable verdict in either order is ``judge_unparseable``,
score 0 (a loss, as every evalgate judge rate counts it; docs/RLHF.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalgate.core.errors import BadInput, EvalgateError
from evalgate.rlhf.judge import UNPARSEABLE, judge_pair, log_judge_read, open_judge_calls, render
from evalgate.rlhf.judge_calls import JudgeCalls, JudgePrompt
from evalgate.rlhf.judge_preference_options import JudgePreferenceOptions
from evalgate.rlhf.pairwise import PairJudgement, item_preference, win_rate
from evalgate.scoring.base import SampleToScore, ScoreResult, require_one_sample

JUDGE_PREFERENCE_STATUSES = ("correct", "wrong", "tie", UNPARSEABLE)
"""``correct``: the judge prefers the chosen answer over both orders (preference above 0.5); ``wrong``: the rejected
one; ``tie``: 0.5 (one order each, or ties); ``judge_unparseable``: a verdict unreadable in either order (score 0)."""


class JudgePreferenceScorer:
    """The ``judge_preference`` scorer (see the module docstring). Runs inside ``evalgate run`` only: ``begin``
    renders the judge's calls, looks them up in the generation cache and logs the judge's read of the split;
    ``score`` asks what the cache lacks."""

    name = "judge_preference"

    def __init__(self, protocol: Any, options: JudgePreferenceOptions) -> None:
        self.protocol, self.options = protocol, options
        self.judge = options.as_judge()
        self.tier: str | None = None
        self._calls: JudgeCalls | None = None
        self._prompts: dict[Any, tuple[JudgePrompt, JudgePrompt]] = {}
        self._pairs: dict[Any, PairJudgement] = {}
        self._unparseable = 0

    @staticmethod
    def check_protocol(spec: Any, options: JudgePreferenceOptions) -> None:
        """One sample per pair: nothing is generated."""
        require_one_sample(spec, "judge_preference", "generates nothing (the judge is shown each pair's two answers)")

    @property
    def required_fields(self) -> tuple[str, ...]:
        """Prompt, chosen, rejected and category fields."""
        o = self.options
        return (o.prompt_field, o.chosen_field, o.rejected_field, o.category_field)

    def _answers(self, s: SampleToScore) -> tuple[str, str, str]:
        o = self.options
        return str(s.item[o.prompt_field]), str(s.item[o.chosen_field]), str(s.item[o.rejected_field])

    def begin(self, plan: Any, samples: Sequence[SampleToScore]) -> None:
        """Render both orders of every pair, look the calls up in the cache and log the judge's read of the split
        before the judge sees anything. The run's checkpoint is the judge's local copy where it has one.

        Raises:
            BadInput: the run's checkpoint is not the judge the protocol pins.
        """
        digest = self.options.judge.digest
        if digest is not None and plan.checkpoint.digest != digest:
            raise BadInput(f"the judge_preference scorer evaluates the judge the protocol pins ({digest}): run it "
                           f"with --checkpoint on that judge, not {plan.checkpoint.digest}")
        self.tier = plan.manifest.tier
        calls, _ = open_judge_calls(self.judge, plan)
        self._calls = calls
        for s in samples:
            q, chosen, rejected = self._answers(s)
            self._prompts[s.key] = (calls.prompt(render(self.judge, q, answer_a=chosen, answer_b=rejected)),
                                    calls.prompt(render(self.judge, q, answer_a=rejected, answer_b=chosen)))
        log_judge_read(plan, calls, self._prompts, f"{len(samples)} preference pairs")

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Per pair: the judge's preference for the chosen answer over both orders (see the module docstring).

        Raises:
            EvalgateError: called outside a run (no ``begin``).
        """
        if self._calls is None:
            raise EvalgateError("the judge_preference scorer runs inside evalgate run: call begin(plan, samples) "
                                "first")
        self._calls.ask([p for s in samples for p in self._prompts[s.key]])
        out = []
        for s in samples:
            _, chosen, rejected = self._answers(s)
            pair, bad = judge_pair(self.judge, self._calls, self._prompts[s.key], (chosen, rejected),
                                   str(s.key[0]) if s.key else "", len(chosen), len(rejected))
            self._pairs[s.key] = pair
            pref = item_preference(pair)
            if bad is not None or pref is None:
                self._unparseable += 1
                assert bad is not None
                out.append(ScoreResult(0.0, UNPARSEABLE, None, f"{bad.detail}; the judge wrote {bad.text[:200]!r}; "
                                       "counted as the rejected answer preferred"))
                continue
            status = "correct" if pref > 0.5 else "wrong" if pref < 0.5 else "tie"
            out.append(ScoreResult(pref, status, f"{pair.model_first}/{pair.baseline_first}",
                                   f"chosen first: {pair.model_first}; rejected first: {pair.baseline_first}"))
        return out

    def metrics(self) -> dict[str, Any]:
        """The judge's calls, unparseable count, position-flip and first-position rates over the pairs."""
        pairs = list(self._pairs.values())
        rates = win_rate(pairs, seed=self.options.sampling.seed) if pairs else {}
        return {"calls": self._calls.info() if self._calls else None, "unparseable": self._unparseable,
                "position_flip_rate": rates.get("position_flip_rate"),
                "first_position_rate": rates.get("first_position_rate")}


def judge_preference_metrics(per_item: dict[str, list[dict[str, Any]]], items: dict[str, dict[str, Any]],
                             options: JudgePreferenceOptions, scorer: Any) -> dict[str, Any]:
    """The run metrics: ``rlhf.preference.preference_metrics`` (the accuracy is the mean preference for the chosen
    answer, ties half, with its bootstrap CI; per category; length bias; RewardBench's score) and ``judge``: the
    judge's calls, unparseable pairs, position-flip and first-position rates (``JudgePreferenceScorer.metrics``).

    Raises:
        EvalgateError: ``scorer`` is not the scorer that judged the run.
    """
    from evalgate.rlhf.preference import preference_metrics

    if not isinstance(scorer, JudgePreferenceScorer) or scorer._calls is None:
        raise EvalgateError("the judge_preference run metrics come from the JudgePreferenceScorer that judged the run")
    return {**preference_metrics(per_item, items, options, scorer), "judge": scorer.metrics()}
