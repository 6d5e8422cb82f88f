"""Mathematical answer equivalence (the ``math`` scorer), built on Hugging Face's ``math-verify``.

``math_equal(prediction, gold)`` compares two *answers* (already extracted from completions, e.g. by the
``gsm8k`` or ``boxed`` rule): each is unwrapped (a last ``\\boxed{}`` is taken, ``$...$`` / ``\\(...\\)`` /
``\\[...\\]`` delimiters dropped), a plain number followed by a plain-word unit ("18 dollars") keeps the
number, numbers are written the plain way (``extract.plain_numbers``: LaTeX/SI thousands separators such as
``12\\,345`` and ``1{,}000``, digits of any script, the minus sign ``−``), an ordinal suffix after a number is
dropped (``12^{\\text{th}}``, ``12^{th}``, ``12\\textsuperscript{th}``, ``12th``; st/nd/rd too), a number in
e-notation (``1.5e3``) becomes ``1.5\\times10^{3}`` and an upright ``\\mathrm{e}`` becomes Euler's ``e``. Both are
parsed by ``math_verify.parse`` inside ``$...$`` with its LaTeX extractor; only where that fails, by its
plain-expression extractor, and then only if the expression it found is the whole answer: an answer math-verify
parses only in part (``1 + \\frac{1}{\\mathrm{e}}`` read as ``1``, ``2*x+1`` read as ``2``) is not a parse.

Numbers (both sides a number, or tuples/sets of numbers) are compared here, not by math-verify, whose
``evalf(chop=True)`` and 6-decimal rounding make every tiny number equal (``\\frac{1}{2^{98}}`` =
``\\frac{1}{2^{99}}``): two exact values (no decimal point written) must be equal (exact rationals exactly,
others to 50 significant digits); where either side is written as a decimal, their relative difference must be
at most ``REL_TOL`` (1e-6), so ``0.333333`` equals ``\\frac{1}{3}`` but ``0.3333`` does not. A side written with
``%`` matches either its value or its value times 100 (``50\\%`` equals ``50`` and ``0.5``). Everything else
(expressions with symbols, equations, intervals, matrices) goes to ``math_verify.verify(gold, prediction)`` (the
order math-verify requires). So ``\\text{13}`` equals ``13``, ``2.5`` equals ``2\\frac{1}{2}``, ``1,234`` equals
``1234``, ``\\dfrac{14}{3}`` equals ``\\frac{14}{3}``, and ``x=5`` equals ``5``. An answer that cannot be
parsed is compared as normalised text; an empty answer equals nothing. Docs: docs/SCORING.md.

Hedges in the form (docs/SCORING.md, "Hedged answers"): an answer is compared whole, so math-verify may not read one
value of several: a number inside a text group (``\\text{}``, ``\\mathrm{}``, ``\\mbox{}``, ...) that its parse
dropped makes the parse no parse (``2 \\text{ (or 3)}`` is not 2; a unit such as ``10\\text{ inches}`` holds no
number and stays 10), an equation or chain whose number sides differ (``2 = 3``, ``x = 3 = 2``; math-verify
compared the right side) equals nothing, and so does a parse that lost the relations the answer writes (math-verify
reads ``x = 2 \\lor x = 3``, ``x=2 \\implies x=3`` as 3) or an "or" / "and" in a text group that it neither kept nor
read as a list's comma (``x = 2 \\,\\text{or}\\, x = 3`` read as the chain x = 2x = 3).

Times and undefined values (huggingface/Math-Verify#14): math-verify reads ``a:b`` as the ratio a/b, so a time of
day ``1:00`` became 1/0, complex infinity, and every ``h:00`` equalled every other. An answer that is a time of day
(``H:MM`` or ``H:MM:SS``, minutes and seconds 00-59, an optional am/pm) equals only the same time on the 24-hour
clock (``1:00`` equals ``01:00``, not ``12:00`` and not ``1``; ``1:00 pm`` equals ``13:00``, not ``1:00 am``); any
other ``a:b`` stays a ratio (``3:4`` equals ``6:8`` and ``\\frac{3}{4}``). A value that is undefined (complex
infinity ``zoo`` from a division by zero, or ``nan``) is no number: such an answer is compared as written
(normalised text), so ``1/0`` equals ``1/0`` but not ``2/0`` or ``\\infty``. The real infinities ``\\infty`` and
``-\\infty`` equal only themselves.

math-verify bounds each parse and comparison with ``signal.alarm``, which works only in the main thread; off
the main thread ``math_equal`` runs without that bound.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from typing import Any

from evalgate.core.userfiles import FieldProblem
from evalgate.scoring.base import AnswerScorer, MathOptions
from evalgate.scoring.extract import RULES, last_boxed, plain_numbers

_DELIMS = ((r"$$", r"$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]"))
_NUMBER_WITH_WORDS = re.compile(r"^\s*(-?[\d,]*\.?\d+)\s*[A-Za-z]{2,}[A-Za-z .]*$")
_TIMEOUT_S = 5
_MARKER = re.compile(r"####|answer is|\\boxed|\\fbox", re.I)
_E_NOTATION = re.compile(r"^(-?\d+(?:\.\d+)?)[eE]([-+]?\d+)$")
_ORD, _UPRIGHT = r"(?:st|nd|rd|th)", r"\\(?:text|textrm|textnormal|mathrm|mbox)"
_ORDINAL = re.compile(rf"(\d\}}?)(?:\s*\^\s*\{{\s*{_UPRIGHT}\s*\{{\s*{_ORD}\s*\}}\s*\}}"  # 12^{\text{th}}
                      rf"|\s*\^\s*\{{\s*(?:\\rm\s*)?{_ORD}\s*\}}"  # 12^{th}, 12^{\rm th}
                      rf"|\s*\^\s*{_UPRIGHT}\s*\{{\s*{_ORD}\s*\}}"  # 12^\text{th}
                      rf"|\s*\\textsuperscript\s*\{{\s*{_ORD}\s*\}}"  # 12\textsuperscript{th}
                      rf"|{_ORD}(?![A-Za-z]))")  # 12th, \text{12th}
_UPRIGHT_E = re.compile(r"\\(?:mathrm|operatorname|text|rm)\s*\{\s*e\s*\}")
_AMPM = r"([ap])\.?\s*m\.?"
_TIME = re.compile(rf"^(\d{{1,2}}):([0-5]\d)(?::([0-5]\d))?"
                   rf"(?:\s*(?:\\(?:text|mathrm)\{{\s*{_AMPM}\s*\}}|{_AMPM}))?$", re.I)
REL_TOL = 1e-6  # relative tolerance for numbers where either side is written as a decimal
_EXACT_DIGITS = 60  # significant digits at which exact non-rational values are compared (to 1e-50 relative)

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
    s = m.group(1) if m else s
    s = _ORDINAL.sub(r"\1", plain_numbers(s))
    e = _E_NOTATION.match(s)
    if e:
        s = f"{e.group(1)}\\times10^{{{int(e.group(2))}}}"
    return _UPRIGHT_E.sub("e", s)


def _timeout() -> int | None:
    return _TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=65536)
def _parse(answer: str, timeout: int | None) -> tuple[Any, ...]:
    """math-verify's parse of a whole answer: ``(value, parsed text)``, or ``()`` when it parses none or only a
    part of it."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    found = parse(f"${answer}$", [LatexExtractionConfig()], parsing_timeout=timeout)
    if found and not isinstance(found[0], str):
        # math-verify drops \text{...} as a unit: one that states a number it dropped ("13 \text{ (or 14)}" read
        # as 13) is a second value, and an answer is compared whole (docs/SCORING.md, "Hedged answers")
        dropped = _numbers_in_text_groups(answer) - set(_PLAIN_NUMBER.findall(str(found[-1])))
        # math-verify reads two relations joined by any operator ("x = 2 \lor x = 3", "x=2 \implies x=3") as the
        # last one's right side, 3: a parse that lost every relation the answer writes dropped its other values
        lost = _RELATION.search(answer) is not None and not _holds_relation(found[0])
        # "x = 2 \,\text{or}\, x = 3" parsed as the chain x = 2x = 3 (the "or" dropped, not read as a list's ",")
        joined = _CONNECTIVE.search(" ".join(_TEXT_GROUP.findall(answer))) is not None \
            and not re.search(r"(?<!\\),", found[-1])
        return () if dropped or lost or joined else tuple(found)
    # The plain-expression extractor finds the last expression anywhere in the text ("1 +" gives 1): accepted
    # only when what it found is the whole answer.
    found = parse(answer, [ExprExtractionConfig()], parsing_timeout=timeout)
    if len(found) == 2 and not isinstance(found[0], str) and _squash(found[1]) == _squash(answer):
        return tuple(found)
    return ()


