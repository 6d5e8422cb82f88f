"""The watch's live status page (``status.html``) and its dev-metric chart."""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any

from evalgate.diagnostics.diagnose import Diagnosis, format_table


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
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def render_status(doc: dict[str, Any], diags: list[Diagnosis], chart: str) -> str:
    """The live status page: refreshes itself every 5 s while watching; what is evaluated now, the dev metric per
    step per run, each run's checkpoints and STOP reason, and the diagnostics table."""
    e = html.escape
    refresh = "<meta http-equiv='refresh' content='5'>" if doc["state"] == "watching" else ""
    now = doc["evaluating"]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>{refresh}<title>evalgate watch</title><style>"
             "body{font-family:sans-serif;max-width:70em;margin:1em auto}td,th{padding:.2em .6em;text-align:left}"
             ".stop{background:#fee;border:1px solid #b00;padding:.5em}.done{color:#060}.failed,.skipped{color:#b00}"
             "pre{background:#f6f6f6;padding:.5em;overflow:auto}</style></head><body>",
             f"<h1>evalgate watch: {e(doc['protocol'])} on {e(doc['split'])}</h1>",
             f"<p>state <b>{e(doc['state'])}</b>, updated {e(doc['updated_at'])} (pid {doc['pid']}); evaluating now: "
             f"<b>{e(now['path']) if now else 'nothing'}</b></p>", chart]
    for r in doc["runs"]:
        parts.append(f"<h2>{e(r['run_dir'])}</h2>")
        if not r["exists"]:
            parts.append("<p>does not exist yet; waiting for it</p>")
        if r["stop"]:
            parts.append(f"<p class='stop'>STOP: {e(r['stop']['reason'])}</p>")
        parts.append(f"<table><tr><th>step</th><th>status</th><th>dev {e(doc['metric'])}</th><th>run</th>"
                     "<th>note</th></tr>")
        for c in r["checkpoints"]:
            m = "" if c["metric"] is None or not math.isfinite(c["metric"]) else f"{c['metric']:.4f}"
            parts.append(f"<tr class='{e(c['status'])}'><td>{c['step']}</td><td>{e(c['status'])}</td><td>{m}</td>"
                         f"<td>{e(c['run_id'] or '')}</td><td>{e(c['message'] or '')}</td></tr>")
        parts.append("</table>")
    if diags:
        parts.append(f"<h2>diagnostics</h2><pre>{e(format_table(diags))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
