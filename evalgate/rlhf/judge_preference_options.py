"""Options of the ``judge_preference`` scorer (``rlhf.judge_preference``): an LLM judge evaluated on preference pairs,
light enough for ``scoring.base`` to register without importing the scorer."""

from __future__ import annotations

import string
from typing import Any, Literal

from pydantic import field_validator, model_validator

from evalgate.rlhf.judge_options import (
    LOCATION_FIELDS,
    JudgeBaseline,
    JudgeModel,
    JudgeOptions,
    JudgeSampling,
    one_group_pattern,
)
from evalgate.scoring.options import ScorerOptions

PAIR_BASELINE = "preference-pairs"
"""The placeholder baseline of the pairwise ``JudgeOptions`` this scorer hands to the judge's machinery (render,
parse, calls): the pair's rejected answer is the baseline, read from the item, never from a run."""


class JudgePreferenceOptions(ScorerOptions):
    """Options of the ``judge_preference`` scorer: a pairwise LLM judge is asked which of a pair's chosen and rejected
    answers is better, in both orders; the pair's score is its preference for the chosen answer (1 both orders, 0.5
    split or tied, 0 neither). Every field that decides a verdict is required, as for the ``judge`` scorer; nothing
    is generated (``sampling.n`` must be 1)."""

    judge: JudgeModel
    """The judging model (``judge`` scorer's ``judge``). Required."""
    template: str
    """Judge prompt, Python ``str.format`` fields ``{question}``, ``{rubric}``, ``{answer_a}``, ``{answer_b}``.
    Required."""
    rubric: str
    """What the judge is asked to weigh (put into ``{rubric}``). Required."""
    parse: str
    """Regular expression with one group reading the verdict (``\\[\\[([ABC])\\]\\]``); an echo of an answer is
    never read, as for the ``judge`` scorer. Required."""
    verdicts: dict[str, Literal["A", "B", "tie"]]
    """What each parsed group means (``{"A": "A", "B": "B", "C": "tie"}``). Required."""
    sampling: JudgeSampling
    """The judge's sampling. Required."""
    prompt_field: str = "prompt"
    """Item field holding the question shown to the judge. Default: ``prompt``."""
    chosen_field: str = "chosen"
    """Item field holding the preferred answer. Default: ``chosen``."""
    rejected_field: str = "rejected"
    """Item field holding the dispreferred answer. Default: ``rejected``."""
    category_field: str = "category"
    """Item field naming the pair's category (its RewardBench subset). Default: ``category``."""

    @field_validator("parse")
    @classmethod
    def _one_group(cls, v: str) -> str:
        return one_group_pattern(v)

    @model_validator(mode="after")
    def _template_fields(self) -> JudgePreferenceOptions:
        fields = {"question", "rubric", "answer_a", "answer_b"}
        try:
            used = {name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None}
        except ValueError as e:
            raise ValueError(f"template is not a str.format template ({e}); write a literal brace as {{{{ or }}}}") \
                from e
        if used != fields:
            raise ValueError(f"template must use exactly the fields {{question}}, {{rubric}}, {{answer_a}}, "
                             f"{{answer_b}} (it uses {', '.join('{' + f + '}' for f in sorted(used)) or 'none'})")
        return self

    def as_judge(self) -> JudgeOptions:
        """The same judge as the ``judge`` scorer's pairwise options (its prompt rendering, parse rule and calls)."""
        return JudgeOptions(mode="pairwise", judge=self.judge, template=self.template, rubric=self.rubric,
                            question_field=self.prompt_field, parse=self.parse, scale=None, verdicts=self.verdicts,
                            baseline=JudgeBaseline(run_id=PAIR_BASELINE), sampling=self.sampling)

    def hashed(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The options without ``judge.checkpoint`` and ``judge.base_url``, as the ``judge`` scorer's."""
        judge = {k: v for k, v in dict(raw.get("judge") or {}).items() if k not in LOCATION_FIELDS}
        return {**raw, "judge": judge}
