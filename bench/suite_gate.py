"""Benchmark: one suite gate over N members against the N members' single gates on the same work (issue 45).

The store holds, per member, a protocol, a dev and a private split of ``--items`` items, and runs of the baseline
and of ``--steps`` checkpoints of 2 training seeds on both splits (stored runs, no model: the gates reuse them with
``evaluate_decision=False``; their reads are still reserved, logged and counted). Member 0 is a target, the others
guards (all take part in selection). Each arm starts from its own copy of the same store file (so the private
budgets and the cached decisions start equal):

- singles: ``run_gate`` on each member's own policy (``load_suite(...).members[i].policy``, what the member is as
  a single gate), one after the other;
- suite: ``run_suite`` on the suite.

Prints one JSON document: per N, the median over ``--reps`` of each arm's wall seconds and CPU seconds (process
time) and the ratios suite / singles.

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python bench/suite_gate.py [--members 1,2,4,8] [--reps 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _scores(key: str, p: float, n: int) -> list[int]:
    return [int(int(hashlib.sha256(f"{key}:{i}".encode()).hexdigest()[:8], 16) % 1000 < p * 1000) for i in range(n)]


def build(root: Path, n_members: int, n_items: int, steps: int) -> tuple[Path, Path]:
    """Splits, checkpoint folders, runs and the suite file for ``n_members`` members; returns (store file, suite)."""
    import yaml

    from evalgate.splits import write_split
    from evalgate.store import Store
    from tests.gate.test_suite import _add_run  # the suite tests' stored run (protocol hash name * 32)

    store_path = root / "store.duckdb"
    store = Store(store_path)
    base = root / "ck" / "base"
    base.mkdir(parents=True)
    members = []
    with store.session():
        for k in range(n_members):
            p = f"m{k}"
            items = [{"id": f"q{i}", "question": f"{p} {i}", "answer": str(i)} for i in range(n_items)]
            write_split(f"{p}-dev", "dev", items, {"source": "bench"})
            write_split(f"{p}-private", "private", items, {"source": "bench"})
            store.record_protocol(p, "1", p * 32, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
            _add_run(store, p, f"{p}-dev-base", "dbase", base, f"{p}-dev", "dev", None, None,
                     _scores(f"{p}-dev-base", 0.5, n_items))
            _add_run(store, p, f"{p}-dec-base", "dbase", base, f"{p}-private", "private", None, None,
                     _scores(f"{p}-dec-base", 0.5, n_items))
            for seed in (1, 2):
                for s in range(1, steps + 1):
                    ck = root / "ck" / f"seed-{seed}" / f"checkpoint-{s}"
                    ck.mkdir(parents=True, exist_ok=True)
                    # the target rises with the step; the guards stay near the baseline
                    value = 0.5 + (0.3 * s / steps if k == 0 else 0.0)
                    for split, tier in ((f"{p}-dev", "dev"), (f"{p}-private", "private")):
                        rid = f"{p}-{tier}-{seed}-{s}"
                        _add_run(store, p, rid, f"d{seed}-{s}", ck, split, tier, seed, s, _scores(rid, value, n_items))
            members.append({"name": p, "protocol": f"{p}@1", "selection_split": f"{p}-dev",
                            "decision_split": f"{p}-private",
                            **({"role": "target", "min_improvement": 0.0} if k == 0
                               else {"role": "guard", "margin": 0.1})})
    suite = root / "gates" / "suite.yaml"
    suite.parent.mkdir()
    suite.write_text(yaml.safe_dump({
        "name": "bench", "baseline": {"checkpoint": str(base)}, "bootstrap_resamples": 2000,
        "selection": {"collapse_drop": None},
        # no training logs and no reward in a stored run: those rules are not checkable, which is accepted here
        "rules": {"min_seeds": 2, "confidence": 0.95, "reward_hacking": False, "accept_not_checkable": True},
        "members": members}, sort_keys=False))
    return store_path, suite


def _timed(fn: Any, *args: Any) -> tuple[float, float, Any]:
    c, w = time.process_time(), time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - w, time.process_time() - c, out


def _singles(suite: Any, store: Any) -> list[bool]:
    """Each member's own policy as a single gate, one after the other."""
    from evalgate.gate import run_gate

    return [run_gate(m.policy, store, "bench", evaluate_decision=False).passed for m in suite.members]


def _suite(suite: Any, store: Any) -> list[bool]:
    from evalgate.gate.suite_run import run_suite

    return [m.passed for m in run_suite(suite, store, "bench", evaluate_decision=False).members]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", default="1,2,4,8")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-suite-bench-"))
    os.environ.update(EVALGATE_HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "config"))
    from evalgate.gate.suite import load_suite
    from evalgate.store import Store

    rows = []
    try:
        for n in map(int, args.members.split(",")):
            root = tmp / f"n{n}"
            os.environ["EVALGATE_SPLITS"] = str(root / "splits")
            store_file, suite_file = build(root, n, args.items, args.steps)
            suite = load_suite(suite_file)
            times: dict[str, list[tuple[float, float]]] = {"singles": [], "suite": []}
            verdicts: dict[str, Any] = {}
            for rep in range(args.reps):
                for arm in ("singles", "suite") if rep % 2 == 0 else ("suite", "singles"):  # alternate the order
                    copy = root / f"{arm}-{rep}.duckdb"
                    shutil.copy(store_file, copy)
                    wall, cpu, passed = _timed(_singles if arm == "singles" else _suite, suite, Store(copy))
                    verdicts[arm] = passed
                    times[arm].append((wall, cpu))
            med = {arm: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
                   for arm, t in times.items()}
            row = {"members": n, "singles_wall_s": round(med["singles"][0], 3),
                   "singles_cpu_s": round(med["singles"][1], 3), "suite_wall_s": round(med["suite"][0], 3),
                   "suite_cpu_s": round(med["suite"][1], 3),
                   "wall_ratio": round(med["suite"][0] / med["singles"][0], 3),
                   "cpu_ratio": round(med["suite"][1] / med["singles"][1], 3), "verdicts": verdicts}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"items": args.items, "steps": args.steps, "seeds": 2, "reps": args.reps,
                      "load": os.getloadavg(), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
