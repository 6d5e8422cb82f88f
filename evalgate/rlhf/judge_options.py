"""Options of the ``judge`` scorer (``scoring.judge``): which model judges, with what prompt, sampling and parse
rule, pointwise on a scale or pairwise against a baseline's stored completions.

Every field that decides a verdict is required (no defaults), so the protocol names the judge in full and its hash
changes when any part of it does. Two fields are locations, not identity, and are left out of the hash
(``JudgeOptions.hashed``): ``judge.checkpoint`` (where the weights pinned by ``judge.digest`` lie on this machine)
and ``judge.base_url`` (where the served model named by ``judge.model`` answers).
"""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from evalgate.scoring.options import ScorerOptions

LOCATION_FIELDS = ("checkpoint", "base_url")
"""``judge`` fields left out of the protocol hash: where the judge is found, not which judge it is."""



def one_group_pattern(v: str) -> str:
    """``v`` if it is a regular expression with exactly one capture group (the judge's verdict); ValueError naming
    the fault otherwise (pydantic turns it into the options' validation error)."""
    try:
        groups = re.compile(v).groups
    except re.error as e:
        raise ValueError(f"parse is not a regular expression: {e}") from e
    if groups != 1:
        raise ValueError(f"parse must have exactly one group (it has {groups})")
    return v

class JudgeModel(ScorerOptions):
    """Which model judges: a local checkpoint pinned by digest, or a served model by id."""

    backend: Literal["hf", "vllm", "openai"]
    """evalgate backend the judge runs on. Required."""
    checkpoint: str | None = None
    """Where the judge's weights are (HF directory or .gguf): absolute, ``~``, ``$VAR`` / ``${VAR}`` expanded, or
    relative to the protocol file. Not hashed (``digest`` is the identity). Required for ``hf`` / ``vllm``; for
    ``openai`` the local copy of the served weights, whose tokenizer and chat template render the judge's prompt
    (and name its special tokens, escaped in the completion); without one, the server applies its own chat template
    to the judge's message (``/v1/chat/completions``) and the protocol pins the served ``model`` id only, not the
    weights behind it. Default: none."""
    digest: str | None = None
    """The checkpoint's digest as ``evalgate`` computes it (``blake3:<hex>``); a judge whose files hash otherwise is
    refused. Required with ``checkpoint``. Default: none."""
    model: str | None = None
    """Served model id for the ``openai`` backend (required there). Default: none."""
    base_url: str | None = Field(None, pattern=r"^https?://")
    """``openai``: the server's root (``http://127.0.0.1:8000/v1``); not hashed. Default:
    ``$EVALGATE_OPENAI_BASE_URL``."""

    @model_validator(mode="after")
    def _one_identity(self) -> JudgeModel:
        if (self.checkpoint is None) != (self.digest is None):
            raise ValueError("a judge's 'checkpoint' and its pinned 'digest' go together")
        if self.backend == "openai":
            if not self.model:
                raise ValueError("an openai judge names its served model id in 'model'")
        elif not self.checkpoint or self.model or self.base_url:
            raise ValueError(f"a {self.backend} judge names its 'checkpoint' and pins its 'digest' (no 'model' or "
                             "'base_url': those name a served judge)")
        return self


class JudgeSampling(ScorerOptions):
    """The judge's sampling."""

    temperature: float = Field(ge=0)
    """Sampling temperature of the judge's verdict (0: greedy, as MT-Bench judges). Required."""
    max_tokens: int = Field(gt=0)
    """Most tokens the judge may write. Required."""
    seed: int
    """Sampling seed of the judge's draws. Required."""


class JudgeBaseline(ScorerOptions):
    """Whose stored completions a pairwise judge compares with: exactly one of ``checkpoint`` and ``run_id``."""

    checkpoint: str | None = None
    """Digest of the baseline checkpoint (``blake3:<hex>``): its completions of the same items (same item, sample
    index and sampling seed) generated under this same protocol, taken from the store (run the baseline under this
    protocol first). Default: none."""
    run_id: str | None = None
    """A complete run on the same split content whose completions are the baseline (any protocol; its sample j of
    an item is compared with the run's sample j). Default: none."""

    @model_validator(mode="after")
    def _exactly_one(self) -> JudgeBaseline:
        if (self.checkpoint is None) == (self.run_id is None):
            raise ValueError("a baseline names exactly one of 'checkpoint' (a digest) and 'run_id'")
        return self


