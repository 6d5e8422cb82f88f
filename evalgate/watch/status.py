"""The watch's live status page (``status.html``) and its dev-metric chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup

from evalgate.core.html import render, svg
from evalgate.diagnostics.diagnose import Diagnosis, summary


def metric_svg(series: list[tuple[str, list[tuple[int, float]]]], metric: str) -> str:
    """Dev metric per step, one line per run directory (seed), as inline SVG; "" when nothing is evaluated yet."""
    if not any(p for _, p in series):
        return ""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 2.6), dpi=72)
    ax = fig.add_subplot()
    for name, pts in series:
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=Path(name).name)
    ax.set_xlabel("step")
    ax.set_ylabel(f"dev {metric}")
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.2, top=0.95)
    return svg(fig)


def render_status(doc: dict[str, Any], diags: list[Diagnosis], chart: str) -> str:
    """The live status page (``templates/watch.html.j2``): refreshes itself every 5 s while watching; what is
    evaluated now, the dev metric per step per run (``chart``, inline SVG from ``metric_svg``), each run's
    checkpoints and STOP reason, and the diagnostics table. Every value of ``doc`` is HTML-escaped."""
    return render("watch.html.j2", doc=doc, chart=Markup(chart), summary=summary(diags) if diags else None)
