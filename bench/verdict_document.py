"""A gate verdict written as its stored document (``gate.history.dump_verdict``, once per gate): immutable leaves
returned as they are against ``copy.deepcopy`` of each (the code before: ``gate.results._ATOMS`` emptied), in the
same run.

The verdict: the test fixture's gate (``tests/gate_fixtures.py``: three seeds, their checkpoints' dev and decision
runs, a baseline), decided in a temporary home. Both sides must give equal documents (checked).

Usage: ``python bench/verdict_document.py [--calls 200] [--reps 5]``. Prints one JSON document with the median CPU
seconds of ``calls`` dumps on each side and their ratio. The machine may be shared: quote the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def fixture_verdict(root: Path) -> Any:
    os.environ.update(EVALGATE_HOME=str(root / "home"), EVALGATE_SPLITS=str(root / "splits"),
                      XDG_CONFIG_HOME=str(root / "config"), EVALGATE_ACTOR="bench")
    import yaml

    from evalgate.gate import load_policy, run_gate
    from tests import gate_fixtures as fx

    built = fx.build(root / "runs")
    policy = root / "gate.yaml"
    policy.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_improvement=0.0)))
    return run_gate(load_policy(policy), built["store"], evaluate_decision=False)


def cpu(fn: Any, calls: int) -> float:
    t = time.process_time()
    for _ in range(calls):
        fn()
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    from evalgate.gate import results
    from evalgate.gate.history import dump_verdict

    atoms = results._ATOMS
    with tempfile.TemporaryDirectory() as tmp:
        verdict = fixture_verdict(Path(tmp))
    now_doc = dump_verdict(verdict)
    results._ATOMS = ()
    if dump_verdict(verdict) != now_doc:
        raise SystemExit("the documents differ")
    before, now = [], []
    for _ in range(args.reps):
        results._ATOMS = ()
        before.append(cpu(lambda: dump_verdict(verdict), args.calls))
        results._ATOMS = atoms
        now.append(cpu(lambda: dump_verdict(verdict), args.calls))
    b, n = statistics.median(before), statistics.median(now)
    print(json.dumps({"python": platform.python_version(), "load_average": os.getloadavg()[0], "calls": args.calls,
                      "before_s": round(b, 3), "now_s": round(n, 3), "ratio": round(b / n, 2),
                      "before_ms_per_dump": round(1000 * b / args.calls, 2),
                      "now_ms_per_dump": round(1000 * n / args.calls, 2)}, indent=1))


if __name__ == "__main__":
    main()
