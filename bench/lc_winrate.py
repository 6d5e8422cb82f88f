"""Benchmark: the length-controlled win rate with scikit-learn's per-fit input checks on and off (issue 43).

``length_controlled_win_rate`` fits liblinear 50 times for the cross-validation of C and ``--resamples`` times for
the bootstrap standard error, on a few dozen rows each, so scikit-learn's own checks of every call (parameter
validation, finiteness of the arrays) cost about as much as the fits. ``checks off`` runs the function as it is
(``lc_winrate._checked_inputs``: ``assume_finite=True, skip_parameter_validation=True``); ``checks on`` swaps that
context for a null one, what every call did before. Both sides alternate (and alternate which goes first) in one
process on the same preferences; the script asserts the two return the same document, then prints the median CPU
seconds per call and their ratio, with the load averages.

Usage: python bench/lc_winrate.py [--items 40] [--resamples 200] [--reps 9]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    import numpy as np

    from evalgate.rlhf import lc_winrate

    rng = np.random.default_rng(7)
    prefs = rng.uniform(0, 1, args.items).round(2).tolist()
    len_diff = rng.normal(0, 300, args.items).round().tolist()
    checked = lc_winrate._checked_inputs
    load = os.getloadavg()
    cpu: dict[str, list[float]] = {"checks off": [], "checks on": []}
    docs: dict[str, dict[str, object]] = {}
    for rep in range(args.reps):
        for side in (("checks off", "checks on") if rep % 2 else ("checks on", "checks off")):
            lc_winrate._checked_inputs = checked if side == "checks off" else contextlib.nullcontext  # type: ignore
            try:
                t = time.process_time()
                docs[side] = lc_winrate.length_controlled_win_rate(prefs, len_diff, resamples=args.resamples)
                cpu[side].append(time.process_time() - t)
            finally:
                lc_winrate._checked_inputs = checked  # type: ignore[assignment]
    assert docs["checks off"] == docs["checks on"], (docs["checks off"], docs["checks on"])
    new, old = statistics.median(cpu["checks off"]), statistics.median(cpu["checks on"])
    print(json.dumps({"items": args.items, "resamples": args.resamples, "reps": args.reps,
                      "checks_on_cpu_s": round(old, 4), "checks_off_cpu_s": round(new, 4),
                      "ratio_off_to_on": round(new / old, 3), "same_document": True,
                      "lc_win_rate": docs["checks off"]["lc_win_rate"],
                      "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
