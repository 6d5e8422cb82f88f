"""Benchmark: the Bradley-Terry bootstrap, every resample's Newton fit at once against one fit per resample
(issue 43).

``bradley_terry.ratings`` refits the ratings on ``--resamples`` multinomial resamples of the distinct games.
``before`` is the code at fee7790, copied here: ``_fit_arrays`` per resample, its Newton method iterating until
the squared decrement is below 1e-20 or 200 iterations (a resample whose likelihood stops changing in float64 short
of that spun its line search to the 200th iteration). ``after`` is ``ratings`` as it is: the reachability of all
resamples at once, one ``_newton_many`` per group of resamples bounding the same players, stopping as well where a
step no longer lowers the likelihood. Both sides alternate (and alternate which goes first) in one process on the
same games and seed; the script prints the median CPU seconds per call, their ratio, the largest difference of a
rating or CI end (Elo points) and the load averages.

Usage: python bench/bt_bootstrap.py [--resamples 1000] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROUND_ROBIN = [("base", "A", 0.0)] * 5 + [("base", "A", 1.0)] * 2 + [("base", "A", 0.5)] * 3 \
    + [("base", "B", 0.0)] * 3 + [("base", "B", 1.0)] * 4 + [("base", "B", 0.5)] + [("A", "B", 1.0)] * 4 \
    + [("A", "B", 0.0)] * 2 + [("A", "B", 0.5)] * 2 + [("C", "base", 1.0)] + [("C", "base", 0.0)] * 6 \
    + [("C", "A", 0.0)] * 3 + [("C", "A", 1.0)] + [("C", "B", 0.5)] * 2 + [("C", "B", 0.0)]
"""tests/rlhf/test_bradley_terry.py's round robin (Arena-Hard's reference ratings)."""
STAR = [("s1", "base", 1.0)] * 50 + [("s1", "base", 0.0)] * 30 + [("s1", "base", 0.5)] * 10 \
    + [("s2", "base", 1.0)] * 30 + [("s2", "base", 0.0)] * 50 + [("s3", "base", 0.5)] * 20 \
    + [("s3", "base", 1.0)] * 60 + [("s3", "base", 0.0)] * 10
"""Arena-Hard's design: three checkpoints judged against the baseline only, 90 games each."""


def _newton_before(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``bradley_terry._newton`` at fee7790."""

    def nll(r: np.ndarray) -> float:
        d = x @ r
        return float(np.sum(w * (y * np.logaddexp(0, -d) + (1 - y) * np.logaddexp(0, d))))

    r = np.zeros(x.shape[1])
    for _ in range(200):
        p = 1 / (1 + np.exp(-(x @ r)))
        g = x.T @ (w * (p - y))
        step = np.linalg.solve(x.T @ (x * (w * p * (1 - p))[:, None]), g)
        dec = float(g @ step)
        if dec < 1e-20:
            break
        t, f0 = 1.0, nll(r)
        while nll(r - t * step) > f0 - 1e-4 * t * dec and t > 1e-10:
            t /= 2
        r = r - t * step
    return r


def _ratings_before(bt, games, anchor, resamples, seed):  # type: ignore[no-untyped-def]
    """``ratings`` at fee7790: one ``_fit_arrays`` per resample, with the Newton method of then."""
    newton = bt._newton
    bt._newton = _newton_before
    many = bt._fit_many
    bt._fit_many = lambda n, a, i, j, y, counts: np.array([bt._fit_arrays(n, a, i, j, y, c) for c in counts])
    try:
        return bt.ratings(games, anchor, resamples=resamples, seed=seed)
    finally:
        bt._newton, bt._fit_many = newton, many


def _largest_difference(one: dict, other: dict) -> float:
    worst = 0.0
    for a, b in zip(one["players"], other["players"], strict=True):
        assert a["player"] == b["player"] and a["bound"] == b["bound"]
        for key in ("rating", "low", "high"):
            assert (a[key] is None) == (b[key] is None)
            if a[key] is not None:
                worst = max(worst, abs(a[key] - b[key]))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    from evalgate.rlhf import bradley_terry as bt

    load = os.getloadavg()
    out = {}
    for name, games in (("round_robin", ROUND_ROBIN), ("star", STAR)):
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        docs = {}
        for rep in range(args.reps):
            for side in (("before", "after") if rep % 2 else ("after", "before")):
                t = time.process_time()
                if side == "before":
                    docs[side] = _ratings_before(bt, games, "base", args.resamples, seed=rep)
                else:
                    docs[side] = bt.ratings(games, "base", resamples=args.resamples, seed=rep)
                cpu[side].append(time.process_time() - t)
            diff = _largest_difference(docs["before"], docs["after"])
            out.setdefault(name, {"largest_difference_elo": 0.0})
            out[name]["largest_difference_elo"] = max(out[name]["largest_difference_elo"], diff)
        before, after = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        out[name].update({"before_cpu_s": round(before, 4), "after_cpu_s": round(after, 4),
                          "ratio_after_to_before": round(after / before, 3)})
        assert math.isfinite(out[name]["largest_difference_elo"])
    print(json.dumps({"resamples": args.resamples, "reps": args.reps, **out, "load_before": load,
                      "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
