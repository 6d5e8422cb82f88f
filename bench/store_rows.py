"""Benchmark: what typing the store's rows costs a reader (issue 43, "typed results instead of dicts").

A run of ``--samples`` samples (each with its generation and prompt) and as many runs rows sit in a memory store.
Timed, in one process, alternating: the reader as it returns now (``Store._samples``, ``Store.runs``: typed rows,
``evalgate.store.rows``), and the rows it returns turned into each candidate row type from the dicts the SQL gives
(``dicts``: nothing more, the reader before it was typed; ``dataclass``: the frozen dataclasses the store uses;
``pydantic``: an equivalent ``core.results.Result`` model, validated). Prints each reader's median milliseconds and
each row type's construction as a share of the typed reader's time, with the load averages.

Usage: python bench/store_rows.py [--samples 5000] [--reps 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _fill(store: Any, n: int) -> None:
    """One complete run of ``n`` samples with generations and prompts, and ``n`` runs rows."""
    items = [f"q{i:05d}" for i in range(n)]
    run = {"protocol_name": "p", "protocol_version": "1", "protocol_hash": "h", "checkpoint_digest": "ck",
           "checkpoint_path": "/ck", "split": "dev", "tier": "dev", "split_sha256": "x", "sampling_seed": 1,
           "backend": "hf", "settings_sha256": ""}
    with store.session():
        for i in range(n):
            store.create_run({"run_id": f"r{i:05d}", **run, "train_seed": 1, "step": i})
        prompts = {f"p{i}": f"prompt {i} " * 20 for i in items}
        store.put_generations("ck", "h", [{"item_id": i, "sample_index": 0, "seed": 7, "prompt_sha256": f"p{i}",
                                           "text": f"completion {i} " * 40, "completion_tokens": 80,
                                           "finish_reason": "stop"} for i in items], prompts)
        store.finish_run({"run_id": "r00000", "metrics": {"pass@1": 0.5, "pass@1_stderr": 0.1},
                          "counts": {"items": n}, "wall_s": 1.0},
                         [{"item_id": i, "sample_index": 0, "seed": 7, "score": 1.0, "status": "scored",
                           "cached": False, "extracted": "42", "behavior": {"repetition": 0.1}} for i in items])


def _pydantic_models() -> dict[str, type]:
    """Pydantic ``Result`` models with the row types' fields (what a pydantic row would cost)."""
    from dataclasses import fields

    from pydantic import create_model

    from evalgate.core.results import Metrics, Result
    from evalgate.store.rows import RunRow, SampleRow

    out = {}
    for cls in (SampleRow, RunRow):
        spec = {f.name: ((Metrics | None) if f.name == "metrics" else Any, ...) for f in fields(cls)}
        out[cls.__name__] = create_model(f"Pydantic{cls.__name__}", __base__=Result, **spec)  # type: ignore[call-overload]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    from evalgate.store import Database, Store
    from evalgate.store.rows import RunRow, SampleRow

    store = Store(Database(":memory:"))
    _fill(store, args.samples)
    models = _pydantic_models()
    readers = {"samples": (lambda: store._samples("r00000"), SampleRow),
               "runs": (lambda: store.runs(), RunRow)}
    load = os.getloadavg()
    for name, (read, cls) in readers.items():
        dicts = [r.as_dict() for r in read()]
        model = models[cls.__name__]
        build = {"dataclass": lambda: cls.from_dicts(dicts),  # noqa: B023
                 "pydantic": lambda: [model.model_validate(d) for d in dicts],  # noqa: B023
                 "dicts": lambda: [dict(d) for d in dicts]}  # noqa: B023
        times: dict[str, list[float]] = {"reader": [], **{k: [] for k in build}}
        for rep in range(args.reps):
            order = ["reader", *build] if rep % 2 else [*reversed(build), "reader"]
            for side in order:
                t = time.perf_counter()
                read() if side == "reader" else build[side]()
                times[side].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(json.dumps({"reader": name, "rows": len(dicts), "reader_ms": round(med["reader"] * 1e3, 2),
                          **{f"{k}_ms": round(med[k] * 1e3, 2) for k in build},
                          **{f"{k}_share_of_reader": round(med[k] / med["reader"], 3) for k in build}}))
    print(json.dumps({"reps": args.reps, "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
