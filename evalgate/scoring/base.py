"""The scorer contract and registry (``SCORERS``, an ``evalgate.core.registry.Registry``).

A scorer judges a batch of samples at once (so code execution can run in parallel) and returns, per sample, a
``ScoreResult``: score in [0, 1], a status saying why (``correct``, ``wrong``, ``truncated``, ``no_answer``,
``timeout``, ``error``), the extracted answer and a short detail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import Field

from evalgate.core.registry import Registry
from evalgate.scoring.options import ScorerOptions


@dataclass(frozen=True)
class SampleToScore:
    """One completion to judge.

    Attributes:
        item: the split item (gold answer, tests, ...).
        text: the completion text as generated (stop sequence excluded).
        response_prefix: rendered start of the assistant turn that the completion continues ("" if none).
        finish_reason: ``stop`` or ``length``.
        key: the run's sample key (item_id, sample_index, seed); None outside a run.
    """

    item: dict[str, Any]
    text: str
    response_prefix: str
    finish_reason: str
    key: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class ScoreResult:
    """Judgement of one sample: score in [0, 1], status (one of ``STATUSES``), extracted answer, detail."""

    score: float
    status: str
    extracted: str | None = None
    detail: str | None = None


class Scorer(Protocol):
    """Judges samples. Constructed as ``Scorer(protocol, options)`` with the protocol (``LoadedProtocol``: sampling,
    extraction, execution limits) and its ``scorer.options`` validated into the scorer's options model at load
    (``LoadedProtocol.scorer_options``).

    A scorer class may define ``check_protocol(spec, options)`` (a staticmethod) raising
    ``userfiles.FieldProblem(field, message)``, ``field`` a dotted path in the protocol file, for a protocol it
    cannot score (the math scorer: a stop sequence that can cut a number). ``load_protocol`` calls it, so
    ``protocol freeze`` refuses such a protocol with its file and line, not only ``run``.

    ``required_fields``: the item fields it reads; a run checks every item for them when the split is read,
    before any generation. A scorer may also define ``item_problem(item) -> str | None``, saying why an item that
    has those fields still cannot be scored (``AnswerScorer``: a gold answer that is a whole GSM8K solution); the
    run refuses the split with it at the same point.

    Two optional hooks, for a scorer that needs the run around it (the judge, the reward scorers): ``begin(plan,
    samples)``, called by the run once before scoring with every sample to score (the run's ``RunPlan``: store,
    access log, split, checkpoint); ``before_read(protocol, store, manifest, checkpoint_digest, seed)``, called
    before the split is read, raising ``BadInput`` for what ``begin`` would refuse and can know already (the
    judge: an unset judge path, a pairwise baseline never run), so no read is logged and nothing generated first.
    A scorer's own run metrics are its registry entry's ``metrics`` function (``ScorerEntry.metrics``), the one
    way for any scorer.
    """

    name: str

    @property
    def required_fields(self) -> tuple[str, ...]: ...

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]: ...


class AnswerScorer:
    """The loop shared by scorers that compare one extracted answer with a gold answer field.

    Per sample: finish_reason ``length`` -> ``truncated`` (score 0, never scored from a cut-off completion)
    unless ``score_truncated``; no answer under the extraction rule -> ``no_answer``; else ``judge`` decides
    ``correct`` or ``wrong``. Subclasses set ``answer_field``, ``rule``, ``score_truncated`` and
    ``include_prefix`` (extract from response prefix + completion, or the completion alone) and implement
    ``judge``.
    """

    name = ""
    answer_field = "answer"
    rule = "raw"
    score_truncated = False
    include_prefix = False

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The gold answer's field."""
        return (self.answer_field,)

    def item_problem(self, item: dict[str, Any]) -> str | None:
        """Why ``item``'s gold answer cannot be compared with an extracted answer, or None.

        A gold that holds GSM8K's ``#### N`` is the dataset's worked solution, not its answer (``splits add`` of
        GSM8K's own file keeps it whole): every completion would be scored wrong against the whole text, silently.
        """
        gold = str(item[self.answer_field])
        if "####" not in gold:
            return None
        return (f"its gold answer {self.answer_field!r} is a worked solution ending in '#### N' (GSM8K's format: "
                f"...{gold[-30:]!r}), not the answer, so every completion would be scored wrong; import GSM8K-format "
                "data with 'evalgate splits import gsm8k --from FILE' or 'evalgate splits add ... --gold gsm8k' "
                "(their gold is the number after '####'), or "
                "add a field holding the final answer alone and name it in the protocol's "
                "scorer.options.answer_field")

    def judge(self, prediction: str, gold: str, text: str) -> tuple[bool, list[str]]:
        """(equal, notes) for one extracted prediction; ``text`` is what the answer was extracted from."""
        raise NotImplementedError

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Judge each sample (see the class docstring); results in input order."""
        from evalgate.scoring.extract import extract_answer

        out = []
        for s in samples:
            if s.finish_reason == "length" and not self.score_truncated:
                out.append(ScoreResult(0.0, "truncated", None, "finish_reason length: cut off at max_tokens"))
                continue
            text = s.response_prefix + s.text if self.include_prefix else s.text
            pred = extract_answer(text, self.rule)
            if pred is None:
                out.append(ScoreResult(0.0, "no_answer", None, f"rule {self.rule} found no answer"))
                continue
            gold = str(s.item[self.answer_field])
            ok, notes = self.judge(pred, gold, text)
            notes = notes if ok else [f"expected {gold!r}", *notes]
            out.append(ScoreResult(1.0 if ok else 0.0, "correct" if ok else "wrong", pred,
                                   "; ".join(notes) or None))
        return out


class AnswerOptions(ScorerOptions):
    """Options of a scorer that compares one extracted answer with a gold answer field."""

    answer_field: str = "answer"
    """Item field holding the gold answer. Default: ``answer``."""


class ExactOptions(AnswerOptions):
    """Options of the ``exact`` scorer: which normalisation steps apply to both sides (NFKC and whitespace always
    do)."""

    case: bool = True
    """Lower-case both sides. Default: true."""
    punctuation: bool = True
    """Remove ASCII and unicode punctuation (``U.S.A.`` -> ``usa``). Default: true."""
    articles: bool = True
    """Remove the articles a / an / the as whole words. Default: true."""


class MathOptions(AnswerOptions):
    """Options of the ``math`` scorer, which compares the answer taken by ``extraction.rule`` (gsm8k, boxed,
    last_number or raw) with the gold answer by mathematical equality (``math_equal``)."""


class HumanEvalOptions(ScorerOptions):
    """Options of the ``humaneval`` scorer: none (its limits are the protocol's ``execution`` section and its
    network permission ``tools.network``)."""


class RefusalOptions(ScorerOptions):
    """Options of the ``refusal`` scorer: which behaviour is expected, and the phrases that mark a refusal (XSTest's
    string match, Röttger et al. 2024; ``scoring.refusal``)."""

    expect: Literal["refuse", "comply"]
    """``refuse``: prompts that should be refused (score 1 when refused); ``comply``: benign prompts that should be
    answered (score 1 when not refused). Required."""
    markers: list[str] = Field(min_length=1)
    """A completion starting with one of these is a refusal, both compared as ``refusal.refusal_text`` writes them
    (NFKC, zero-width and other characters drawn as nothing removed, blank-drawn letters as spaces, look-alike
    letters of other scripts as the Latin ones, typographic quotes and apostrophes made ASCII, white space
    collapsed, lower-cased), the
    completion from its first letter or digit (leading quotes, markdown, bullets and emoji skipped). Required."""
    contains: list[str] = []
    """A completion containing one of these anywhere (compared as for ``markers``) is a refusal. Default: none."""
    wordless: Literal["complied", "wrong"] = "complied"
    """A completion with no letter in any script (empty, white space, digits, punctuation, symbols, emoji:
    ``1234567890``) neither refuses nor answers. ``complied``: it is not a refusal, as XSTest's string match reads
    it (the shipped protocols score as XSTest does); ``wrong``: scored 0 whatever ``expect`` says (status
    ``no_answer``), so a policy that stops answering in words cannot pass an over-refusal guard (docs/SCORING.md,
    "XSTest"). Default: complied."""


class IFEvalOptions(ScorerOptions):
    """Options of the ``ifeval`` scorer (IFEval's instruction checkers, Zhou et al. 2023; ``scoring.ifeval``)."""

    score: Literal["strict", "loose"] = "strict"
    """Which criterion makes a sample's score (so pass@1 is that prompt-level accuracy): ``strict``, the response as
    written follows every instruction; ``loose``, some variant of it does (first or last line dropped, ``*``
    removed). Both are in the run's ``metrics.ifeval`` whichever is chosen. Default: strict."""


class MultipleChoiceOptions(ScorerOptions):
    """Options of the ``multiple_choice`` scorer (log-likelihood of each option after the prompt)."""

    choices_field: str = "options"
    """Item field holding the options, a list of strings in order. Default: ``options``."""
    gold_field: str = "answer_index"
    """Item field holding the correct option's 0-based index (an integer). Default: ``answer_index``."""
    target_delimiter: str = " "
    """Text put between the prompt and each option (lm-evaluation-harness's ``target_delimiter``). Default: one
    space."""
    metric: Literal["acc", "acc_norm"] = "acc"
    """Which choice scores a sample (and so ``pass@1`` and ``mean_score``): ``acc``, the highest summed
    log-likelihood; ``acc_norm``, the highest log-likelihood per character of the option. The run reports both.
    Default: acc."""


ANSWER_STATUSES = ("correct", "wrong", "truncated", "no_answer")
"""The statuses ``AnswerScorer`` gives."""
REWARD_STATUSES = ("scored", "error")
"""The ``reward_model`` scorer's statuses: ``scored`` (score = sigmoid(reward)), ``error`` (input too long)."""
PREFERENCE_STATUSES = ("correct", "wrong", "error")
"""The ``reward_preference`` scorer's statuses."""


@dataclass(frozen=True)
class ScorerEntry:
    """One registered scorer and its capabilities.

    Attributes:
        options: its options model (``scorer.options`` is validated into it at load), or ``"module:Class"``
            imported when a protocol names the scorer (``options_model()``; the judge's and the reward models'
            live in ``rlhf``, above this package).
        scorer: its class, or ``"module:Class"`` imported only when the scorer is used (so a protocol is checked
            without importing the scorers' dependencies: math-verify, the sandbox); called as
            ``cls(protocol, options)``.
        statuses: every status it can give (``ScoreResult.status``); ``STATUSES`` is their union.
        runs_code: it runs model-written code; the run record then keeps the scorer's ``sandbox`` attribute (the
            isolation layers the programs ran with, ``evalgate.core.sandbox.describe``).
        generates: False: the run generates nothing and the scorer judges each item itself (a preference pair
            scored by the run's checkpoint); every sample's completion is then empty.
        pass_at_k: its ``correct`` status means a solved item, so the run reports pass@k; False: ``mean_score``
            only (a reward model's score, a judge's rating have no "solved"). True needs ``correct`` among
            ``statuses``: without it every pass@k would be 0.
        gate_metrics: metrics of ``scoring.metrics.METRICS`` beyond ``pass@k`` and ``mean_score`` whose per-item
            value its samples give (the ifeval scorer's prompt-level accuracies); ``produces()`` is the whole
            list a gate policy's ``metric`` may name.
        proxy: its score stands in for human preference (a reward model, a judge): the gate's
            ``min_proxy_agreement`` rule then asks for its agreement with raters on the human-audit tier.
        request: what the run asks the engine for (``backends.base.REQUESTS``): ``generate`` (completions) or
            ``loglikelihood`` (each option's log-likelihood after the prompt, the sample's text then holds them; a
            backend without ``loglikelihood`` refuses the protocol before any read; no behaviour metrics).
        metrics: ``"module:function"`` giving the scorer's own run metrics, ``function(per_item, items, options,
            scorer)`` with the scored samples by item id (their final rows, after any change the run made, such as
            an agentic run's ``tool_violation``), the split's items by id, the scorer's options and the scorer
            instance that judged them (what it saw beyond the sample rows: the judge's calls through the cache and
            the baseline's completions); None: none. ``runner.score.compute_metrics`` is its one caller.
    """

    options: type[ScorerOptions] | str
    scorer: Callable[..., Scorer] | str
    statuses: tuple[str, ...] = ANSWER_STATUSES
    runs_code: bool = False
    generates: bool = True
    pass_at_k: bool = True
    proxy: bool = False
    request: str = "generate"
    metrics: str | None = None
    gate_metrics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.pass_at_k and "correct" not in self.statuses:
            raise ValueError(f"a scorer with pass_at_k gives the status 'correct' (its statuses are "
                             f"{', '.join(self.statuses)}); without it every pass@k is 0: set pass_at_k=False")

    def produces(self) -> tuple[str, ...]:
        """The metrics (``METRICS`` names, the family as ``pass@k``) that vary with its samples: ``pass@k`` when
        ``pass_at_k``, ``mean_score`` always, then ``gate_metrics``. A gate refuses any other metric before any
        read (``gate.reads.check_protocol``)."""
        return (*(("pass@k",) if self.pass_at_k else ()), "mean_score", *self.gate_metrics)

    def options_model(self) -> type[ScorerOptions]:
        """The options model, imported if registered as ``"module:Class"``."""
        from evalgate.core.registry import load_reference

        return load_reference(self.options) if isinstance(self.options, str) else self.options

    def load(self) -> Callable[..., Scorer]:
        """The scorer's class, imported if registered as ``"module:Class"``."""
        from evalgate.core.registry import load_reference

        return load_reference(self.scorer) if isinstance(self.scorer, str) else self.scorer


SCORERS: Registry[ScorerEntry] = Registry("scorer", ScorerEntry, entry_point_group="evalgate.scorers")
"""Scorers by the protocol's ``scorer.name``; plugins through the ``evalgate.scorers`` entry-point group (each names
a ``ScorerEntry``)."""

SCORERS.register("humaneval", ScorerEntry(HumanEvalOptions, "evalgate.scoring.code:HumanEvalScorer",
                                          statuses=(*ANSWER_STATUSES, "timeout", "error"), runs_code=True))
SCORERS.register("exact", ScorerEntry(ExactOptions, "evalgate.scoring.exact:ExactScorer"))
SCORERS.register("math", ScorerEntry(MathOptions, "evalgate.scoring.math:MathScorer"))
SCORERS.register("refusal", ScorerEntry(RefusalOptions, "evalgate.scoring.refusal:RefusalScorer",
                                        statuses=("correct", "wrong", "no_answer")))
SCORERS.register("ifeval", ScorerEntry(IFEvalOptions, "evalgate.scoring.ifeval:IFEvalScorer",
                                      metrics="evalgate.scoring.ifeval:ifeval_metrics",
                                      gate_metrics=("ifeval_prompt_strict", "ifeval_prompt_loose")))
SCORERS.register("judge", ScorerEntry("evalgate.rlhf.judge_options:JudgeOptions",
                                      "evalgate.rlhf.judge:JudgeScorer",
                                      statuses=("judged", "judge_unparseable", "truncated"), pass_at_k=False,
                                      proxy=True,
                                      metrics="evalgate.rlhf.judge:judge_metrics"))
SCORERS.register("reward_model", ScorerEntry("evalgate.rlhf.reward_options:RewardModelOptions",
                                             "evalgate.rlhf.reward:RewardModelScorer",
                                             statuses=REWARD_STATUSES, pass_at_k=False, proxy=True,
                                             metrics="evalgate.rlhf.reward:reward_metrics"))
SCORERS.register("multiple_choice", ScorerEntry(MultipleChoiceOptions,
                                                "evalgate.scoring.loglikelihood:MultipleChoiceScorer",
                                                statuses=("correct", "wrong"), request="loglikelihood",
                                                metrics="evalgate.scoring.loglikelihood:mc_metrics"))
SCORERS.register("reward_preference", ScorerEntry("evalgate.rlhf.reward_options:PreferenceOptions",
                                                  "evalgate.rlhf.reward:PreferenceScorer",
                                                  statuses=PREFERENCE_STATUSES, generates=False,
                                                  metrics="evalgate.rlhf.preference:preference_metrics"))
SCORERS.register("judge_preference", ScorerEntry("evalgate.rlhf.judge_preference_options:JudgePreferenceOptions",
                                                 "evalgate.rlhf.judge_preference:JudgePreferenceScorer",
                                                 statuses=("correct", "wrong", "tie", "judge_unparseable"),
                                                 generates=False, pass_at_k=False,
                                                 metrics="evalgate.rlhf.judge_preference:judge_preference_metrics"))
SCORERS.register("dpo_preference", ScorerEntry("evalgate.rlhf.reward_options:ImplicitRewardOptions",
                                               "evalgate.rlhf.implicit_reward:ImplicitRewardScorer",
                                               statuses=PREFERENCE_STATUSES, request="loglikelihood",
                                               metrics="evalgate.rlhf.preference:preference_metrics"))


def require_one_sample(spec: Any, scorer: str, why: str, no_stop: bool = False) -> None:
    """The protocol check of a scorer that generates nothing (it scores log-likelihoods, or text it is given): one
    sample per item and, with ``no_stop``, no stop sequences.

    Args:
        spec: the protocol (``ProtocolSpec``). scorer: its scorer's name. why: what the scorer does instead of
            sampling, as the message says it (``samples nothing (...)``, ``generates nothing``).

    Raises:
        FieldProblem: ``sampling.n`` other than 1; a stop sequence when ``no_stop``.
    """
    from evalgate.core.userfiles import FieldProblem

    if spec.sampling.n != 1:
        raise FieldProblem("sampling.n", f"the {scorer} scorer {why}: set sampling.n: 1")
    if no_stop and spec.sampling.stop:
        raise FieldProblem("sampling.stop", f"the {scorer} scorer generates nothing: remove the stop sequences")


def scorer_request(name: str) -> str:
    """What a protocol whose scorer is ``name`` asks the engine for (``ScorerEntry.request``: ``generate`` or
    ``loglikelihood``), part of its runs' generation settings; an unknown scorer: ``generate``."""
    return SCORERS[name].request if name in SCORERS else "generate"


def score_statuses() -> tuple[str, ...]:
    """Every status a registered scorer can give (plugins' included): the union of the entries' ``statuses``, in
    registration order."""
    return tuple(dict.fromkeys(s for name in SCORERS.names(sort=False) for s in SCORERS[name].statuses))


STATUSES = tuple(dict.fromkeys(s for entry in SCORERS.builtins() for s in entry.statuses))
"""The built-in scorers' statuses: correct, wrong, truncated, no_answer, timeout, error, judged, judge_unparseable,
scored, tie (``score_statuses()`` adds plugins')."""


def get_scorer(protocol: Any) -> Scorer:
    """The scorer named by ``protocol.spec.scorer.name``, constructed with the options validated at load
    (``protocol.scorer_options``).

    Raises:
        BadInput: unknown scorer name (lists the known ones), or a protocol the scorer refuses.
    """
    entry = SCORERS.require(protocol.spec.scorer.name, f" in protocol {protocol.path}")
    return entry.load()(protocol, protocol.scorer_options)
