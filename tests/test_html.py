"""Every HTML page comes from a template through one environment (``evalgate.core.html``): a hostile string in any value
a page shows arrives escaped, and the one figure helper gives inline SVG with no URL, the same bytes twice."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from evalgate.core.html import ENV, fmt, svg
from tests.conftest import REPO

HOSTILE = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


def _assert_escaped(page: str) -> None:
    assert HOSTILE not in page and "<img" not in page
    assert ESCAPED in page


def test_autoescape_is_on_for_every_page_template():
    for name in ("report.html.j2", "watch.html.j2", "preflight.html.j2", "diagnose.html.j2"):
        t = ENV.get_template(name)
        assert t.environment.autoescape(name) if callable(t.environment.autoescape) else t.environment.autoescape


def test_watch_status_page_escapes_what_it_shows():
    from evalgate.watch.status import render_status

    ck = {"step": 5, "status": "failed", "metric": float("nan"), "run_id": HOSTILE, "message": HOSTILE,
          "path": HOSTILE}
    doc = {"state": "watching", "protocol": HOSTILE, "split": "dev", "updated_at": "t", "pid": 1, "metric": "pass@1",
           "evaluating": ck, "runs": [{"run_dir": HOSTILE, "exists": False, "stop": {"reason": HOSTILE},
                                       "checkpoints": [ck]}]}
    page = render_status(doc, [], "")
    _assert_escaped(page)
    assert page.count(ESCAPED) == 6  # protocol, evaluating path, run dir, STOP reason, run id, message
    assert "<td>n/a</td>" in page  # a NaN metric
    assert "http-equiv='refresh'" in page


def test_preflight_report_escapes_verdict_messages(tmp_path):
    from evalgate.training.preflight import PreflightResult, ShapeCheck, write_report

    res = PreflightResult(protocol=HOSTILE, checkpoint="c", split="s", samples=2, prompts=1, run_ids=["r"],
                          pass_rates={"a": 0.5}, histogram=[(0.0, 0), (0.5, 1), (1.0, 0)], all_correct=0.0,
                          all_wrong=0.0, other_constant=0.0, zero_variance=0.0, mean=0.5, std=0.5,
                          pass_rate_std=0.0, baselines={}, verdicts=[ShapeCheck(HOSTILE, "fired", HOSTILE)])
    page = write_report(res, tmp_path / "out" / "pre.html").read_text()
    _assert_escaped(page)
    assert page.count("<svg") == 1 and "xmlns" not in page and "http://" not in page


def test_diagnose_report_escapes_labels_and_messages(tmp_path):
    from evalgate.diagnostics.diagnose import diagnose
    from evalgate.diagnostics.log import read_jsonl
    from evalgate.diagnostics.report import render_html

    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "kl": 0.01 * s * s, "reward": 0.1}) + "\n" for s in range(1, 60)))
    d = diagnose(read_jsonl(log), label=HOSTILE)
    page = render_html([d], title=HOSTILE)
    _assert_escaped(page)
    assert "<svg" in page and "<h1>" + ESCAPED + "</h1>" in page


def test_svg_is_inline_and_stable():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    def draw() -> str:
        fig = Figure(figsize=(2, 1))
        fig.add_subplot().plot([0, 1], [1, 0], label=HOSTILE)
        fig.axes[0].legend()
        return str(svg(fig))

    a, b = draw(), draw()
    assert a == b and a.startswith("<svg") and "xmlns" not in a and "<metadata>" not in a
    assert HOSTILE not in a  # matplotlib escapes its own text


def test_fmt():
    # three decimals, as the command line prints them (evalgate.core.formatting)
    assert fmt(0.123456) == "0.123" and fmt(float("inf")) == "n/a" and fmt(None) == "" and fmt(3) == "3"
    assert fmt(0.5, 2) == "0.50"


def test_no_page_is_built_in_python_strings():
    # the f-string producers are gone: no module outside the templates writes a doctype
    root = REPO / "evalgate"
    hits = [str(p.relative_to(root)) for p in root.rglob("*.py") if "<!doctype" in p.read_text().lower()]
    assert hits == []


class _Cells(HTMLParser):
    """The rows of every <table class='diag'> (cell text, class) and whether a <pre> occurs."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, str]]] = []
        self.pre, self._in_diag, self._cell = False, False, None
        self._cls = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.pre |= tag == "pre"
        if tag == "table" and a.get("class") == "diag":
            self._in_diag = True
        elif self._in_diag and tag == "tr":
            self.rows.append([])
        elif self._in_diag and tag in ("td", "th"):
            self._cell, self._cls = "", a.get("class") or ""

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append((self._cell, self._cls))
            self._cell = None
        elif tag == "table":
            self._in_diag = False


