"""LLM judge as a scorer: a model judges completions, pointwise (a rubric and a scale) or pairwise (against a
baseline's stored completions of the same items, in both orders).

The judge is part of the protocol: its identity (a local checkpoint's digest, or a served model id), its prompt
template, its sampling and its parse rule are the options of the ``judge`` scorer (``scoring.judge_options``), all
required, so the protocol's hash changes whenever any of them does. Judge prompts follow MT-Bench's single-answer
grading and pairwise templates (Zheng et al. 2023, "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena",
appendix; verdicts written ``[[A]]``, ``[[B]]``, ``[[C]]`` for a tie, ratings ``[[5]]``); the template text is the
protocol's own.

Inside ``evalgate run`` the judge's calls go through the generation cache (``scoring.judge_calls``), its read of the
split is logged (outcome ``judge-read``, before it sees anything), and a verdict the parse rule cannot read is the
sample status ``judge_unparseable`` (score 0, counted; never a tie): the rates count it, pairwise as a loss,
pointwise as the scale's minimum, with the unparseable count beside each rate. Pairwise statistics are
``rlhf.pairwise``'s: ties half, position-flip rate, win rate with a paired bootstrap CI, length-controlled win rate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalgate.core.errors import BadInput, EvalgateError
from evalgate.core.text import as_read
from evalgate.core.userfiles import FieldProblem
from evalgate.rlhf.judge_calls import JudgeCalls, JudgePrompt, judge_path
from evalgate.rlhf.judge_options import JudgeBaseline, JudgeModel, JudgeOptions, JudgeSampling
from evalgate.rlhf.pairwise import PairJudgement, item_preference, per_item_table, win_rate
from evalgate.scoring.base import SampleToScore, ScoreResult
from evalgate.store.rows import RunRow

__all__ = ["JudgeBaseline", "JudgeModel", "JudgeOptions", "JudgeSampling", "JudgeScorer", "Verdict",
           "baseline_texts", "judge_metrics", "parse_verdict", "render"]

JUDGED, UNPARSEABLE, TRUNCATED = "judged", "judge_unparseable", "truncated"
JUDGE_STATUSES = (JUDGED, UNPARSEABLE, TRUNCATED)
"""The statuses the judge scorer gives: a verdict read, one the parse rule cannot read, a truncated completion (not
judged unless the protocol's ``extraction.score_truncated``)."""


@dataclass(frozen=True)
class Verdict:
    """One parsed judge output: ``value`` the rating (pointwise) or ``A``/``B``/``tie`` (pairwise), None when
    unparseable; ``text`` the judge's output; ``detail`` why it is unparseable."""

    value: float | str | None
    text: str
    detail: str | None = None
    weight: int = 1


def parse_verdict(options: JudgeOptions, text: str, shown: Sequence[str] = ()) -> Verdict:
    """Read the judge's output with the protocol's parse rule.

    A match whose whole text (``[[10]]``, ``Rating: 7``) also stands in an answer the judge was shown (``shown``:
    the completion, and pairwise the baseline's) is an echo of that answer and never the judge's verdict: the
    reference parsers take the first match (FastChat's MT-Bench judge: ``re.search`` of ``[[rating]]``, and for a
    pairwise verdict whichever of ``[[A]]``, ``[[B]]``, ``[[C]]`` is in the output) or the grade on the output's last
    line (inspect_ai's ``model_graded_qa``: ``GRADE: X`` anchored at the end), and each reads a token the judge
    copied from the answer as a verdict, so a completion that writes ``[[10]]`` rates itself when the judge quotes
    it. Such matches are left out; every remaining match must give the same group; no match (or only echoes),
    disagreeing matches, a rating outside ``scale`` or a group ``verdicts`` does not name are unparseable (``value``
    None, ``detail`` says which). A verdict the answer also holds cannot be told from a copy, so it is not read
    either: that sample is unparseable (score 0), which is what an injected verdict earns. A near-echo is an echo:
    the answer holds the match's text up to white space and case around its value, with a value equal as a number
    (``[[10]]``, ``[[ 10 ]]``, ``[[10.0]]``, ``[[1e1]]`` all echo one another; ``_echoed``), and the answer is
    compared as it reads too (NFKC, zero-width characters removed, look-alike letters of other scripts as the Latin
    ones: ``[[\u200b10]]`` and ``［［１０］］`` show as ``[[10]]``, a Cyrillic ``[[А]]`` as ``[[A]]``, which a judge
    copies as such).
    """
    matches = list(re.finditer(options.parse, text))
    echoes = sorted({m.group(0) for m in matches if m.group(0) and _echoed(m, shown)})
    found = {m.group(1) for m in matches if m.group(0) not in echoes}
    if not found:
        return Verdict(None, text, f"the judge's only verdict token(s) {echoes} also stand in the answer it judged: "
                                   "an echo of the answer is never read as its verdict" if echoes
                       else "no match of the parse rule")
    if len(found) > 1:
        return Verdict(None, text, f"the judge gave several verdicts: {sorted(found)}")
    (got,) = found
    if options.mode == "pairwise":
        assert options.verdicts is not None
        if got not in options.verdicts:
            return Verdict(None, text, f"verdict {got!r} is not one of {sorted(options.verdicts)}")
        return Verdict(options.verdicts[got], text, weight=(options.verdict_weights or {}).get(got, 1))
    assert options.scale is not None
    try:
        rating = float(got)
    except ValueError:
        return Verdict(None, text, f"rating {got!r} is not a number")
    low, high = options.scale
    if not low <= rating <= high:
        return Verdict(None, text, f"rating {got} is outside the scale {low}-{high}")
    return Verdict(rating, text)


_VALUE = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|\w+"


def _echoed(m: re.Match[str], shown: Sequence[str]) -> bool:
    """Whether the parse rule's match ``m`` in the judge's output stands in an answer shown to the judge: its whole
    text, or the text around its value (white space and case aside) with a value equal to it (numbers compared as
    numbers, words case-blind)."""
    whole = m.group(0)
    seen = [*shown, *(_as_read(a) for a in shown)]
    if any(whole in a or _as_read(whole) in a for a in seen):
        return True
    if m.group(1) is None or not shown:
        return False
    pre, post = whole[:m.start(1) - m.start(0)].strip(), whole[m.end(1) - m.start(0):].strip()
    loose = re.compile(rf"{re.escape(pre)}\s*({_VALUE})\s*{re.escape(post)}", re.I)
    return any(_same_value(x.group(1), m.group(1)) for a in seen for x in loose.finditer(a))


def _as_read(text: str) -> str:
    """``text`` as a reader sees it (``core.text.as_read``: NFKC, Unicode Cf removed, look-alike letters of other
    scripts as the Latin ones), so an answer that hides its own verdict token from a code-point comparison, with
    ``[[\u200b10]]``, ``［［１０］］`` or a Cyrillic ``[[А]]``, is still its echo's source."""
    return as_read(text)


def _same_value(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()
    return x == y


def render(options: JudgeOptions, question: str, answer: str | None = None, answer_a: str | None = None,
           answer_b: str | None = None, reference: str | None = None) -> str:
    """The judge's user message: the template with the question, the rubric, the answer(s) and, with
    ``reference_field``, the item's reference answer put in."""
    fields = {"question": question, "rubric": options.rubric}
    if options.reference_field:
        fields["reference"] = reference or ""
    if options.mode == "pointwise":
        fields["answer"] = answer or ""
    else:
        fields.update(answer_a=answer_a or "", answer_b=answer_b or "")
    return options.template.format(**fields)



def open_judge_calls(options: JudgeOptions, plan: Any) -> tuple[JudgeCalls, bool]:
    """The run's judge calls (through its generation cache; a sealed tier's judge prompts keyed by HMAC, as its
    prompts are) and whether the tier is sealed (private or human-audit)."""
    from evalgate.keys.sealing import sealer_for

    seal = sealer_for(plan.manifest.tier, plan.store.env)
    return JudgeCalls(options, plan.protocol.path, plan.store, plan.run_id, seal.digest if seal else None), \
        seal is not None


def log_judge_read(plan: Any, calls: JudgeCalls, prompts: Mapping[Any, Sequence[JudgePrompt]], shown: str) -> None:
    """Look every judge call of the run up in the cache and log the judge's read of the split
    (``SplitManager.log_judge_read``) before the judge sees anything; ``shown`` says what it is shown."""
    every = [p for ps in prompts.values() for p in ps]
    missing = calls.lookup(every)
    plan.access.log_judge_read(plan.manifest, plan.actor, plan.options.purpose, missing == 0,
                               plan.checkpoint.digest, plan.protocol.sha256, plan.run_id,
                               f"judge {calls.ident} ({calls.options.judge.backend}) shown {shown}: {len(every)} "
                               f"calls, {missing} not cached")


def judge_pair(options: JudgeOptions, calls: JudgeCalls, prompts: Sequence[JudgePrompt], shown: tuple[str, str],
               item_id: str, first_len: int, second_len: int) -> tuple[PairJudgement, Verdict | None]:
    """One pair judged in both orders: each order's output read with the parse rule (``shown``: the two answers,
    whose echoes are never verdicts), as a ``PairJudgement`` (the first answer is the "model" side; lengths in
    characters; each verdict's weight), and the first unreadable verdict (None when both were read)."""
    first, second = (parse_verdict(options, calls.outputs[p.sha256], shown) for p in prompts)
    pair = PairJudgement(item_id, _side(first), _side(second), first_len, second_len, first.weight, second.weight)
    return pair, next((v for v in (first, second) if v.value is None), None)


def _key(s: SampleToScore) -> tuple[str, int, int]:
    if s.key is None:
        raise EvalgateError("the judge scorer needs each sample's run key (SampleToScore.key): it runs inside a run")
    return s.key


def _side(v: Verdict) -> str | None:
    return v.value if isinstance(v.value, str) else None


def _baseline_run(store: Any, baseline: JudgeBaseline, manifest: Any, protocol: Any, seed: int) -> RunRow:
    """The stored run whose completions are the baseline (see ``JudgeBaseline``) on ``manifest``'s content, under
    ``protocol`` (a ``LoadedProtocol``), the one of sampling seed ``seed`` where there are several.

    Raises:
        BadInput: no such complete run on this split's content (says what to run first).
    """
    split, content = manifest.name, manifest.content_sha256
    if baseline.run_id is not None:
        rows = store.runs(run_id=baseline.run_id)
        if not rows or rows[0].status != "complete" or rows[0].split_sha256 != content:
            found = "not found" if not rows else (f"{rows[0].status} on split {rows[0].split}"
                                                  f" (content {str(rows[0].split_sha256)[:12]})")
            raise BadInput(f"judge baseline run {baseline.run_id} is {found}; a pairwise judge needs a complete run "
                           f"on split {split}'s content ({content[:12]}): set scorer.options.baseline.run_id to one")
        return rows[0]
    rows = store.runs(checkpoint_digest=baseline.checkpoint, protocol_hash=protocol.sha256,
                      split_sha256=content, status="complete")
    if not rows:
        raise BadInput(f"no complete run of the judge's baseline checkpoint {baseline.checkpoint} under protocol "
                       f"{protocol.ref} on split {split}: run the baseline first (evalgate run --protocol "
                       f"{protocol.path} --checkpoint <baseline> --split {split})")
    same_seed = [r for r in rows if r.sampling_seed == seed]
    return (same_seed or rows)[-1]


def baseline_texts(plan: Any, samples: Sequence[SampleToScore], baseline: JudgeBaseline) -> dict[Any, str]:
    """The baseline's completion for each sample key of ``samples``: its sample of the same item and sample index,
    reasoning removed as the run's own are (``scoring.reasoning``). A baseline that is the run's own checkpoint
    is the run's own completions (the baseline's run under this protocol compares it with itself: 0.5 for a
    judge without position bias).

    Raises:
        BadInput: no baseline run (``_baseline_run``), or it lacks completions of some items.
    """
    from evalgate.backends.base import sample_seed
    from evalgate.scoring.reasoning import prompt_opens, strip_reasoning

    if baseline.checkpoint == plan.checkpoint.digest:
        return {s.key: s.text for s in samples}
    store = plan.store
    row = _baseline_run(store, baseline, plan.manifest, plan.protocol, plan.seed)
    prompts = {r.item_id: r for r in store.run_prompts(row.run_id)}
    keys = [_key(s) for s in samples]
    want = {(iid, j, sample_seed(row.sampling_seed, iid, j)): (iid, j, seed) for iid, j, seed in keys}
    have = [k for k in want if k[0] in prompts]
    got = store.cached_generations(row.checkpoint_digest, row.protocol_hash, have,
                                   {k[0]: prompts[k[0]].prompt_sha256 for k in have}, row.settings_sha256 or "")
    lacking = sorted(want[k][0] for k in want if k not in got)
    if lacking:
        raise BadInput(f"judge baseline run {row.run_id} holds no completion of {len(lacking)} item(s) of this "
                       f"run ({', '.join(lacking[:3])}{' ...' if len(lacking) > 3 else ''}); run the baseline on "
                       f"the same split with sampling.n >= this protocol's")
    formats = plan.protocol.spec.reasoning.strip
    return {want[k]: strip_reasoning(g["text"], formats, prompt_opens(prompts[k[0]].text, formats)).answer
            for k, g in got.items()}


class JudgeScorer:
    """The ``judge`` scorer: pointwise, a rating on the protocol's scale as the score ``(rating - low) / (high -
    low)``; pairwise, the item's preference for the model over the baseline (``rlhf.pairwise.item_preference``:
    the mean of both orders, ties half). Status ``judged``, or ``judge_unparseable`` (score 0) when the parse rule
    cannot read a verdict (pairwise: either order's), or ``truncated`` (not judged) for a completion cut at
    max_tokens unless the protocol's ``extraction.score_truncated``.

    Runs inside ``evalgate run`` only: the run calls ``begin(plan, samples)`` before scoring (the judge's prompts are
    rendered, looked up in the cache, the baseline read and the judge's read logged), then ``score`` per chunk
    (missing calls generated); its run metrics are ``judge_metrics`` (the registry's ``metrics`` function).
    """

    name = "judge"

    def __init__(self, protocol: Any, options: JudgeOptions) -> None:
        self.protocol, self.options = protocol, options
        self._calls: JudgeCalls | None = None
        self._prompts: dict[Any, tuple[JudgePrompt, ...]] = {}
        self._baseline: dict[Any, str] = {}
        self._pairs: dict[Any, PairJudgement] = {}
        self._ratings: list[float] = []
        """Pointwise: every judged sample's rating, an unparseable one at the scale's minimum."""
        self._unparseable = 0
        self._private = False

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The item fields shown to the judge: the question, and the reference answer with ``reference_field``."""
        o = self.options
        return (o.question_field, *([o.reference_field] if o.reference_field else []))

    @staticmethod
    def check_protocol(spec: Any, options: JudgeOptions) -> None:
        """A pairwise judge compares one completion per item (its bootstrap is over items).

        Raises:
            FieldProblem: pairwise with ``sampling.n`` other than 1.
        """
        if options.mode == "pairwise" and spec.sampling.n != 1:
            raise FieldProblem("sampling.n", f"a pairwise judge compares one completion per item with the baseline's "
                                             f"(its CI is over items); set n: 1 (it is {spec.sampling.n})")

    def _judged(self, s: SampleToScore) -> bool:
        return s.finish_reason != "length" or self.protocol.spec.extraction.score_truncated

    def _user_texts(self, s: SampleToScore) -> list[str]:
        q, o = str(s.item[self.options.question_field]), self.options
        ref = str(s.item[o.reference_field]) if o.reference_field else None
        if o.mode == "pointwise":
            return [render(o, q, answer=s.text, reference=ref)]
        b = self._baseline[s.key]
        return [render(o, q, answer_a=s.text, answer_b=b, reference=ref),
                render(o, q, answer_a=b, answer_b=s.text, reference=ref)]

    def before_read(self, protocol: Any, store: Any, manifest: Any, checkpoint_digest: str, seed: int) -> None:
        """Refuse, before the split is read and anything generated, what ``begin`` would refuse for a reason known
        already: a judge checkpoint path naming an unset environment variable, and (pairwise) a checkpoint baseline
        with no complete run on this split's content (or a ``run_id`` baseline that is not one).

        Raises:
            BadInput: as ``judge_path`` and ``_baseline_run``, naming what to set or run first.
        """
        judge_path(self.options, protocol.path)
        b = self.options.baseline
        if self.options.mode == "pairwise" and b is not None and b.checkpoint != checkpoint_digest:
            _baseline_run(store, b, manifest, protocol, seed)

    def begin(self, plan: Any, samples: Sequence[SampleToScore]) -> None:
        """Prepare the run's judging: read the baseline (pairwise), render every judge call, look them up in the
        cache and log the judge's read of the split (``SplitManager.log_judge_read``), before the judge sees
        anything.

        Raises:
            BadInput: the baseline is missing (pairwise), the judge checkpoint is missing or not the pinned one.
        """
        calls, self._private = open_judge_calls(self.options, plan)  # private: no per-item table in the metrics
        self._calls = calls
        judged = [s for s in samples if self._judged(s)]
        if self.options.mode == "pairwise" and judged:
            assert self.options.baseline is not None
            self._baseline = baseline_texts(plan, judged, self.options.baseline)
        self._prompts = {s.key: tuple(calls.prompt(t) for t in self._user_texts(s)) for s in judged}
        log_judge_read(plan, calls, self._prompts, f"{len(judged)} completions")

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Judge ``samples`` (asking the judge only what the cache lacks); results in input order.

        Raises:
            EvalgateError: called outside a run (no ``begin``).
            EngineError, MissingExtra: the judge's backend failed or is not installed.
        """
        if self._calls is None:
            raise EvalgateError("the judge scorer runs inside evalgate run (it needs the run's store, generation "
                                "cache and access log): call begin(plan, samples) first")
        self._calls.ask([p for s in samples for p in self._prompts.get(s.key, ())])
        return [self._result(s) for s in samples]

    def _result(self, s: SampleToScore) -> ScoreResult:
        if s.key not in self._prompts:
            return ScoreResult(0.0, TRUNCATED, None, "finish_reason length: cut off at max_tokens; not judged")
        assert self._calls is not None
        if self.options.mode == "pairwise":  # recorded even when unparseable: win_rate counts those items
            b = self._baseline[s.key]
            pair, bad = judge_pair(self.options, self._calls, self._prompts[s.key], (s.text, b), _key(s)[0],
                                   len(s.text), len(b))
            self._pairs[s.key] = pair
            if bad is not None:
                return self._unparseable_result(bad, "a loss")
            return ScoreResult(float(item_preference(pair) or 0.0), JUDGED,
                               f"{pair.model_first}/{pair.baseline_first}",
                               f"model first: {pair.model_first}; baseline first: {pair.baseline_first}")
        (prompt,) = self._prompts[s.key]
        verdict = parse_verdict(self.options, self._calls.outputs[prompt.sha256], (s.text,))
        assert self.options.scale is not None
        if verdict.value is None:  # the scale's minimum, as its score 0 says
            self._ratings.append(float(self.options.scale[0]))
            return self._unparseable_result(verdict, "the scale minimum")
        assert isinstance(verdict.value, float)
        low, high = self.options.scale
        self._ratings.append(verdict.value)
        return ScoreResult((verdict.value - low) / (high - low), JUDGED, f"{verdict.value:g}")

    def _unparseable_result(self, bad: Verdict, counted_as: str) -> ScoreResult:
        self._unparseable += 1
        return ScoreResult(0.0, UNPARSEABLE, None, f"{bad.detail}; the judge wrote {bad.text[:200]!r}; "
                           f"counted as {counted_as}")

    def metrics(self) -> dict[str, Any]:
        """What this scorer saw, as ``judge_metrics`` reports it (see there)."""
        out: dict[str, Any] = {"mode": self.options.mode, "calls": self._calls.info() if self._calls else None,
                               "unparseable": self._unparseable}
        if self.options.mode == "pointwise":
            out.update(judged=len(self._ratings), mean_rating=sum(self._ratings) / len(self._ratings)
                       if self._ratings else None, scale=self.options.scale, unparseable_as="scale minimum")
            return {"judge": out}
        b = self.options.baseline
        out["baseline"] = b.model_dump(exclude_none=True) if b else None
        pairs = list(self._pairs.values())
        out["judged"] = len(pairs)
        if pairs:
            out["pairwise"] = win_rate(pairs, seed=self.options.sampling.seed)
            if not self._private:
                out["items"] = per_item_table(pairs)
        return {"judge": out}


def judge_metrics(per_item: dict[str, list[dict[str, Any]]], items: dict[str, dict[str, Any]], options: JudgeOptions,
                  scorer: Any) -> dict[str, Any]:
    """The ``judge`` scorer's run metrics (its ``ScorerEntry.metrics``): ``metrics["judge"]`` with the mode, the
    judge's calls (``JudgeCalls.info``), counts of judged and unparseable samples; pointwise the mean rating of
    every judged sample, an unparseable one at the scale's minimum (``unparseable_as``); pairwise
    ``rlhf.pairwise.win_rate`` (an unparseable item a loss) (win rate, paired bootstrap CI, LC win rate, position-flip
    rate) and, except on a private or human-audit split (whose per-item outputs are read only through logged
    paths), the per-item table.

    They are what the judge did in the run, read from ``scorer`` (the ``JudgeScorer`` that judged ``per_item``):
    its calls through the cache, and each pair's verdicts with both completions' lengths (the LC win rate's
    input), which the stored sample rows do not hold.

    Raises:
        EvalgateError: ``scorer`` is not the judge that scored the run.
    """
    if not isinstance(scorer, JudgeScorer) or scorer._calls is None:
        raise EvalgateError("the judge's run metrics come from the JudgeScorer that judged the run (begin() and "
                            "score() called): pass it to compute_metrics")
    return scorer.metrics()
