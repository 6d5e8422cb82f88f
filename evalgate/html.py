"""Every HTML page evalgate writes goes through here: one jinja2 environment over ``evalgate/templates/`` (autoescape
on, undefined names an error) with the filters the pages share, and one matplotlib-figure-to-inline-SVG helper.

Pages: ``report.html.j2`` (the release report, ``evalgate.report``), ``watch.html.j2`` (``evalgate watch``'s live
status, ``evalgate.watch.status``), ``preflight.html.j2`` (``evalgate.preflight``), ``diagnose.html.j2``
(``evalgate.diagnostics.report``). A value reaches a page escaped unless it is ``Markup`` (an ``svg`` result).
The rating web app (``evalgate.web``) keeps its own environment: its pages are served, not written.
"""

from __future__ import annotations

import io
import re
from typing import Any

import jinja2
from markupsafe import Markup

from evalgate.formatting import DIGITS, num

__all__ = ["ENV", "fmt", "render", "short_digest", "svg"]


def fmt(v: Any, digits: int = DIGITS) -> str:
    """A number for a page (``evalgate.formatting.num``, the command line's convention): a float to ``digits``
    decimals (``n/a`` when NaN or infinite), None as "", anything else through ``str``."""
    return num(v, digits, missing="")


def short_digest(digest: str | None, n: int = 12) -> str:
    """A checkpoint identity shortened for display (``checkpoints.identity.short_digest``); "" for None."""
    if not digest:
        return ""
    from evalgate.checkpoints.identity import short_digest as short

    return short(digest, n)


ENV = jinja2.Environment(loader=jinja2.PackageLoader("evalgate", "templates"),
                         autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
ENV.filters["fmt"] = fmt
ENV.filters["short_digest"] = short_digest


def render(template: str, **ctx: Any) -> str:
    """``template`` (a file in ``evalgate/templates/``) rendered with ``ctx``, every value HTML-escaped.

    Raises:
        jinja2.UndefinedError: the template uses a name ``ctx`` lacks (a bug, not bad input).
    """
    return ENV.get_template(template).render(**ctx)


def inline_svg(text: str) -> Markup:
    """An SVG document as an inline ``<svg>`` element with no URL in it: the XML prologue, the ``<metadata>`` block
    and the namespace declarations (which inline SVG in HTML does not need) are dropped, so a reader can check at a
    glance that the page fetches nothing."""
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return Markup(re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", text))


def svg(fig: Any) -> Markup:
    """A matplotlib ``Figure`` as inline SVG markup for a page (``inline_svg``): text kept as text and element ids
    salted with a constant, so the same figure gives the same bytes."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "evalgate"}):
        fig.savefig(buf, format="svg")
    return inline_svg(buf.getvalue())