_TEXT_GROUP = re.compile(r"\\(?:text|textbf|textit|textrm|textsf|texttt|mbox|mathrm|mathbf|mathit|operatorname)\s*"
                         r"\{([^{}]*)\}")
_PLAIN_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CONNECTIVE = re.compile(r"\b(?:or|and|else|otherwise|either|nor)\b", re.I)


# A relation sign: "=", "<", ">" or a LaTeX relation command (\\le is not the start of \\left).
_RELATION = re.compile(r"[=<>]|\\(?:le|ge|leq|geq|neq|ne|lt|gt|leqslant|geqslant|equiv)(?![A-Za-z])")


def _holds_relation(value: Any) -> bool:
    """Whether a parsed value is or holds a relation (an equation, an inequality, a set or chain of them)."""
    import sympy

    return isinstance(value, sympy.Basic) and (isinstance(value, sympy.core.relational.Relational)
                                               or value.has(sympy.core.relational.Relational))


def _numbers_in_text_groups(answer: str) -> set[str]:
    """The numbers written inside the answer's text groups (``\\text{...}``, ``\\mathrm{...}``, ...)."""
    return {n for g in _TEXT_GROUP.findall(answer) for n in _PLAIN_NUMBER.findall(g)}


def _squash(text: str) -> str:
    return re.sub(r"\s", "", text)


