"""Benchmark: one release-report chart three ways (issue 31, then issue 43; the fast lane and every report: a gate
with training logs draws up to seven charts, diagnose one per fired signal): laid out by ``layout="constrained"``
on a new pyplot figure; laid out by ``fit_axes`` as it was before session 20 (``_fit_axes_before``, a copy: every
text measured anew, matplotlib's search for the title's place left on) on a new pyplot figure (``report.charts``
before session 20); and by ``evalgate.core.html.fit_axes`` (text sizes remembered, the title search skipped where
it would change nothing) on the figure ``evalgate.core.html.chart_axes`` held from the chart before
(``report.charts`` now).

Every side builds the same figure as ``report.charts`` does (5.2 x 2.6 in, three seeds' lines of 80 points, a
marker line, grid, title, x label, legend at "best") and writes it to SVG through ``evalgate.core.html.svg``,
the sides alternating; the charts alternate between two series (six-digit y values, so wide tick labels, and
values near 0.01), so a held figure draws a different chart each time, as in a report. The held side's SVG is
asserted equal, byte for byte, to the fit_axes side's. Prints the median milliseconds (wall and CPU) of
each, the ratios, a seven-chart report's CPU milliseconds either way (the first chart on a new figure), the load
averages, and the axes' share of the figure each layout left.

Usage: python bench/charts.py [--reps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SERIES = ([120000 + 37 * i for i in range(80)], [0.01 + 0.0002 * i for i in range(80)])


def _fit_axes_before(fig, ax, pad: float = 5.0) -> None:  # noqa: ANN001
    """``evalgate.core.html.fit_axes`` at 41ff9cc (session 19), the baseline."""
    import matplotlib
    from matplotlib.backends.backend_agg import RendererAgg

    from evalgate.core.html import _tick_labels

    def points(text: str, prop) -> tuple[float, float]:  # noqa: ANN001
        if not text:
            return 0.0, 0.0
        w, h, _ = renderer.get_text_width_height_descent(text, prop, ismath="$" in text)
        return w * 72 / renderer.dpi, h * 72 / renderer.dpi

    rc = matplotlib.rcParams
    renderer = RendererAgg(1, 1, fig.dpi)
    ylabels, yprop = _tick_labels(ax.yaxis)
    xlabels, xprop = _tick_labels(ax.xaxis)
    ytick = rc["ytick.major.size"] + rc["ytick.major.pad"]
    xtick = rc["xtick.major.size"] + rc["xtick.major.pad"]
    label_w = max((points(t, yprop)[0] for t in ylabels), default=0.0)
    tick_h = max((points(t, xprop)[1] for t in xlabels), default=0.0)
    last_w = points(xlabels[-1], xprop)[0] if xlabels else 0.0
    ylab_w = points(ax.yaxis.label.get_text(), ax.yaxis.label.get_fontproperties())[1]
    xlab_h = points(ax.xaxis.label.get_text(), ax.xaxis.label.get_fontproperties())[1]
    title_h = points(ax.title.get_text(), ax.title.get_fontproperties())[1]
    offset_h = max(points(a.get_major_formatter().get_offset(), a.offsetText.get_fontproperties())[1]
                   for a in (ax.yaxis, ax.xaxis))
    labelpad = rc["axes.labelpad"]
    left = pad + label_w + ytick + (ylab_w + labelpad if ylab_w else 0.0)
    bottom = pad + tick_h + xtick + (xlab_h + labelpad if xlab_h else 0.0)
    top = pad + max(title_h + rc["axes.titlepad"] if title_h else 0.0, offset_h + labelpad)
    right = pad + last_w / 2
    w, h = (v * 72 for v in fig.get_size_inches())
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evalgate.core.html import chart_axes, fit_axes, svg

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "evalgate"})

    def draw(fig, ax, ys: list[float], layout: str) -> tuple[str, float]:  # noqa: ANN001
        for s in range(3):
            ax.plot(range(0, 400, 5), [y * (1 + 0.01 * s) for y in ys], linewidth=1.2, label=f"seed {s}")
        ax.axvline(100, linestyle=":")
        ax.set_xlabel("training step")
        ax.set_title("completion length")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        if layout == "fit_axes":
            _fit_axes_before(fig, ax)
        elif layout == "held":
            fit_axes(fig, ax)
        text = str(svg(fig))
        pos = ax.get_position()
        return text, pos.width * pos.height

    def chart(side: str, ys: list[float]) -> tuple[str, float]:
        if side == "held":
            with chart_axes("bench", (5.2, 2.6)) as (fig, ax):
                return draw(fig, ax, ys, side)
        fig, ax = plt.subplots(figsize=(5.2, 2.6), layout="constrained" if side == "constrained" else None)
        out = draw(fig, ax, ys, side)
        plt.close(fig)
        return out

    load = os.getloadavg()
    sides = ("constrained", "fit_axes", "held")
    wall: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    area: dict[str, float] = {}
    for rep in range(2 * args.reps):
        ys = SERIES[rep % 2]
        svgs = {}
        for side in (sides if rep % 2 else sides[::-1]):
            t, c = time.perf_counter(), time.process_time()
            svgs[side], area[side] = chart(side, ys)
            wall[side].append(time.perf_counter() - t)
            cpu[side].append(time.process_time() - c)
        assert svgs["held"] == svgs["fit_axes"], "a held figure drew other bytes than a new one"
    ms = {k: {"wall_ms": round(statistics.median(wall[k]) * 1e3, 1),
              "cpu_ms": round(statistics.median(cpu[k]) * 1e3, 1)} for k in sides}
    new, held = statistics.median(cpu["fit_axes"]), statistics.median(cpu["held"])
    print(json.dumps({"median": ms,
                      "cpu_ratio_fit_to_constrained": round(new / statistics.median(cpu["constrained"]), 3),
                      "cpu_ratio_held_to_fit": round(held / new, 3),
                      "report_of_7_cpu_ms": {"new_figures": round(7 * new * 1e3, 1),
                                             "held": round((new + 6 * held) * 1e3, 1)},
                      "axes_area_share": {k: round(v, 3) for k, v in area.items()}, "charts_per_side": 2 * args.reps,
                      "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
