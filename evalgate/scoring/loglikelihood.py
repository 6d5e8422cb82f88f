"""Log-likelihood multiple choice (the ``multiple_choice`` scorer): the engine scores each option's continuation after
the rendered prompt and nothing is generated; the chosen option is the one with the highest log-likelihood.

Definitions are lm-evaluation-harness's (0.4.13, ``lm_eval/api/task.py``, ``ConfigurableTask`` with ``output_type:
multiple_choice``): the continuation of option ``c`` is ``target_delimiter + c``; ``acc`` chooses
``argmax_i ll_i``, ``acc_norm`` chooses ``argmax_i ll_i / len(c_i)`` with ``len`` the option's length in characters
(without the delimiter; ``acc_bytes`` in lm-eval divides by UTF-8 bytes instead), the first maximum on a tie
(``np.argmax``). A context and a continuation are tokenized as lm-eval's ``TemplateLM._encode_pair``: trailing white
space of the context moves to the continuation, the two are encoded together and the continuation's tokens are those
after the context's own encoding.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.stats import mean_stderr
from evalgate.scoring.base import MultipleChoiceOptions, SampleToScore, ScoreResult, require_one_sample

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def encode_pair(encode: Any, context: str, continuation: str,
                move_space: bool = True) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Token ids of a context and of its continuation, as lm-evaluation-harness's ``_encode_pair`` (causal models).

    Args:
        encode: ``encode(text) -> token ids`` (the run's ``prompts.PromptEncoder``: one BOS where the tokenizer
            uses one, as lm-eval's ``tok_encode`` with the tokenizer's default special tokens).
        context: the rendered prompt (not empty).
        continuation: the delimiter and the option.
        move_space: move the context's trailing white space to the continuation (lm-eval); False keeps it in the
            context, so only the continuation's own tokens are scored (TRL's and RewardBench's DPO tokenization,
            where a chat template's generation prompt ends in a newline).

    Returns:
        (context ids, continuation ids): the context's trailing white space moved to the continuation, ``context +
        continuation`` encoded whole, the continuation's ids being those after ``len(encode(context))``.

    Raises:
        BadInput: an empty context, or a continuation that adds no token.
    """
    if not context:
        raise BadInput("a multiple-choice prompt rendered empty: the protocol's template must write the question")
    spaces = len(context) - len(context.rstrip()) if move_space else 0
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tuple(encode(context + continuation))
    ctx = tuple(encode(context))
    if len(whole) <= len(ctx):
        raise BadInput(f"the option continuation {continuation!r} adds no token after the prompt; an option must "
                       "not be empty")
    return ctx, whole[len(ctx):]


def choices(item: dict[str, Any], options: MultipleChoiceOptions) -> list[str]:
    """The item's options (``choices_field``).

    Raises:
        BadInput: not a non-empty list of strings, naming the item.
    """
    found = item.get(options.choices_field)
    if not isinstance(found, list) or not found or not all(isinstance(c, str) for c in found):
        raise BadInput(f"item {item.get('id')!r}: {options.choices_field!r} must be a non-empty list of option "
                       "strings (the multiple_choice scorer's choices_field)")
    return found


def continuations(item: dict[str, Any], options: Any) -> list[str]:
    """Each option's continuation: ``target_delimiter + option`` (lm-eval's ``construct_requests``); options that
    define their own ``continuations(item)`` (the ``dpo_preference`` scorer's: chosen, then rejected) give theirs."""
    own = getattr(options, "continuations", None)
    if callable(own):
        return list(own(item))
    return [options.target_delimiter + c for c in choices(item, options)]


def argmax(values: Sequence[float]) -> int:
    """Index of the largest value, the first on a tie (``numpy.argmax``)."""
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def chosen(logprobs: Sequence[float], options: Sequence[str]) -> dict[str, int]:
    """The option each metric chooses: ``acc`` by summed log-likelihood, ``acc_norm`` by log-likelihood per
    character of the option (lm-eval: ``lls / completion_len``, ``len`` of the option string).

    Raises:
        BadInput: as many log-likelihoods as options are needed; an empty option has no per-character value.
    """
    if len(logprobs) != len(options):
        raise BadInput(f"{len(logprobs)} log-likelihoods for {len(options)} options")
    if any(not o for o in options):
        raise BadInput("an empty option has no log-likelihood per character")
    return {"acc": argmax(logprobs), "acc_norm": argmax([lp / len(o) for lp, o in zip(logprobs, options,
                                                                                         strict=True)])}


