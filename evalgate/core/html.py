"""Every HTML page evalgate writes goes through here: one jinja2 environment over ``evalgate/core/templates/``
(autoescape
on, undefined names an error) with the filters the pages share, one matplotlib-figure-to-inline-SVG helper and one
margin fitter for a chart's axes (``fit_axes``), and ``chart_axes``, the one-axes figure a page's chart is drawn on
(reused from chart to chart in a thread: creating the axes and its ticks is a third of a chart's cost).

Pages: ``report.html.j2`` (the release report, ``evalgate.gate.report.outputs``), ``watch.html.j2`` (``evalgate
watch``'s live
status, ``evalgate.watch.status``), ``preflight.html.j2`` (``evalgate.training.preflight``), ``diagnose.html.j2``
(``evalgate.diagnostics.report``). A value reaches a page escaped unless it is ``Markup`` (an ``svg`` result).
The rating web app (``evalgate.human.web``) keeps its own environment: its pages are served, not written.
"""

from __future__ import annotations

import functools
import io
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import jinja2
from markupsafe import Markup

from evalgate.core.formatting import DIGITS, num
from evalgate.core.formatting import short_digest as short

__all__ = ["ENV", "chart_axes", "fit_axes", "fmt", "render", "short_digest", "svg"]


def fmt(v: Any, digits: int = DIGITS) -> str:
    """A number for a page (``evalgate.core.formatting.num``, the command line's convention): a float to ``digits``
    decimals (``n/a`` when NaN or infinite), None as "", anything else through ``str``."""
    return num(v, digits, missing="")


def short_digest(digest: str | None, n: int = 12) -> str:
    """A checkpoint identity shortened for display (``formatting.short_digest``); "" for None."""
    return short(digest, n) if digest else ""


ENV = jinja2.Environment(loader=jinja2.PackageLoader("evalgate.core", "templates"),
                         autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
ENV.filters["fmt"] = fmt
ENV.filters["short_digest"] = short_digest


def render(template: str, **ctx: Any) -> str:
    """``template`` (a file in ``evalgate/core/templates/``) rendered with ``ctx``, every value HTML-escaped.

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


# the rcParams that change which font a FontProperties resolves to, or how its text is laid out
_TEXT_RC = ("font.family", "font.serif", "font.sans-serif", "font.cursive", "font.fantasy", "font.monospace",
            "text.hinting", "text.hinting_factor", "text.kerning_factor", "mathtext.fontset")


def _text_rc() -> tuple[str, ...]:
    """The values of ``_TEXT_RC`` now."""
    import matplotlib

    rc = cast("dict[str, Any]", matplotlib.rcParams)
    return tuple(str(rc[k]) for k in _TEXT_RC)


def _text_points(text: str, prop: Any, dpi: float, rc: tuple[str, ...]) -> tuple[float, float, float]:
    """Width, height and descent of ``text`` in points, as matplotlib's Agg renderer at ``dpi`` lays it out with
    font ``prop`` under rcParams ``rc`` (``_text_rc()``); 0s for "". Remembered across charts (4,096 texts): a
    report's tick labels and axis labels recur."""
    if not text:
        return 0.0, 0.0, 0.0
    return _measured(text, prop.copy(), dpi, rc)  # a copy: the key must not change under the cache


@functools.lru_cache(maxsize=4096)
def _measured(text: str, prop: Any, dpi: float, rc: tuple[str, ...]) -> tuple[float, float, float]:
    """``_text_points``, measured (``rc`` is part of the key only)."""
    from matplotlib.backends.backend_agg import RendererAgg

    w, h, d = RendererAgg(1, 1, dpi).get_text_width_height_descent(text, prop, ismath="$" in text)
    return w * 72 / dpi, h * 72 / dpi, d * 72 / dpi


def _tick_labels(axis: Any) -> tuple[list[str], Any]:
    """The labels ``axis`` will draw at its major ticks within its view, and their font (no draw needed)."""
    lo, hi = sorted(axis.get_view_interval())
    span = (hi - lo) or 1.0
    locs = [x for x in axis.get_majorticklocs() if lo - 1e-9 * span <= x <= hi + 1e-9 * span]
    ticks = axis.get_major_ticks(len(locs) or 1)
    return list(axis.get_major_formatter().format_ticks(locs)), ticks[0].label1.get_fontproperties()


def fit_axes(fig: Any, ax: Any, pad: float = 5.0) -> None:
    """Set ``fig``'s margins (``subplots_adjust``) so that ``ax``'s tick labels, axis labels, offset text and
    title fit inside the figure with ``pad`` points to spare, measured with matplotlib's Agg text layout; and,
    where the title cannot collide with anything (``_title_stays_put``), spare the draw its search for the title's
    place.

    What ``layout="constrained"`` gives a one-axes figure whose legend is inside the axes, for half the cost:
    constrained layout draws the whole figure once more to measure it (about 70 of a chart's 145 ms here,
    bench/charts.py); this measures only the texts that border the axes. Margins in points, from matplotlib's own
    rcParams: tick length and pad (``xtick.major.size``/``pad``), ``axes.labelpad``, ``axes.titlepad``.
    """
    import matplotlib

    rc = matplotlib.rcParams
    text = functools.partial(_text_points, dpi=fig.dpi, rc=_text_rc())
    ylabels, yprop = _tick_labels(ax.yaxis)
    xlabels, xprop = _tick_labels(ax.xaxis)
    ytick = rc["ytick.major.size"] + rc["ytick.major.pad"]
    xtick = rc["xtick.major.size"] + rc["xtick.major.pad"]
    label_w = max((text(t, yprop)[0] for t in ylabels), default=0.0)
    tick_h = max((text(t, xprop)[1] for t in xlabels), default=0.0)
    last_w = text(xlabels[-1], xprop)[0] if xlabels else 0.0
    ylab = ax.yaxis.label  # drawn rotated: its text height is its width on the page
    ylab_w = text(ylab.get_text(), ylab.get_fontproperties())[1]
    xlab = ax.xaxis.label
    xlab_h = text(xlab.get_text(), xlab.get_fontproperties())[1]
    title = ax.title
    _, title_h, title_descent = text(title.get_text(), title.get_fontproperties())
    offset_h = max(text(a.get_major_formatter().get_offset(), a.offsetText.get_fontproperties())[1]
                   for a in (ax.yaxis, ax.xaxis))
    labelpad = rc["axes.labelpad"]
    left = pad + label_w + ytick + (ylab_w + labelpad if ylab_w else 0.0)
    bottom = pad + tick_h + xtick + (xlab_h + labelpad if xlab_h else 0.0)
    top = pad + max(title_h + rc["axes.titlepad"] if title_h else 0.0, offset_h + labelpad)
    right = pad + last_w / 2
    w, h = (v * 72 for v in fig.get_size_inches())
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)
    if _title_stays_put(fig, ax, title_descent):
        ax._autotitlepos = False  # what set_title(y=1.0) sets: matplotlib's draw then skips the search


