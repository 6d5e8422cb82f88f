"""LLM judge: a model judges completions, pointwise (a rubric and a scale) or pairwise (two completions, both orders).

The judge is part of the protocol: its identity (a local checkpoint's digest, or a served model id), its prompt
template, its sampling and its parse rule are the options of the ``judge`` scorer, all required (no defaults), so
the protocol's hash changes whenever any of them does. Judge prompts follow MT-Bench's single-answer grading and
pairwise templates (Zheng et al. 2023, "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", appendix; verdicts
written ``[[A]]``, ``[[B]]``, ``[[C]]`` for a tie, ratings ``[[5]]``); the template text is the protocol's own.

A verdict the parse rule cannot read is the status ``unparseable`` (score 0, never a tie and never a rating).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from evalgate.errors import BadInput
from evalgate.rlhf.pairwise import PairJudgement
from evalgate.scoring.base import ScorerOptions


class JudgeModel(ScorerOptions):
    """Which model judges: a local checkpoint pinned by digest, or a served model by id."""

    backend: Literal["hf", "vllm", "openai"]
    """evalgate backend the judge runs on. Required."""
    checkpoint: str | None = None
    """Local judge checkpoint (HF directory or .gguf) for ``hf`` / ``vllm``. Default: none (a served judge)."""
    digest: str | None = None
    """The local checkpoint's digest as ``evalgate`` computes it (``blake3:<hex>``); a judge whose files hash
    otherwise is refused. Required with ``checkpoint``."""
    model: str | None = None
    """Served model id for the ``openai`` backend. Default: none (a local judge)."""

    @model_validator(mode="after")
    def _one_identity(self) -> JudgeModel:
        if self.backend == "openai":
            if not self.model or self.checkpoint:
                raise ValueError("an openai judge names its served model id in 'model' (and no 'checkpoint')")
        elif not (self.checkpoint and self.digest) or self.model:
            raise ValueError(f"a {self.backend} judge names its 'checkpoint' and pins its 'digest'")
        return self


class JudgeSampling(ScorerOptions):
    """The judge's sampling."""

    temperature: float = Field(ge=0)
    """Sampling temperature of the judge's verdict (0: greedy, as MT-Bench judges). Required."""
    max_tokens: int = Field(gt=0)
    """Most tokens the judge may write. Required."""
    seed: int
    """Sampling seed of the judge's draws. Required."""


class JudgeOptions(ScorerOptions):
    """Options of the ``judge`` scorer: an LLM judges each completion. Every field is required, so the protocol
    names the judge in full and its hash changes when any part of the judge does."""

    mode: Literal["pointwise", "pairwise"]
    """``pointwise``: the judge rates one completion on ``scale``; ``pairwise``: it compares the completion with a
    baseline's of the same item, in both orders. Required."""
    judge: JudgeModel
    """The judging model. Required."""
    template: str
    """Judge prompt, Python ``str.format`` fields: ``{question}`` and ``{rubric}``; pointwise ``{answer}``,
    pairwise ``{answer_a}`` and ``{answer_b}``. Required."""
    rubric: str
    """What the judge is asked to weigh (put into ``{rubric}``). Required."""
    question_field: str
    """Item field holding the question shown to the judge. Required."""
    parse: str
    """Regular expression with one group reading the verdict (``\\[\\[(\\d+)\\]\\]`` for a rating,
    ``\\[\\[([ABC])\\]\\]`` for a pairwise verdict); every match must agree, else the verdict is unparseable.
    Required."""
    scale: list[int] | None
    """Pointwise: lowest and highest rating; the score is ``(rating - low) / (high - low)``. Pairwise: null."""
    verdicts: dict[str, Literal["A", "B", "tie"]] | None
    """Pairwise: what each parsed group means (``{"A": "A", "B": "B", "C": "tie"}``). Pointwise: null."""
    sampling: JudgeSampling
    """The judge's sampling. Required."""

    @field_validator("parse")
    @classmethod
    def _one_group(cls, v: str) -> str:
        try:
            groups = re.compile(v).groups
        except re.error as e:
            raise ValueError(f"parse is not a regular expression: {e}") from e
        if groups != 1:
            raise ValueError(f"parse must have exactly one group (it has {groups})")
        return v

    @model_validator(mode="after")
    def _mode_fields(self) -> JudgeOptions:
        if self.mode == "pointwise" and (self.scale is None or len(self.scale) != 2 or self.scale[0] >= self.scale[1]
                                         or self.verdicts):
            raise ValueError("a pointwise judge needs scale: [low, high] with low < high, and verdicts: null")
        if self.mode == "pairwise" and (not self.verdicts or self.scale is not None):
            raise ValueError("a pairwise judge needs verdicts (parsed group -> A, B or tie), and scale: null")
        fields = {"question", "rubric"} | ({"answer"} if self.mode == "pointwise" else {"answer_a", "answer_b"})
        missing = [f for f in sorted(fields) if "{" + f + "}" not in self.template]
        if missing:
            raise ValueError(f"template lacks the field(s) {', '.join('{' + f + '}' for f in missing)}")
        return self