def _numeric(value: Any) -> tuple[Any, list[Any]] | None:
    """``(shape, numbers)`` of a parsed value that is a number, a tuple or finite set of numbers (sets sorted by
    value) or an interval with numeric ends; else None (symbols, equations, matrices: left to math-verify)."""
    import sympy

    def is_num(v: Any) -> bool:
        return isinstance(v, sympy.Expr) and bool(v.is_number)

    if isinstance(value, sympy.Eq) and isinstance(value.lhs, sympy.Symbol):  # an assignment "x = 5"
        value = value.rhs
    if isinstance(value, sympy.Expr) and value.has(sympy.UnevaluatedExpr):  # math-verify writes 50% so
        value = value.replace(lambda e: isinstance(e, sympy.UnevaluatedExpr), lambda e: e.args[0])
    if is_num(value):
        return "number", [value]
    if isinstance(value, sympy.Interval) and is_num(value.start) and is_num(value.end):
        return ("interval", value.left_open, value.right_open), [value.start, value.end]
    if isinstance(value, (sympy.Tuple, sympy.FiniteSet)) and all(is_num(v) for v in value.args):
        items = list(value.args)
        if isinstance(value, sympy.FiniteSet):
            items.sort(key=lambda v: tuple(float(c) for c in sympy.N(v, 30).as_real_imag()))
        return type(value).__name__, items
    return None


def _false_relation(value: Any, text: str) -> bool:
    """Whether a parsed answer is an equation (or a chain ``x = a = b``) whose number sides are not all equal: it
    states two values, or a falsehood (``2 = 3``, which math-verify compares by its right side, so it equalled 3),
    and equals no answer. A side with a symbol (``x`` in ``x = 3``) is left out; ``2 + 3 = 5`` is true."""
    import sympy

    eqs = [value] if isinstance(value, sympy.Eq) else list(value.args) if isinstance(value, sympy.And) else []
    if not eqs or not all(isinstance(e, sympy.Eq) for e in eqs):
        return False
    sides = [v for e in eqs for v in (e.lhs, e.rhs) if isinstance(v, sympy.Expr) and v.is_number]
    approximate = bool(_DECIMAL.search(text))
    return any(not _number_equal(sides[0], v, approximate) for v in sides[1:])


def _number_equal(a: Any, b: Any, approximate: bool) -> bool:
    """``a == b`` for two sympy numbers: exactly (rationals) or to 50 significant digits; when ``approximate`` (a
    side was written as a decimal), within ``REL_TOL`` relative, the decimal taken as written (0.333333 is
    333333/10**6, not its binary float)."""
    import sympy

    if approximate:
        a, b = (v.xreplace({f: sympy.Rational(str(f)) for f in v.atoms(sympy.Float)}) for v in (a, b))
    x, y = sympy.N(a, _EXACT_DIGITS), sympy.N(b, _EXACT_DIGITS)
    if not all(v.is_finite for v in (x, y)):  # real infinities (an interval's end) are equal only to themselves
        return bool(x == y and x.is_infinite and x.is_extended_real)
    tol = sympy.Rational(str(REL_TOL)) if approximate else sympy.Rational(1, 10**50)
    if 1e-300 < max(abs(x), abs(y)) < 1e300:  # small enough to evaluate exactly
        ea, eb = a.doit(), b.doit()
        if ea.is_Rational and eb.is_Rational:
            return bool(abs(ea - eb) <= tol * max(abs(ea), abs(eb)))
    return bool(abs(x - y) <= tol * max(abs(x), abs(y)))


_DECIMAL = re.compile(r"\d\.\d")