def test_diagnose_summary_is_an_html_table_that_wraps_not_a_preformatted_block(tmp_path):
    # the summary was one <pre> whose lines ran off the page; now a table (a row per signal, a column per seed) and
    # lists, with long values allowed to wrap. A loss of NaN at step 3 is the nonfinite signal failing there.
    from evalgate.diagnostics.diagnose import diagnose
    from evalgate.diagnostics.log import read_jsonl
    from evalgate.diagnostics.report import render_html

    log = tmp_path / ("a-long-directory-name-" * 6) / "m.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps(r) + "\n" for r in ({"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.9},
                                                           {"step": 3, "loss": float("nan")})))
    page = render_html([diagnose(read_jsonl(log), label="seed 1", seed=1)])
    p = _Cells()
    p.feed(page)
    assert not p.pre
    assert p.rows[0] == [("part", ""), ("signal", ""), ("seed 1", "")]
    assert p.rows[-1] == [("system", ""), ("nonfinite", ""), ("FAIL @3 loss", "fail")]
    assert ("kl_rising", "") in [r[1] for r in p.rows]  # not checkable from a loss-only log
    assert [r[2] for r in p.rows if r[1][0] == "kl_rising"] == [("n/c", "not_checkable")]
    assert "overflow-wrap:anywhere" in page
    assert f"<b>seed 1</b>: {log} (jsonl, steps 1..3)" in page and "<li>first break: nonfinite at step 3" in page


def test_watch_and_release_report_show_the_same_summary_table(tmp_path):
    from evalgate.diagnostics.diagnose import diagnose
    from evalgate.diagnostics.log import read_jsonl
    from evalgate.watch.status import render_status

    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 2.0}) + "\n" + json.dumps({"step": 2, "loss": float("inf")}) + "\n")
    log = read_jsonl(path)
    doc = {"state": "done", "protocol": "p@1", "split": "dev", "updated_at": "t", "pid": 1, "metric": "pass@1",
           "evaluating": None, "runs": []}
    p = _Cells()
    p.feed(render_status(doc, [diagnose(log, label="seed 2")], ""))
    assert not p.pre and p.rows[-1] == [("system", ""), ("nonfinite", ""), ("FAIL @2 loss", "fail")]
    tpl = (REPO / "evalgate" / "core" / "templates" / "report.html.j2").read_text()
    assert "diag_summary(diag.summary)" in tpl and "diag.table" not in tpl


_FIT_CASES = {  # title, y values, y label, figure size, dpi, tick label size
    "wide labels": ("completion length", [120000 + 37 * i for i in range(40)], "", (5.2, 2.6), 100, 9),
    "offset text": ("KL", [1e-5 * (1 + 0.01 * i) for i in range(40)], "", (5.2, 2.6), 100, 9),
    "negative, y label": ("reward", [-0.5 + 0.02 * i for i in range(40)], "mean reward", (5.2, 2.6), 100, 9),
    "long title, small": ("completion_length (completions/mean_length, a long name)",
                          [3.0 + 0.1 * i for i in range(40)], "", (4.2, 2.1), 72, 7),
}


def _fit_figure(case: str, layout: str | None):  # -> (Figure, Axes)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    title, ys, ylabel, size, dpi, labelsize = _FIT_CASES[case]
    fig = Figure(figsize=size, dpi=dpi, layout=layout)
    ax = fig.add_subplot()
    for s in range(3):
        ax.plot(range(0, 400, 10), [y * (1 + 0.1 * s) for y in ys], label=f"seed {s}")
    ax.set_title(title, fontsize=labelsize + 1)
    ax.set_xlabel("training step", fontsize=labelsize)
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=labelsize)
    ax.tick_params(labelsize=labelsize)
    ax.legend(fontsize=6, loc="best")
    return fig, ax


