"""Benchmark: one release-report chart laid out by ``evalgate.core.html.fit_axes`` against ``layout="constrained"``
(issue 31, the fast lane; also every report: a gate with training logs draws up to seven charts, diagnose one per
fired signal).

Both sides build the same figure as ``report.charts`` does (5.2 x 2.6 in, three seeds' lines of 80 points, a
marker line, grid, title, x label, legend at "best") and write it to SVG through ``evalgate.core.html.svg``,
alternating;
the y values run to six digits so the tick labels are wide. Prints the median milliseconds of each and their ratio,
with the load averages, and the axes' share of the figure each layout left (fit_axes should leave about as much).

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evalgate.core.html import fit_axes, svg

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "evalgate"})

    def chart(layout: str) -> float:
        fig, ax = plt.subplots(figsize=(5.2, 2.6), layout="constrained" if layout == "constrained" else None)
        for s in range(3):
            ax.plot(range(0, 400, 5), [1000 * s + 120000 + 37 * i for i in range(80)], linewidth=1.2,
                    label=f"seed {s}")
        ax.axvline(100, linestyle=":")
        ax.set_xlabel("training step")
        ax.set_title("completion length")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        if layout == "fit_axes":
            fit_axes(fig, ax)
        svg(fig)
        pos = ax.get_position()
        plt.close(fig)
        return pos.width * pos.height

    load = os.getloadavg()
    times: dict[str, list[float]] = {"constrained": [], "fit_axes": []}
    area: dict[str, float] = {}
    for rep in range(args.reps):
        for side in (("constrained", "fit_axes") if rep % 2 else ("fit_axes", "constrained")):
            t = time.perf_counter()
            area[side] = chart(side)
            times[side].append(time.perf_counter() - t)
    c, f = statistics.median(times["constrained"]), statistics.median(times["fit_axes"])
    print(json.dumps({"constrained_ms": round(c * 1e3, 1), "fit_axes_ms": round(f * 1e3, 1),
                      "ratio_fit_to_constrained": round(f / c, 3),
                      "axes_area_share": {k: round(v, 3) for k, v in area.items()}, "reps": args.reps,
                      "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
