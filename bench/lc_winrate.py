"""Benchmark: the length-controlled win rate through liblinear's wrapper directly against scikit-learn's estimators
(issue 43).

``length_controlled_win_rate`` fits liblinear 50 times for the cross-validation of C, once at the picked C and
``--resamples`` times for the bootstrap standard error, on a few dozen rows each. Three sides, one process, the
same preferences, rotating which goes first:

- ``direct``: the function as it is (``lc_winrate._liblinear``: ``sklearn.svm._liblinear.train_wrap`` with the
  arguments and seeds ``LogisticRegression`` passes, the cross-validation's folds, scores and pick done as
  ``LogisticRegressionCV`` does them);
- ``estimators``: ``_liblinear`` swapped for ``lambda: None``, so ``LogisticRegression`` and
  ``LogisticRegressionCV`` run, with scikit-learn's per-call checks off (``_checked_inputs``), what the function
  did before the direct path;
- ``estimators, checks on``: the same with ``_checked_inputs`` a null context, what it did before that.

The script asserts the three return the same document, then prints the median CPU seconds per call, the ratios
against ``estimators`` and the load averages.

Usage: python bench/lc_winrate.py [--items 40] [--resamples 200] [--reps 9] [--table NAME]

``--table`` takes one of tests/rlhf/alpacaeval_data/tables.json's tables (``alpacaeval_mixtral_concise``: 805 of
AlpacaEval's own annotations) instead of ``--items`` uniform random preferences.
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

SIDES = ("direct", "estimators", "estimators, checks on")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--table", default=None)
    args = ap.parse_args()
    import numpy as np

    from evalgate.rlhf import lc_winrate

    rng = np.random.default_rng(7)
    prefs = rng.uniform(0, 1, args.items).round(2).tolist()
    len_diff = rng.normal(0, 300, args.items).round().tolist()
    if args.table:
        tables = Path(__file__).resolve().parent.parent / "tests" / "rlhf" / "alpacaeval_data" / "tables.json"
        table = json.loads(tables.read_text(encoding="utf-8"))["tables"][args.table]
        # AlpacaEval's encoding (1 baseline, 2 model, 0 or 1.5 tie) as the preference for the model
        prefs = [0.5 if q == 0 else q - 1 for q in table["preference"]]
        len_diff = [m - b for m, b in zip(table["len_model"], table["len_baseline"], strict=True)]
    checked, direct = lc_winrate._checked_inputs, lc_winrate._liblinear
    assert direct() is not None, "the direct path failed its check against the estimators here"
    load = os.getloadavg()
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    docs: dict[str, dict[str, object]] = {}
    for rep in range(args.reps):
        for side in SIDES[rep % 3:] + SIDES[:rep % 3]:
            lc_winrate._liblinear = direct if side == "direct" else (lambda: None)  # type: ignore[assignment]
            lc_winrate._checked_inputs = contextlib.nullcontext if side.endswith("on") else checked  # type: ignore
            try:
                t = time.process_time()
                docs[side] = lc_winrate.length_controlled_win_rate(prefs, len_diff, resamples=args.resamples)
                cpu[side].append(time.process_time() - t)
            finally:
                lc_winrate._liblinear, lc_winrate._checked_inputs = direct, checked  # type: ignore[assignment]
    assert docs["direct"] == docs["estimators"] == docs["estimators, checks on"], docs
    med = {side: statistics.median(cpu[side]) for side in SIDES}
    print(json.dumps({"table": args.table, "items": len(prefs), "resamples": args.resamples, "reps": args.reps,
                      "cpu_s": {side: round(med[side], 4) for side in SIDES},
                      "ratio_direct_to_estimators": round(med["direct"] / med["estimators"], 3),
                      "ratio_checks_on_to_estimators": round(med["estimators, checks on"] / med["estimators"], 3),
                      "same_document": True, "lc_win_rate": docs["direct"]["lc_win_rate"],
                      "lc_standard_error": docs["direct"]["lc_standard_error"],
                      "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
