"""Is the sweep driver's single write path the bottleneck? A simulation of a 10,000-unit sweep (docs/SCALING.md).

Measured here, with the real store (DuckDB under its file lock) in a temporary directory: the driver's cost to
store one streamed chunk of completions (``Store.put_generations``) as the sweep does it now (each call opens,
commits and closes the database) and inside one held session (``Store.session``: one open connection, one
transaction per call), and with one multi-row INSERT per chunk instead of ``executemany`` (what would replace it).
The driver's fixed work per unit (prepare, log the read, create the run, score, store the
samples) is given with ``--driver-unit-s`` (measured by bench/sweep_vs_runs.py: a unit's wall minus its generate
time), plus ``--samples`` rows stored at the measured per-row cost of a chunk write.

Then a discrete-event simulation: ``--units`` units on N workers (GPUs); a unit's worker loads the model
(``--load-s``) and generates (``--generate-s``), its chunks finishing evenly over the generation; the driver is one
FIFO server for every store write (chunks, the unit's fixed work) and the unit ends when its last write is done.
Reports, per N, the makespan, the driver's busy fraction and the ideal makespan (workers only).

Usage: python bench/sweep_sim.py [--units 10000] [--samples 2000] [--chunk-samples 16] [--load-s 40]
       [--generate-s 240] --driver-unit-s S [--workers 8,64,256,1024]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def measure_chunk_write(chunk_samples: int, reps: int = 30) -> dict[str, float]:
    """Median seconds to store one chunk of ``chunk_samples`` completions (~300 characters each): per call (the
    sweep now) and within one held session."""
    sys.path.insert(0, str(REPO))
    from evalgate.store import Store

    store = Store(Path(tempfile.mkdtemp(prefix="evalgate-sim-")) / "sim.duckdb")
    text = "The answer is 42. " * 17

    def rows(k: int) -> list[dict]:
        return [{"item_id": f"i{k}-{j}", "sample_index": 0, "seed": k * 1000 + j, "prompt_sha256": f"p{k}",
                 "text": text, "prompt_tokens": 80, "completion_tokens": 75, "finish_reason": "stop"}
                for j in range(chunk_samples)]

    per_call, in_session = [], []
    for k in range(reps):
        t0 = time.perf_counter()
        store.put_generations("c" * 64, "p" * 64, rows(k), {f"p{k}": "prompt " * 40}, "s" * 64, "run")
        per_call.append(time.perf_counter() - t0)
    with store.session():
        for k in range(reps, 2 * reps):
            t0 = time.perf_counter()
            store.put_generations("c" * 64, "p" * 64, rows(k), {f"p{k}": "prompt " * 40}, "s" * 64, "run")
            in_session.append(time.perf_counter() - t0)
    # what would replace executemany: one multi-row INSERT per chunk (the same rows and conflict rule)
    from evalgate.core.environment import utc_now as now

    bulk = []
    with store.session():
        for k in range(2 * reps, 3 * reps):
            rs = rows(k)
            t0 = time.perf_counter()
            with store.connect() as con:
                con.execute("INSERT INTO generations VALUES " + ", ".join(["(" + ", ".join("?" * 13) + ")"] * len(rs))
                            + " ON CONFLICT DO NOTHING",
                            [v for r in rs for v in ("c" * 64, "p" * 64, r["item_id"], r["sample_index"], r["seed"],
                                                     r["prompt_sha256"], r["text"], r["prompt_tokens"],
                                                     r["completion_tokens"], r["finish_reason"], now(), "s" * 64,
                                                     "run")])
            bulk.append(time.perf_counter() - t0)
    return {"per_call_s": statistics.median(per_call), "in_session_s": statistics.median(in_session),
            "multi_row_insert_s": statistics.median(bulk)}


def simulate(units: int, workers: int, load_s: float, generate_s: float, chunks: int, chunk_write_s: float,
             unit_write_s: float) -> dict[str, float]:
    """Makespan and driver busy fraction of ``units`` units on ``workers`` workers with one FIFO driver writer."""
    events: list[tuple[float, int, str, int]] = []  # (time, seq, kind, unit)
    seq = 0

    def push(t: float, kind: str, u: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, u))
        seq += 1

    writer_free, busy, next_unit, done_units, end = 0.0, 0.0, 0, 0, 0.0
    left = {}
    for _ in range(min(workers, units)):
        push(0.0, "start", next_unit)
        next_unit += 1
    while events:
        t, _, kind, u = heapq.heappop(events)
        if kind == "start":  # the driver prepares and logs the unit (a write), then the worker loads and generates
            begin = max(t, writer_free)
            writer_free = begin + unit_write_s / 2
            busy += unit_write_s / 2
            gen0 = writer_free + load_s
            left[u] = chunks
            for c in range(1, chunks + 1):
                push(gen0 + generate_s * c / chunks, "chunk", u)
            push(gen0 + generate_s, "free", u)
        elif kind == "free":  # the worker takes the next unit
            if next_unit < units:
                push(t, "start", next_unit)
                next_unit += 1
        else:  # a chunk's completions reach the driver and wait for the writer
            begin = max(t, writer_free)
            writer_free = begin + chunk_write_s
            busy += chunk_write_s
            left[u] -= 1
            if left[u] == 0:  # the last chunk: score and store the run (the other half of the fixed work)
                writer_free += unit_write_s / 2
                busy += unit_write_s / 2
                done_units += 1
                end = max(end, writer_free)
    ideal = -(-units // workers) * (load_s + generate_s)
    return {"workers": workers, "makespan_h": end / 3600, "ideal_h": ideal / 3600, "driver_busy": busy / end,
            "slowdown": end / ideal}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=2000, help="samples per unit (e.g. 500 items x n 4)")
    ap.add_argument("--chunk-samples", type=int, default=16, help="samples per streamed chunk (4 requests x n 4)")
    ap.add_argument("--load-s", type=float, default=40.0, help="model load per unit, s (assumed: 7B on one GPU)")
    ap.add_argument("--generate-s", type=float, default=240.0, help="generation per unit, s (assumed)")
    ap.add_argument("--driver-unit-s", type=float, required=True,
                    help="measured driver work per unit besides chunk writes, s (bench/sweep_vs_runs.py)")
    ap.add_argument("--workers", default="8,64,256,1024")
    a = ap.parse_args()
    os.environ.setdefault("EVALGATE_HOME", tempfile.mkdtemp(prefix="evalgate-sim-home-"))
    w = measure_chunk_write(a.chunk_samples)
    chunks = -(-a.samples // a.chunk_samples)
    # the unit's fixed work (measured on a small unit) plus storing its samples rows, at the measured per-row cost
    unit_s = a.driver_unit_s + a.samples * w["in_session_s"] / a.chunk_samples
    out = {"measured": w, "chunks_per_unit": chunks, "driver_unit_s": unit_s, "results": {}}
    bulk_unit_s = a.driver_unit_s + a.samples * w["multi_row_insert_s"] / a.chunk_samples
    for mode, cw, us in (("per_call", w["per_call_s"], unit_s), ("session", w["in_session_s"], unit_s),
                         ("multi_row_insert", w["multi_row_insert_s"], bulk_unit_s)):
        out["results"][mode] = [simulate(a.units, int(n), a.load_s, a.generate_s, chunks, cw, us)
                                for n in a.workers.split(",")]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
