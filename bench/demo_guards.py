"""What a guard would cost the demo (issue 45): each candidate benchmark's protocol on the real SmolLM2-135M-Instruct
(the base GGUF) and on the demo's fine-tuned checkpoints, on the first N items of the benchmark's private tier
(``splits.tiering.partition``, the split a guard decides on), CPU seconds and wall per evaluation, the metric, and
the paired per-item difference from the base model.

Usage (from a checkout with .venv and the demo's training cached, i.e. after one ``make demo``; the data in
``../shared/data`` or ``$EVALGATE_DATA``):
    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python bench/demo_guards.py [--n 20] [--only xstest-unsafe,...]
Writes nothing outside a temporary workspace; prints one line per (benchmark, checkpoint) and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CANDIDATES = {  # benchmark -> (dataset module:attr, data file under shared/data, protocol)
    "xstest-unsafe": ("evalgate.datasets.xstest:UNSAFE", "xstest/xstest_prompts.csv", "protocols/xstest-unsafe.yaml"),
    "xstest-safe": ("evalgate.datasets.xstest:SAFE", "xstest/xstest_prompts.csv", "protocols/xstest-safe.yaml"),
    "mmlu-pro": ("evalgate.datasets.mmlu_pro:DATASET", "mmlu-pro/test.jsonl", "protocols/mmlu-pro-loglik.yaml"),
    "ifeval": ("evalgate.datasets.ifeval:DATASET", "ifeval/input_data.jsonl", "protocols/ifeval.yaml"),
}


def _data() -> Path:
    env = os.environ.get("EVALGATE_DATA")
    if env:
        return Path(env)
    return next((p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
                REPO.parent / "shared" / "data")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20, help="items per benchmark (first N of its private tier)")
    ap.add_argument("--only", default=",".join(CANDIDATES))
    ap.add_argument("--steps", default="12", help="checkpoint steps of each seed to measure (comma list; '' for the "
                    "base model only)")
    ap.add_argument("--checkpoints", default="", help="more checkpoint folders to measure (comma list)")
    ap.add_argument("--show", type=int, default=0, help="print the first K completions of each run on stderr")
    ap.add_argument("--no-base", action="store_true", help="leave the base model out (measured before)")
    args = ap.parse_args()

    import importlib

    from evalgate.checkpoints.identity import file_sha256
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf
    from evalgate.demo.train import TRAIN_CONFIG, ensure_training
    from evalgate.splits.tiering import partition
    from evalgate.splits.write import write_split
    from evalgate.workspace import Workspace

    gguf = smollm2_gguf()
    cks: dict[str, Path] = {} if args.no_base else {"base": gguf}
    cks |= {p: Path(p) for p in args.checkpoints.split(",") if p}
    if args.steps:
        train = ensure_training(resolve_checkpoint(gguf).model_dir, file_sha256(gguf))
        cks |= {f"seed {s} step {st}": train / f"seed-{s}" / f"checkpoint-{st}"
                for s in TRAIN_CONFIG["seeds"] for st in args.steps.split(",")}
    env = Workspace.from_env().env
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.of(env.replace(home=Path(tmp), splits=Path(tmp) / "splits", models=env.models_dir))
        for name in args.only.split(","):
            mod, attr = CANDIDATES[name][0].split(":")
            ds = getattr(importlib.import_module(mod), attr)
            items, prov = ds.load(_data() / CANDIDATES[name][1])
            by_id = {i["id"]: i for i in items}
            ids = partition(list(by_id))["private"][:args.n]
            split = f"{name}-bench"
            write_split(split, "dev", [by_id[i] for i in ids], prov, env=ws.env)
            proto = REPO / CANDIDATES[name][2]
            ws.freeze(proto)
            scores: dict[str, dict[str, float]] = {}
            for label, ck in cks.items():
                c0, t0 = _cpu(), time.perf_counter()
                run = ws.evaluate(proto, ck, split, purpose="bench").as_dict()
                cpu, wall = _cpu() - c0, time.perf_counter() - t0
                smp = ws.samples(run["run_id"]).as_dict()["samples"]
                scores[label] = {s["item_id"]: s["score"] for s in smp}
                toks = [s["completion_tokens"] or 0 for s in smp]
                diff = (sum(scores[label][i] - scores["base"][i] for i in scores[label]) / len(scores[label])
                        if label != "base" and "base" in scores else 0.0)
                row = {"benchmark": name, "checkpoint": label, "n": len(smp), "cpu_s": round(cpu, 1),
                       "wall_s": round(wall, 1), "pass@1": run["metrics"]["pass@1"],
                       "mean_completion_tokens": round(sum(toks) / max(len(toks), 1), 1),
                       "changed_items": sum(scores[label][i] != scores.get("base", scores[label])[i]
                                            for i in scores[label]),
                       "mean_diff_vs_base": round(diff, 4)}
                for smp_row in smp[:args.show]:
                    print(f"  [{label}] {smp_row['status']}: {smp_row['completion']!r}", file=sys.stderr)
                out.append(row)
                print(json.dumps(row), flush=True)
    print(json.dumps({"load": os.getloadavg(), "rows": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