def result_text(logprobs: Sequence[float], greedy: Sequence[bool], tokens: Sequence[int]) -> str:
    """What a log-likelihood sample stores as its text: JSON ``{"logprobs", "greedy", "tokens"}`` (per option, in
    order; ``tokens``: the continuation's token count)."""
    return json.dumps({"logprobs": list(logprobs), "greedy": list(greedy), "tokens": list(tokens)})


def _gold(item: dict[str, Any], options: MultipleChoiceOptions, n: int) -> int:
    gold = item.get(options.gold_field)
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < n:
        raise BadInput(f"item {item.get('id')!r}: {options.gold_field!r} must be the correct option's 0-based index "
                       f"(an integer from 0 to {n - 1}), not {gold!r}")
    return gold


class MultipleChoiceScorer:
    """Scores a sample ``correct`` when the option its ``metric`` chooses is the item's gold option (see the module
    docstring). Each sample's text is the engine's log-likelihoods (``result_text``), not a completion."""

    name = "multiple_choice"

    def __init__(self, protocol: Any, options: MultipleChoiceOptions):
        self.options = options
        self.choices: dict[str, dict[str, int]] = {}  # item id -> metric -> chosen index, for ``mc_metrics``

    @staticmethod
    def check_protocol(spec: Any, options: MultipleChoiceOptions) -> None:
        """One sample per item (the log-likelihoods are not sampled); no stop sequences or reasoning to strip."""
        require_one_sample(spec, "multiple_choice", "samples nothing (it scores each option's log-likelihood once)",
                           no_stop=True)

    @property
    def required_fields(self) -> tuple[str, ...]:
        """The options and the gold index."""
        return (self.options.choices_field, self.options.gold_field)

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """Per sample: ``correct`` or ``wrong`` by the ``metric``'s choice; ``extracted`` its letter, ``detail``
        both metrics' choices.

        Raises:
            BadInput: a sample whose text is not a log-likelihood result for the item's options.
        """
        out = []
        for s in samples:
            opts = choices(s.item, self.options)
            try:
                lls = [float(x) for x in json.loads(s.text)["logprobs"]]
            except (ValueError, KeyError, TypeError) as e:
                raise BadInput(f"item {s.item.get('id')!r}: the sample holds no log-likelihoods (a generation "
                               "cached under this protocol?); rerun it") from e
            if not all(math.isfinite(x) for x in lls):
                raise BadInput(f"item {s.item.get('id')!r}: a log-likelihood is not finite ({lls})")
            picks = chosen(lls, opts)
            gold = _gold(s.item, self.options, len(opts))
            self.choices[str(s.item.get("id"))] = picks
            pick = picks[self.options.metric]
            ok = pick == gold
            detail = (f"acc chooses {LETTERS[picks['acc']]}, acc_norm chooses {LETTERS[picks['acc_norm']]}; "
                      f"gold {LETTERS[gold]}")
            out.append(ScoreResult(1.0 if ok else 0.0, "correct" if ok else "wrong", LETTERS[pick], detail))
        return out


def mc_metrics(per_item: dict[str, list[dict[str, Any]]], items: dict[str, dict[str, Any]],
               options: MultipleChoiceOptions, scorer: MultipleChoiceScorer | None) -> dict[str, Any]:
    """The run's ``acc`` and ``acc_norm`` (means over items of 0/1, lm-eval's ``mean`` aggregation) with their
    stderr (``stats.mean_stderr``), from the choices the scorer made.

    Raises:
        BadInput: no scorer, or an item it did not score.
    """
    if scorer is None:
        raise BadInput("multiple_choice metrics need the scorer that chose the options")
    out: dict[str, Any] = {}
    for metric in ("acc", "acc_norm"):
        values = []
        for iid in per_item:
            if iid not in scorer.choices:
                raise BadInput(f"item {iid!r} was not scored by this multiple_choice scorer")
            values.append(1.0 if scorer.choices[iid][metric] == _gold(items[iid], options,
                                                                       len(choices(items[iid], options))) else 0.0)
        out[metric], out[f"{metric}_stderr"] = mean_stderr(values)
    return out