@pytest.mark.parametrize("case", sorted(_FIT_CASES))
def test_fit_axes_keeps_every_border_text_inside_the_figure_and_wastes_little(case: str) -> None:
    """After ``fit_axes``, a real draw (Agg) puts every tick label, axis label, offset text and the title inside
    the figure; and the axes keep at least 85% of the area matplotlib's constrained layout gives them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from evalgate.core.html import fit_axes

    fig, ax = _fit_figure(case, None)
    fit_axes(fig, ax)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    drawn = ax.get_tightbbox(renderer)  # everything the axes drew: ticks in view, labels, offsets, title
    box = fig.bbox
    assert box.x0 <= drawn.x0 and drawn.x1 <= box.x1 and box.y0 <= drawn.y0 and drawn.y1 <= box.y1, (drawn, box)
    for t in (ax.title, ax.xaxis.label, *([ax.yaxis.label] if ax.get_ylabel() else [])):
        assert t.get_window_extent(renderer).width > 0  # drawn, so inside the box above
    ref, ref_ax = _fit_figure(case, "constrained")
    FigureCanvasAgg(ref).draw()
    fit, con = ax.get_position(), ref_ax.get_position()
    assert fit.width * fit.height >= 0.85 * con.width * con.height, (fit, con)


def _held_chart(kind: str, ys: list[float], title: str, seeds: int = 3, xmax: float | None = None
                ) -> tuple[object, str]:
    """A chart on ``chart_axes(kind, ...)`` (x limits set when ``xmax``): (the figure it was drawn on, its SVG)."""
    from evalgate.core.html import chart_axes, fit_axes

    with chart_axes(kind, (4.2, 2.1), dpi=72) as (fig, ax):
        for s in range(seeds):
            ax.plot(range(0, 10 * len(ys), 10), [y * (1 + 0.1 * s) for y in ys], label=f"seed {s}")
        ax.axvline(50, linestyle=":")
        if title:
            ax.set_title(title, fontsize=8)
        if xmax is not None:
            ax.set_xlim(0, xmax)
        ax.set_xlabel("step", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="best")
        fit_axes(fig, ax)
        return fig, str(svg(fig))


def _figure_of(kind: str) -> object:
    """The figure ``chart_axes(kind, ...)`` hands out now (nothing drawn)."""
    from evalgate.core.html import chart_axes

    with chart_axes(kind, (4.2, 2.1), dpi=72) as (fig, _):
        return fig


def test_chart_axes_hands_a_kind_its_figure_back_only_when_nothing_else_could_see_it(monkeypatch) -> None:
    """The figure of a chart is held for the next chart of its kind, size and dpi in the same thread; a different
    kind, a chart inside another's ``with``, a chart that raised, changed rcParams or another thread get a new one;
    and what a held figure draws is the same bytes a new figure draws (nothing of the chart before remains: its
    lines, legend, title, x limits)."""
    import threading

    import matplotlib

    from evalgate.core import html
    from evalgate.core.html import chart_axes

    big = [120000 + 37 * i for i in range(40)]  # wide tick labels, three seeds
    small = [1e-5 * (1 + 0.01 * i) for i in range(12)]  # an offset text, one seed
    first, a = _held_chart("t1", big, "completion length", xmax=1000)
    kept = first.axes[0]  # type: ignore[attr-defined]
    assert not kept.lines and kept.get_legend() is None and kept.get_title() == ""  # the data not kept
    again, b = _held_chart("t1", small, "", seeds=1)
    assert again is first and _figure_of("t1") is first
    assert _figure_of("t2") is not first
    with chart_axes("t1", (4.2, 2.1), dpi=72) as (outer, _):
        assert outer is first and _figure_of("t1") is not outer
    with pytest.raises(RuntimeError), chart_axes("t1", (4.2, 2.1), dpi=72) as (raised, _):
        raise RuntimeError("mid-chart")
    assert _figure_of("t1") is not raised
    held = _figure_of("t1")
    with matplotlib.rc_context({"font.size": 14}):
        assert _figure_of("t1") is not held
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(_figure_of("t1")))
    thread.start()
    thread.join()
    assert other[0] is not _figure_of("t1")
    monkeypatch.setattr(html, "_take", lambda key, rc: None)  # a new figure
    assert _held_chart("t1", small, "", seeds=1)[1] == b and a != b


@pytest.mark.parametrize("case", ["long title, small", "offset text", "wide labels"])
def test_fit_axes_skips_the_title_search_only_where_matplotlib_would_leave_the_title_where_it_is(case: str) -> None:
    """``fit_axes`` tells matplotlib's draw not to search for the title's place (``_autotitlepos``) where there is no
    y offset text to dodge; the SVG is then the bytes matplotlib's own search gives."""
    from evalgate.core.html import fit_axes

    fig, ax = _fit_figure(case, None)
    fit_axes(fig, ax)
    skipped = ax._autotitlepos is False
    assert skipped == (case != "offset text")
    if skipped:
        fast = str(svg(fig))
        ax._autotitlepos = True
        assert str(svg(fig)) == fast


def test_fit_axes_remembered_text_sizes_follow_the_font_its_size_and_the_rcparams() -> None:
    """``fit_axes`` measures a text once per font, size, dpi and font rcParams: each answer equals a new Agg
    renderer's measurement of it, after the same ``FontProperties`` object changed size and under another
    ``font.sans-serif``."""
    import matplotlib
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    from evalgate.core.html import _text_points, _text_rc

    def agg(text: str, prop: FontProperties) -> tuple[float, float, float]:
        w, h, d = RendererAgg(1, 1, 72).get_text_width_height_descent(text, prop, ismath=False)
        return w, h, d  # at 72 dpi a pixel is a point

    prop = FontProperties(family="sans-serif", size=9)
    small = _text_points("training step", prop, 72, _text_rc())
    assert small == pytest.approx(agg("training step", prop))
    prop.set_size(18)
    big = _text_points("training step", prop, 72, _text_rc())
    assert big == pytest.approx(agg("training step", prop)) and big[0] > 1.5 * small[0]
    with matplotlib.rc_context({"font.sans-serif": ["DejaVu Sans Mono"]}):
        mono = _text_points("training step", prop, 72, _text_rc())
        assert mono == pytest.approx(agg("training step", prop)) and mono != big
    assert _text_points("", prop, 72, _text_rc()) == (0.0, 0.0, 0.0)