def _numbers_equal(pred: Any, gold: Any, pred_text: str, gold_text: str) -> bool | None:
    """Whether two parsed answers are equal numbers (or tuples, sets or intervals of numbers); None when they
    are not both numeric of the same shape."""
    import sympy

    p, g = _numeric(pred), _numeric(gold)
    if p is None or g is None or p[0] != g[0]:
        return None
    if len(p[1]) != len(g[1]):
        return False
    approximate = bool(_DECIMAL.search(pred_text) or _DECIMAL.search(gold_text)
                       or any(v.atoms(sympy.Float) for v in (*p[1], *g[1])))

    def variants(values: list[Any], text: str) -> list[list[Any]]:
        return [values, [v * 100 for v in values]] if "%" in text else [values]

    return any(all(_number_equal(x, y, approximate) for x, y in zip(pv, gv, strict=True))
               for pv in variants(p[1], pred_text) for gv in variants(g[1], gold_text))


def _text_key(answer: str) -> str:
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", answer)
    return re.sub(r"[\s\\{}]", "", s).lower()


def time_of_day(answer: str) -> tuple[int, int, int] | None:
    """``(hour, minute, second)`` on the 24-hour clock of an answer that is a time of day (``1:00``, ``12:30:15``,
    ``3:05 pm``, ``3:05\\text{ p.m.}``), else None. Minutes and seconds must be 00-59 (``6:90`` is a ratio, not a
    time); with am/pm the hour is read on the 12-hour clock (``1:00 pm`` is 13:00, ``12:30 am`` is 0:30)."""
    m = _TIME.match(answer.strip())
    if not m:
        return None
    hour, half = int(m.group(1)), (m.group(4) or m.group(5) or "").lower()
    if half:
        hour = hour % 12 + (12 if half == "p" else 0)
    return hour, int(m.group(2)), int(m.group(3) or 0)


def _undefined(parsed: tuple[Any, ...]) -> bool:
    """Whether a parsed value holds complex infinity (a division by zero) or nan: no number to compare."""
    import sympy

    value = parsed[0]
    return isinstance(value, sympy.Basic) and (value.has(sympy.zoo) or value.has(sympy.nan))


def math_equal(prediction: str, gold: str) -> bool:
    """Whether two final answers are mathematically equivalent (see the module docstring).

    Args:
        prediction: the model's extracted answer (LaTeX or plain text; a ``\\boxed{}`` inside is unwrapped).
        gold: the reference answer (GSM8K number or MATH LaTeX ``answer``).

    Returns:
        For two numbers (or tuples/sets of numbers), whether they are equal by the module docstring's rule;
        otherwise whether math-verify judges them equal; when either side cannot be parsed in full, whether their
        normalised texts are equal (``\\text{}`` dropped, spaces, backslashes and braces removed, lower case), and
        so when either side's value is undefined (``zoo``, ``nan``). A time of day equals only the same time.
        False when either side is empty.
    """
    p, g = unwrap(prediction), unwrap(gold)
    if not p or not g:
        return False
    tp, tg = time_of_day(p), time_of_day(g)
    if tp is not None or tg is not None:  # a time equals only the same time (math-verify reads 1:00 as 1/0)
        return tp == tg
    timeout = _timeout()
    gp, pp = _parse(g, timeout), _parse(p, timeout)
    if not gp or not pp or _undefined(gp) or _undefined(pp):
        return _text_key(p) == _text_key(g)
    from math_verify import verify
    from math_verify.errors import TimeoutException
    from math_verify.utils import timeout as time_limit

    try:
        if time_limit(timeout)(_false_relation)(pp[0], p):
            return False
        numeric = time_limit(timeout)(_numbers_equal)(pp[0], gp[0], p, g)
    except (TimeoutException, TypeError, ValueError, ArithmeticError):
        numeric = False  # a number too large to compare in time is not accepted as equal
    if numeric is not None:
        return numeric
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
        if not RULES[spec.extraction.rule].yields_answer:
            answers = [name for name, rule in RULES.items() if rule.yields_answer]
            raise FieldProblem("extraction.rule", f"extraction rule {spec.extraction.rule!r} does not yield an "
                               f"answer; use one that does: {', '.join(answers)}")
        bad = stop_cuts_answers(spec.sampling.stop)
        if bad:
            raise FieldProblem("sampling.stop", f"stop sequences {bad} can occur inside a numeric answer (e.g. '.' "
                               "cuts 2.5 to 2); use sequences that cannot, such as '\\n\\nQuestion:'")

    def judge(self, prediction: str, gold: str, text: str) -> tuple[bool, list[str]]:
        ok = math_equal(prediction, gold)
        if self.rule == "gsm8k" and not _MARKER.search(text):
            return ok, ["no final-answer marker (####, 'answer is', \\boxed): last number used"]
        return ok, []
