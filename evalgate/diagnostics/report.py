"""The diagnostics HTML report: the table, and one small SVG plot per signal with every seed's series and its
first step marked (matplotlib, drawn without a display)."""

from __future__ import annotations

import html
import io
from pathlib import Path

from evalgate.diagnostics.diagnose import Diagnosis, format_table
from evalgate.diagnostics.signals import PARTS, SIGNAL_SERIES

_MAX_POINTS = 2000  # a 100k-step log is thinned to this many points per line; the marks use the exact step


def _thin(pts: list[tuple[int, float]]) -> list[tuple[int, float]]:
    k = max(1, len(pts) // _MAX_POINTS)
    return pts[::k]


def plot_signal(signal: str, diags: list[Diagnosis]) -> str | None:
    """One small SVG plot of the series ``signal`` reads, one line per seed, a dashed line at each seed's first step
    of that signal; None when no seed logs the series."""
    canon = SIGNAL_SERIES.get(signal)
    if canon is None or not any(d.log.series.get(canon) for d in diags):
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2, 2.1), dpi=72)
    ax = fig.add_subplot()
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
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.2, top=0.88)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def render_html(diags: list[Diagnosis], title: str = "evalgate diagnose") -> str:
    """The report page: the terminal table, then per loop part each signal's plot and per-seed sentences."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto}pre{background:#f6f6f6;padding:.5em;"
             "overflow:auto}.fail{color:#b00}.warn{color:#a60}.sig{display:inline-block;vertical-align:top;"
             "width:33em;margin:.3em}</style></head><body>",
             f"<h1>{html.escape(title)}</h1><pre>{html.escape(format_table(diags))}</pre>"]
    order: list[tuple[str, str]] = []
    for d in diags:
        for f in d.findings:
            if f.signal != "nonfinite" and (f.part, f.signal) not in order:
                order.append((f.part, f.signal))
    for part in PARTS:
        sigs = [s for p, s in order if p == part]
        if not sigs:
            continue
        parts.append(f"<h2>{html.escape(part)}</h2>")
        for sig in sigs:
            parts.append(f"<div class='sig'><h3>{html.escape(sig)}</h3>")
            svg = plot_signal(sig, diags)
            if svg:
                parts.append(svg)
            parts.append("<ul>")
            for d in diags:
                hit = next((x for x in d.findings if x.signal == sig), None)
                if hit is not None:
                    at = f" at step {hit.step}" if hit.step is not None else ""
                    parts.append(f"<li class='{hit.status}'><b>{html.escape(d.label)}</b>: "
                                 f"{html.escape(hit.status)}{at}: {html.escape(hit.message)}</li>")
            parts.append("</ul></div>")
    nf = [(d, f) for d in diags for f in d.findings if f.signal == "nonfinite" and f.fired]
    if nf:
        parts.append("<h2>system: NaN / inf</h2><ul>")
        parts.extend(f"<li class='{f.status}'><b>{html.escape(d.label)}</b>: {html.escape(f.message)}</li>"
                     for d, f in nf)
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(diags: list[Diagnosis], path: str | Path) -> Path:
    """Write the HTML report atomically (parent directories created). Returns the path.

    Raises:
        BadInput: ``path`` is a directory.
    """
    from evalgate.fileio import atomic_write

    return atomic_write(path, render_html(diags))
