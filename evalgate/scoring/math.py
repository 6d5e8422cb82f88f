"""Mathematical answer equivalence (the ``math`` scorer), built on Hugging Face's ``math-verify``.

``math_equal(prediction, gold)`` compares two *answers* (already extracted from completions, e.g. by the
``gsm8k`` or ``boxed`` rule): each is unwrapped (a last ``\\boxed{}`` is taken, ``$...$`` / ``\\(...\\)`` /
``\\[...\\]`` delimiters dropped), a plain number followed by a plain-word unit ("18 dollars") keeps the
number, and both are parsed by ``math_verify.parse`` inside ``$...$`` with its LaTeX and plain-expression
extractors, then compared by ``math_verify.verify(gold, prediction)`` (the order math-verify requires). So
``\\text{13}`` equals ``13``, ``2.5`` equals ``2\\frac{1}{2}``, ``1,234`` equals ``1234``, ``50\\%`` equals
``50`` and ``0.5``, ``\\dfrac{14}{3}`` equals ``\\frac{14}{3}``, and ``x=5`` equals ``5``; numbers compare
after rounding to 6 decimal places (math-verify's ``float_rounding``). An answer math-verify cannot parse is
compared as normalised text.

math-verify bounds each parse and comparison with ``signal.alarm``, which works only in the main thread; off
the main thread ``math_equal`` runs without that bound.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from typing import Any

from evalgate.scoring.base import AnswerScorer, MathOptions
from evalgate.scoring.extract import last_boxed
from evalgate.userfiles import FieldProblem

_DELIMS = ((r"$$", r"$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]"))
_NUMBER_WITH_WORDS = re.compile(r"^\s*(-?[\d,]*\.?\d+)\s*[A-Za-z]{2,}[A-Za-z .]*$")
_TIMEOUT_S = 5
_MARKER = re.compile(r"####|answer is|\\boxed|\\fbox", re.I)

# Forms a numeric answer takes in GSM8K and MATH; a stop sequence found inside any of them could end
# generation in the middle of an answer (e.g. "." cuts "2.5" to "2").
NUMBER_FORMS = ("-1,234.567", "0.75", "2\\frac{1}{2}", "\\dfrac{3}{4}", "3/4", "50\\%", "12%", "\\$18.50",
                "$-2.5$", "1.5\\times10^{3}", "10^{-2}", "\\sqrt{2}", "3\\pi", "(1,2)", "[-2, 7]")


def unwrap(answer: str) -> str:
    """An answer without its wrappers: the last ``\\boxed{}`` if any, then math delimiters, then surrounding
    space and a trailing period. A number followed only by plain words (a unit) becomes the number.

    Args:
        answer: answer text, e.g. ``$\\boxed{18}$.`` or ``18 dollars``.

    Returns:
        The unwrapped text, e.g. ``18``.
    """
    s = answer.strip()
    if "\\boxed" in s or "\\fbox" in s:
        s = last_boxed(s) or s
    s = s.strip().rstrip(".").strip()
    for left, right in _DELIMS:
        if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
            s = s[len(left):len(s) - len(right)].strip()
            break
    m = _NUMBER_WITH_WORDS.match(s)
    return m.group(1) if m else s


def _timeout() -> int | None:
    return _TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=65536)
def _parse(answer: str, timeout: int | None) -> tuple[Any, ...]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    return tuple(parse(f"${answer}$", config, parsing_timeout=timeout))


def _text_key(answer: str) -> str:
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", answer)
    return re.sub(r"[\s\\{}]", "", s).lower()


def math_equal(prediction: str, gold: str) -> bool:
    """Whether two final answers are mathematically equivalent (see the module docstring).

    Args:
        prediction: the model's extracted answer (LaTeX or plain text; a ``\\boxed{}`` inside is unwrapped).
        gold: the reference answer (GSM8K number or MATH LaTeX ``answer``).

    Returns:
        True when math-verify judges them equal, or, when either side cannot be parsed, when their normalised
        texts are equal (``\\text{}`` dropped, spaces, backslashes and braces removed, lower case).
    """
    p, g = unwrap(prediction), unwrap(gold)
    if not p or not g:
        return False
    timeout = _timeout()
    gp, pp = _parse(g, timeout), _parse(p, timeout)
    if not gp or not pp:
        return _text_key(p) == _text_key(g)
    from math_verify import verify

    return bool(verify(list(gp), list(pp), timeout_seconds=timeout))


def stop_cuts_answers(stop: Sequence[str]) -> list[str]:
    """The stop sequences found inside a numeric answer form (``NUMBER_FORMS``): those that can cut one short.

    Stop sequences end generation as soon as they appear, so a stop of ``.`` turns "2.5" into "2". Protocols
    must use sequences that cannot occur inside an answer, such as ``"\\n\\nQuestion:"``.
    """
    return [s for s in stop if any(s in form for form in NUMBER_FORMS)]


class MathScorer(AnswerScorer):
    """Scores 1 when the extracted answer is mathematically equal to the item's gold answer (``math_equal``).

    The answer is taken from the response prefix (if any) plus the completion by the protocol's
    ``extraction.rule`` (``gsm8k``, ``boxed`` or ``last_number``). Status per sample: ``correct``; ``wrong``
    (an answer was found and differs; the detail gives the gold answer); ``no_answer`` (the rule found none);
    ``truncated`` (finish_reason ``length``: cut off at max_tokens, never scored from partial reasoning unless
    ``extraction.score_truncated`` is set). When the ``gsm8k`` rule found no final-answer marker and fell back
    to the last number, the detail says so, so a report can tell "answered wrongly" from "never answered".

    Options (``scorer.options``): ``MathOptions`` (answer_field).

    A protocol whose extraction rule yields no answer, or whose stop sequences can occur inside a numeric answer,
    is refused when it is loaded (``check_protocol``), so ``protocol freeze`` refuses it too.
    """

    name = "math"
    include_prefix = True

    def __init__(self, protocol: Any, options: MathOptions):
        self.answer_field = options.answer_field
        self.rule = protocol.spec.extraction.rule
        self.score_truncated = protocol.spec.extraction.score_truncated

    @staticmethod
    def check_protocol(spec: Any, options: MathOptions) -> None:
        """Refuse, when the protocol is loaded, what this scorer cannot score: an extraction rule that yields no
        answer (``code``) and stop sequences that can occur inside a numeric answer (``stop_cuts_answers``).

        Raises:
            FieldProblem: naming the field (``extraction.rule``, ``sampling.stop``) and what to do.
        """
        if spec.extraction.rule not in ("gsm8k", "boxed", "last_number", "raw"):
            raise FieldProblem("extraction.rule", f"extraction rule {spec.extraction.rule!r} does not yield an "
                               "answer; use gsm8k, boxed, last_number or raw")
        bad = stop_cuts_answers(spec.sampling.stop)
        if bad:
            raise FieldProblem("sampling.stop", f"stop sequences {bad} can occur inside a numeric answer (e.g. '.' "
                               "cuts 2.5 to 2); use sequences that cannot, such as '\\n\\nQuestion:'")

    def judge(self, prediction: str, gold: str, text: str) -> tuple[bool, list[str]]:
        ok = math_equal(prediction, gold)
        if self.rule == "gsm8k" and not _MARKER.search(text):
            return ok, ["no final-answer marker (####, 'answer is', \\boxed): last number used"]
        return ok, []