@dataclass(frozen=True)
class Verdict:
    """One parsed judge output: ``value`` the rating (pointwise) or ``A``/``B``/``tie`` (pairwise), None when
    unparseable; ``text`` the judge's output; ``detail`` why it is unparseable."""

    value: float | str | None
    text: str
    detail: str | None = None


def parse_verdict(options: JudgeOptions, text: str) -> Verdict:
    """Read the judge's output with the protocol's parse rule.

    Every match of ``options.parse`` must give the same group; no match, disagreeing matches, a rating outside
    ``scale`` or a group ``verdicts`` does not name are unparseable (``value`` None, ``detail`` says which).
    """
    found = {m.group(1) for m in re.finditer(options.parse, text)}
    if not found:
        return Verdict(None, text, "no match of the parse rule")
    if len(found) > 1:
        return Verdict(None, text, f"the judge gave several verdicts: {sorted(found)}")
    (got,) = found
    if options.mode == "pairwise":
        assert options.verdicts is not None
        if got not in options.verdicts:
            return Verdict(None, text, f"verdict {got!r} is not one of {sorted(options.verdicts)}")
        return Verdict(options.verdicts[got], text)
    assert options.scale is not None
    try:
        rating = float(got)
    except ValueError:
        return Verdict(None, text, f"rating {got!r} is not a number")
    low, high = options.scale
    if not low <= rating <= high:
        return Verdict(None, text, f"rating {got} is outside the scale {low}-{high}")
    return Verdict(rating, text)


def render(options: JudgeOptions, question: str, answer: str | None = None, answer_a: str | None = None,
           answer_b: str | None = None) -> str:
    """The judge's user message: the template with the question, the rubric and the answer(s) put in."""
    fields = {"question": question, "rubric": options.rubric}
    if options.mode == "pointwise":
        fields["answer"] = answer or ""
    else:
        fields.update(answer_a=answer_a or "", answer_b=answer_b or "")
    return options.template.format(**fields)


def judge_identity(options: JudgeOptions) -> dict[str, Any]:
    """What identifies the judge in a run record: backend, checkpoint digest or served model id, the sha-free
    parts of the protocol that make it this judge (template, parse rule, sampling)."""
    return {"backend": options.judge.backend, "digest": options.judge.digest, "model": options.judge.model,
            "template": options.template, "rubric": options.rubric, "parse": options.parse,
            "sampling": options.sampling.model_dump()}


