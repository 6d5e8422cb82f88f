"""How evalgate writes numbers for people: the command line's lines and tables, and the values on every HTML page
(``evalgate.core.html``'s ``fmt`` filter and the rating app's).

One convention everywhere: a metric to three decimals (``0.083``), a metric with its standard error as
``0.083 ± 0.021`` (the stderr left out where it is unknown or not finite), a share as a percent (``8.3%``), NaN
or infinity as ``n/a``. ``--json`` output never passes through here: it keeps every float whole.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["DIGITS", "num", "pct", "pm", "short_digest", "table"]

DIGITS = 3
"""Decimals of a metric in text: enough for a stderr of one item in a thousand, where a float's 17 digits are noise."""


def num(v: Any, digits: int = DIGITS, missing: str = "-") -> str:
    """A value for a person: a float to ``digits`` decimals (``n/a`` when NaN or infinite), ``missing`` for None,
    anything else (an int, a string) through ``str``."""
    if v is None:
        return missing
    if isinstance(v, float):
        return f"{v:.{digits}f}" if math.isfinite(v) else "n/a"
    return str(v)


def pm(value: Any, stderr: Any = None, digits: int = DIGITS, missing: str = "-") -> str:
    """``value ± stderr`` (both through ``num``); the value alone when ``stderr`` is None or not finite, and
    ``missing`` when the value is None."""
    if value is None:
        return missing
    if isinstance(stderr, int | float) and math.isfinite(stderr):
        return f"{num(value, digits)} ± {num(float(stderr), digits)}"
    return num(value, digits)


def pct(share: Any, digits: int = 1, missing: str = "-") -> str:
    """A share in [0, 1] as a percent with ``digits`` decimals (0.0833 -> ``8.3%``); ``missing`` for None, ``n/a``
    when NaN or infinite."""
    if share is None:
        return missing
    return f"{share:.{digits}%}" if math.isfinite(share) else "n/a"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A plain-text table: the header, a rule of dashes, one line per row; columns two spaces apart, each as wide
    as its widest cell, cells through ``str`` (format numbers with ``num`` / ``pm`` first), no trailing blanks.

    Args:
        header: the column names.
        rows: the rows, each as long as ``header``.
        right: indices of the columns aligned right (numbers); the others are aligned left.

    Raises:
        ValueError: a row's length differs from the header's.
    """
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    for r in cells:
        if len(r) != len(header):
            raise ValueError(f"table row {r!r} has {len(r)} cells, the header {len(header)}")
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths,
                                                                                                 strict=True)))

    return "\n".join([line(cells[0]).rstrip(), "  ".join("-" * w for w in widths)]
                     + [line(r).rstrip() for r in cells[1:]])


def short_digest(digest: str, n: int = 12) -> str:
    """A checkpoint identity shortened for display: the first ``n`` hex digits, ``blake3:`` kept in front of a
    BLAKE3 identity so the algorithm stays visible (``blake3:af1349b9f5f9``; a sha256 one is bare hex)."""
    if digest.startswith("blake3:"):
        return "blake3:" + digest.removeprefix("blake3:")[:n]
    return digest[:n]