def _title_stays_put(fig: Any, ax: Any, descent: float) -> bool:
    """Whether matplotlib's draw would leave ``ax``'s title where it is (``Axes._update_title_position``): one axes
    (no twin, no child), x ticks and label at the bottom, no y offset text (after the margins are set, as the draw
    will see it) and the title's ``descent`` (points) inside ``axes.titlepad`` with a point to spare. The draw's
    check measures the whole y axis once more (about a tenth of a chart, bench/charts.py); this one reuses what
    ``fit_axes`` measured."""
    import matplotlib

    if len(fig.axes) != 1 or ax.child_axes or ax.get_title("left") or ax.get_title("right"):
        return False
    if ax.xaxis.get_ticks_position() != "bottom" or ax.xaxis.get_label_position() != "bottom":
        return False
    _tick_labels(ax.yaxis)  # the y formatter's offset text as the draw will see it, at the margins just set
    if ax.yaxis.get_major_formatter().get_offset():
        return False
    return bool(matplotlib.rcParams["axes.titlepad"] >= descent + 1)


_HELD = threading.local()


def _held() -> dict[tuple[Any, ...], tuple[Any, Any, dict[str, Any]]]:
    """This thread's figures between charts: (kind, figsize, dpi) -> (Figure, Axes, the rcParams it was made
    under)."""
    if not hasattr(_HELD, "charts"):
        _HELD.charts = {}
    return _HELD.charts  # type: ignore[no-any-return]


def _take(key: tuple[Any, ...], rc: dict[str, Any]) -> tuple[Any, Any] | None:
    """The figure and axes left by the last chart of ``key`` in this thread, made under the same rcParams, taken
    out of the pool (a chart drawn inside another's ``with`` gets its own); None when there is none."""
    held = _held().pop(key, None)
    return held[:2] if held is not None and held[2] == rc else None


def _clear(ax: Any) -> None:
    """Back to what a new axes holds, its ticks kept: every line, collection, patch, text, image and the legend
    removed, titles and axis labels emptied, the colour cycle restarted, the limits left to autoscale, and the
    figure's margins back to rcParams' (the axes' size sets how many ticks the locator picks)."""
    import matplotlib

    for artist in (*ax.lines, *ax.collections, *ax.patches, *ax.texts, *ax.images, *ax.artists, *ax.tables):
        artist.remove()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    for loc in ("left", "center", "right"):
        ax.set_title("", loc=loc)
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax._autotitlepos = matplotlib.rcParams["axes.titley"] is None  # as Axes.clear sets it (fit_axes may not)
    ax.set_prop_cycle(None)
    ax.relim()
    ax.autoscale()
    rc = matplotlib.rcParams
    ax.get_figure().subplots_adjust(left=rc["figure.subplot.left"], right=rc["figure.subplot.right"],
                                    bottom=rc["figure.subplot.bottom"], top=rc["figure.subplot.top"],
                                    wspace=rc["figure.subplot.wspace"], hspace=rc["figure.subplot.hspace"])


@contextmanager
def chart_axes(kind: str, figsize: tuple[float, float], dpi: float | None = None) -> Iterator[tuple[Any, Any]]:
    """A matplotlib ``Figure`` (no pyplot) of ``figsize`` inches at ``dpi`` (rcParams' ``figure.dpi`` when None)
    with one axes, for one chart of ``kind``: yields ``(fig, ax)``; write it with ``svg`` inside the ``with``.

    On leaving, the axes is cleared (``_clear``: no data kept) and held for the next chart of the same ``kind``,
    size and dpi in this thread, as long as rcParams stay as they were: an axes' ticks cost more to create than the
    rest of the chart to draw (bench/charts.py). A chart that raises is dropped, not held. What ``_clear`` does not
    reset stays from chart to chart: styles set on the axes itself (``tick_params``, ``grid``, label font sizes),
    so a ``kind``'s drawing code sets the same ones every time; the output is then the same bytes a new figure
    gives (tests/test_html.py).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    key = (kind, tuple(figsize), dpi)
    rc: dict[str, Any] = dict(matplotlib.rcParams.items())
    held = _take(key, rc)
    if held is None:
        fig = Figure(figsize=figsize, dpi=dpi)
        held = fig, fig.add_subplot()
    yield held
    _clear(held[1])
    _held()[key] = (*held, rc)