class Judge:
    """A judge model on an evalgate backend.

    Args:
        options: the ``judge`` scorer's options.
        backend: an evalgate ``Backend`` serving the judge model (``load_judge`` builds one from the options).
        chat: renders the judge's user message into the backend's prompt text (the judge's chat template).
    """

    def __init__(self, options: JudgeOptions, backend: Any, chat: Any) -> None:
        self.options = options
        self.backend = backend
        self.chat = chat

    def _generate(self, prompts: Sequence[tuple[str, str]]) -> dict[str, str]:
        """Judge outputs per key, all prompts sent at once (the backend batches)."""
        from evalgate.backends.base import EffectiveParams, GenerationRequest, sample_seed

        s = self.options.sampling
        params = EffectiveParams(s.temperature, 1.0, 0, s.max_tokens, (), 1.0)
        reqs = [GenerationRequest(key, self.chat(text), (0,), (sample_seed(s.seed, key, 0),), params)
                for key, text in prompts]
        return {r.request.key: r.completions[0].text for r in self.backend.generate(reqs)}

    def rate(self, questions: Sequence[str], answers: Sequence[str]) -> list[Verdict]:
        """Pointwise verdicts, one per (question, answer), in order."""
        keys = [(f"p{i}", render(self.options, q, answer=a)) for i, (q, a) in enumerate(zip(questions, answers,
                                                                                            strict=True))]
        out = self._generate(keys)
        return [parse_verdict(self.options, out[k]) for k, _ in keys]

    def compare(self, item_ids: Sequence[str], questions: Sequence[str], model: Sequence[str],
                baseline: Sequence[str]) -> tuple[list[PairJudgement], list[tuple[Verdict, Verdict]]]:
        """Pairwise verdicts in both orders (model as A, then baseline as A) for each item.

        Returns:
            (one ``PairJudgement`` per item, the two parsed verdicts per item).

        Raises:
            BadInput: the sequences differ in length.
        """
        if not len(item_ids) == len(questions) == len(model) == len(baseline):
            raise BadInput("pairwise judging needs one question, one model and one baseline completion per item")
        prompts = []
        for iid, q, m, b in zip(item_ids, questions, model, baseline, strict=True):
            prompts += [(f"{iid}:model_first", render(self.options, q, answer_a=m, answer_b=b)),
                        (f"{iid}:baseline_first", render(self.options, q, answer_a=b, answer_b=m))]
        out = self._generate(prompts)
        pairs, verdicts = [], []
        for iid, m, b in zip(item_ids, model, baseline, strict=True):
            v1 = parse_verdict(self.options, out[f"{iid}:model_first"])
            v2 = parse_verdict(self.options, out[f"{iid}:baseline_first"])
            pairs.append(PairJudgement(iid, _side(v1), _side(v2), len(m), len(b)))
            verdicts.append((v1, v2))
        return pairs, verdicts


def _side(v: Verdict) -> str | None:
    return v.value if isinstance(v.value, str) else None


def load_judge(options: JudgeOptions, backend_options: Any = None) -> Judge:
    """Build the judge from its options: resolve a local checkpoint and check its digest, construct the backend,
    and use the judge's own chat template.

    Raises:
        BadInput: the checkpoint's digest is not the pinned one (names both and says to update the protocol).
        MissingExtra: the backend's engine is not installed.
    """
    from evalgate.backends.base import get_backend
    from evalgate.checkpoints.model import load_tokenizer
    from evalgate.checkpoints.resolve import resolve_checkpoint

    spec = options.judge
    if spec.backend == "openai":
        raise BadInput("a served (openai) judge is not wired yet: use a local hf or vllm judge (docs/RLHF.md)")
    assert spec.checkpoint is not None
    ckpt = resolve_checkpoint(spec.checkpoint)
    if ckpt.digest != spec.digest:
        raise BadInput(f"judge checkpoint {spec.checkpoint} has digest {ckpt.digest}, the protocol pins "
                       f"{spec.digest}; a different judge would change every verdict: pin the new digest in the "
                       "protocol's scorer.options.judge.digest (a new protocol version)")
    tok = load_tokenizer(ckpt.model_dir)

    def chat(text: str) -> str:
        return str(tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                           add_generation_prompt=True))

    return Judge(options, get_backend(spec.backend, str(ckpt.model_dir), backend_options, tokenizer=tok), chat)