class JudgeOptions(ScorerOptions):
    """Options of the ``judge`` scorer: an LLM judges each completion, pointwise (a rubric and a scale) or pairwise
    against a baseline's stored completions of the same items, in both orders. Every field that decides a verdict
    is required, so the protocol names the judge in full and its hash changes when any part of the judge does
    (``judge.checkpoint`` and ``judge.base_url`` are locations and are not hashed)."""

    mode: Literal["pointwise", "pairwise"]
    """``pointwise``: the judge rates one completion on ``scale``; ``pairwise``: it compares the completion with the
    ``baseline``'s of the same item, in both orders. Required."""
    judge: JudgeModel
    """The judging model. Required."""
    template: str
    """Judge prompt, Python ``str.format`` fields: ``{question}`` and ``{rubric}``; pointwise ``{answer}``,
    pairwise ``{answer_a}`` and ``{answer_b}``; ``{reference}`` with ``reference_field``. Required."""
    rubric: str
    """What the judge is asked to weigh (put into ``{rubric}``). Required."""
    question_field: str
    """Item field holding the question shown to the judge. Required."""
    reference_field: str | None = None
    """Item field holding a reference answer the template shows the judge as ``{reference}`` (reference-guided
    grading: MT-Bench's judge prompts for math and coding, Zheng et al. 2023; inspect_ai's ``model_graded_fact``).
    The template must then use ``{reference}``, and every item must have the field. Default: none."""
    parse: str
    """Regular expression with one group reading the verdict (``\\[\\[(\\d+)\\]\\]`` for a rating,
    ``\\[\\[([ABC])\\]\\]`` for a pairwise verdict); a match whose text also stands in an answer shown to the
    judge is an echo and left out; every other match must agree, else the verdict is unparseable. Required."""
    scale: list[int] | None
    """Pointwise: lowest and highest rating; the score is ``(rating - low) / (high - low)``. Pairwise: null.
    Required."""
    verdicts: dict[str, Literal["A", "B", "tie"]] | None
    """Pairwise: what each parsed group means (``{"A": "A", "B": "B", "C": "tie"}``). Pointwise: null. Required."""
    verdict_weights: dict[str, int] | None = None
    """Pairwise: how many games a parsed group counts as (a weighted verdict scale). Arena-Hard's five levels,
    ``verdicts: {"A>>B": A, "A>B": A, "A=B": tie, "B>A": B, "B>>A": B}`` with ``{"A>>B": 3, "B>>A": 3}``: a strong
    verdict counts three times (arena-hard-auto ``show_result.py``: ``"A>>B": [1] * weight``, weight 3); the win
    rate is then the weighted share over all verdicts. A group left out weighs 1. Default: every verdict 1."""
    baseline: JudgeBaseline | None = None
    """Pairwise: whose stored completions are compared (required there). Pointwise: none. Default: none."""
    sampling: JudgeSampling
    """The judge's sampling. Required."""

    @field_validator("parse")
    @classmethod
    def _one_group(cls, v: str) -> str:
        return one_group_pattern(v)

    @model_validator(mode="after")
    def _mode_fields(self) -> JudgeOptions:
        if self.mode == "pointwise" and (self.scale is None or len(self.scale) != 2 or self.scale[0] >= self.scale[1]
                                         or self.verdicts or self.baseline):
            raise ValueError("a pointwise judge needs scale: [low, high] with low < high, verdicts: null and no "
                             "baseline")
        if self.mode == "pairwise" and (not self.verdicts or self.scale is not None or self.baseline is None):
            raise ValueError("a pairwise judge needs verdicts (parsed group -> A, B or tie), a baseline "
                             "(checkpoint digest or run_id) and scale: null")
        if self.verdict_weights is not None:
            bad = sorted(set(self.verdict_weights) - set(self.verdicts or {}))
            if self.mode != "pairwise" or bad or min(self.verdict_weights.values(), default=1) < 1:
                raise ValueError("verdict_weights gives a pairwise judge's parsed groups (keys of verdicts) a whole "
                                 f"number of games >= 1; {'unknown group(s) ' + ', '.join(bad) if bad else 'fix it'}")
        fields = {"question", "rubric"} | ({"answer"} if self.mode == "pointwise" else {"answer_a", "answer_b"})
        fields |= {"reference"} if self.reference_field else set()
        try:
            used = {name for _, name, _, _ in string.Formatter().parse(self.template) if name is not None}
        except ValueError as e:
            raise ValueError(f"template is not a str.format template ({e}); write a literal brace as {{{{ or }}}}") \
                from e
        missing, unknown = sorted(fields - used), sorted(used - fields)
        if missing:
            raise ValueError(f"template lacks the field(s) {', '.join('{' + f + '}' for f in missing)}")
        if unknown == ["reference"]:
            raise ValueError("template uses {reference}: name the item field that holds it in reference_field")
        if unknown:
            raise ValueError(f"template has the unknown field(s) {', '.join('{' + f + '}' for f in unknown)} (a "
                             f"{self.mode} judge fills {', '.join('{' + f + '}' for f in sorted(fields))}; write a "
                             "literal brace as {{ or }})")
        return self

    def hashed(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The options without ``judge.checkpoint`` and ``judge.base_url`` (``LOCATION_FIELDS``): moving the judge's
        weights or its server keeps the hash; its digest, model id, prompt, sampling and parse rule do not."""
        judge = {k: v for k, v in dict(raw.get("judge") or {}).items() if k not in LOCATION_FIELDS}
        return {**raw, "judge": judge}
