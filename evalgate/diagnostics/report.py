"""The diagnostics HTML report: the table, and one small SVG plot per signal with every seed's series and its
first step marked (matplotlib, drawn without a display)."""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup

from evalgate.core.html import chart_axes, fit_axes, render, svg
from evalgate.diagnostics.diagnose import Diagnosis, summary
from evalgate.diagnostics.signals import PARTS, SIGNAL_SERIES

_MAX_POINTS = 2000  # a 100k-step log is thinned to this many points per line; the marks use the exact step


def _thin(pts: list[tuple[int, float]]) -> list[tuple[int, float]]:
    k = max(1, len(pts) // _MAX_POINTS)
    return pts[::k]


def plot_signal(signal: str, diags: list[Diagnosis]) -> Markup | None:
    """One small SVG plot of the series ``signal`` reads, one line per seed, a dashed line at each seed's first step
    of that signal; None when no seed logs the series."""
    canon = SIGNAL_SERIES.get(signal)
    if canon is None or not any(d.log.series.get(canon) for d in diags):
        return None
    with chart_axes("diagnose", (4.2, 2.1), dpi=72) as (fig, ax):
        for i, d in enumerate(diags):
            pts = d.log.series.get(canon) or []
            if not pts:
                continue
            color = f"C{i % 10}"
            xs, ys = zip(*_thin(pts), strict=True)
            f = next((x for x in d.findings if x.signal == signal and x.fired and x.step is not None), None)
            ax.plot(xs, ys, color=color, linewidth=1, label=f"{d.label}: {f.status} @{f.step}" if f else d.label)
            if f is not None and f.step is not None:
                ax.axvline(f.step, color=color, linestyle="--", linewidth=1)
        ax.set_title(f"{signal} ({d.log.used.get(canon, canon)})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("step", fontsize=7)
        ax.legend(fontsize=6, loc="best")
        fit_axes(fig, ax)
        return svg(fig)


def render_html(diags: list[Diagnosis], title: str = "evalgate diagnose") -> str:
    """The report page (``templates/diagnose.html.j2``): the summary (``diagnose.summary``) as an HTML table and
    lists that wrap, then per loop part each signal's plot
    and per-seed sentences, then the NaN / inf findings. Every value is HTML-escaped."""
    order: list[tuple[str, str]] = []
    for d in diags:
        for f in d.findings:
            if f.signal != "nonfinite" and (f.part, f.signal) not in order:
                order.append((f.part, f.signal))
    parts = []
    for part in PARTS:
        signals = []
        for sig in (s for p, s in order if p == part):
            hits = [{"label": d.label, "status": h.status, "step": h.step, "message": h.message}
                    for d in diags if (h := next((x for x in d.findings if x.signal == sig), None)) is not None]
            signals.append({"signal": sig, "svg": plot_signal(sig, diags), "hits": hits})
        if signals:
            parts.append({"name": part, "signals": signals})
    nonfinite = [{"label": d.label, "status": f.status, "message": f.message}
                 for d in diags for f in d.findings if f.signal == "nonfinite" and f.fired]
    return render("diagnose.html.j2", title=title, summary=summary(diags), parts=parts, nonfinite=nonfinite)


def write_report(diags: list[Diagnosis], path: str | Path) -> Path:
    """Write the HTML report atomically (parent directories created). Returns the path.

    Raises:
        BadInput: ``path`` is a directory.
    """
    from evalgate.core.fileio import atomic_write

    return atomic_write(path, render_html(diags))
