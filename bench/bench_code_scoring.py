"""Benchmark: sandboxed scoring of the 164 HumanEval canonical solutions against a plain subprocess loop.

Target (issues 5 and 27): scoring through evalgate's harness (``run_tests_many``: the sandbox, the harness's
trusted process and the candidate's process, one worker per core) takes no more than 1.5x the time of running the
programs (prompt + solution + test + ``check``, as the reference harness assembles them) one after another with
plain ``subprocess.run`` divided by the number of cores.

Both are measured in the same process, interleaved repetition by repetition (so background load hits both),
and reported as medians. The script prints one JSON document: machine, load averages before and after, per
repetition times, medians, the ratio, and for each repetition the cores kept busy (the programs' CPU seconds
over wall seconds: the plain loop can keep at most 1 busy, the sandbox up to the core count).

With ``--policy mostly-wrong`` (issue 42) it measures instead what a wrong sample costs beside a right one: the
164 canonical solutions, the same 164 problems answered wrong (three wrong bodies: ``return None``, a
``raise ValueError``, an ``assert False``), and a mostly-wrong policy (each problem's canonical solution once and
three wrong answers), all through ``run_tests_many``, alternated per repetition; it prints the medians and the
ratio of seconds per wrong sample to seconds per right one.

Usage: python bench/bench_code_scoring.py [--reps 5] [--policy mostly-wrong] [--problems 164]
"""

from __future__ import annotations

import argparse
import gzip
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

# Import the checkout's evalgate, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from evalgate.core.sandbox import available_cores, describe, run_many  # noqa: E402
from evalgate.datasets.humaneval import humaneval_path  # noqa: E402
from evalgate.scoring.harness import HarnessJob, run_tests_many  # noqa: E402


def records() -> list[dict]:
    return [json.loads(x) for x in gzip.decompress(humaneval_path().read_bytes()).decode().splitlines() if x]


def programs(recs: list[dict]) -> list[str]:
    return [f"{r['prompt']}{r['canonical_solution']}\n\n{r['test']}\n\ncheck({r['entry_point']})\n"
            for r in recs]


def jobs(recs: list[dict]) -> list[HarnessJob]:
    return [HarnessJob(r["prompt"] + r["canonical_solution"], r["prompt"], r["test"], r["entry_point"])
            for r in recs]


WRONG_BODIES = ("    return None\n", "    raise ValueError('no answer')\n", "    assert False\n")


def wrong_jobs(recs: list[dict]) -> list[HarnessJob]:
    """Every problem answered wrong once per body of ``WRONG_BODIES``."""
    return [HarnessJob(r["prompt"] + body, r["prompt"], r["test"], r["entry_point"])
            for body in WRONG_BODIES for r in recs]


def timed(todo: list[HarnessJob], expect: str | None) -> float:
    """Seconds to score ``todo`` with ``run_tests_many`` (one worker per core); every verdict must be ``expect``
    (None: not checked)."""
    t0 = time.perf_counter()
    res = run_tests_many(todo, timeout_s=60)
    wall = time.perf_counter() - t0
    assert expect is None or all(r.status == expect for r in res), [r.detail for r in res if r.status != expect][:3]
    return wall


def mostly_wrong(recs: list[dict], reps: int) -> dict:
    """Right vs wrong vs mostly-wrong samples, seconds per sample (see the module docstring)."""
    right, wrong = jobs(recs), wrong_jobs(recs)
    mixed = [j for i, r in enumerate(right) for j in (r, wrong[i], wrong[len(recs) + i], wrong[2 * len(recs) + i])]
    run_tests_many(right[:available_cores()])  # warm the namespace probe and the page cache
    per = {"right": [], "wrong": [], "mostly_wrong": []}
    for _ in range(reps):
        per["right"].append(timed(right, "passed") / len(right))
        per["wrong"].append(timed(wrong, "failed") / len(wrong))
        per["mostly_wrong"].append(timed(mixed, None) / len(mixed))
    med = {k: statistics.median(v) for k, v in per.items()}
    return {"samples": {"right": len(right), "wrong": len(wrong), "mostly_wrong": len(mixed)},
            "seconds_per_sample": {k: [round(x, 4) for x in v] for k, v in per.items()},
            "median_seconds_per_sample": {k: round(v, 4) for k, v in med.items()},
            "ratio_wrong_to_right": round(med["wrong"] / med["right"], 3),
            "ratio_mostly_wrong_to_right": round(med["mostly_wrong"] / med["right"], 3)}


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def plain_loop(progs: list[str], workdir: Path, python: list[str]) -> tuple[float, float]:
    """(seconds, children's CPU seconds) to run every program in turn with a bare ``subprocess.run`` (no
    sandbox, no limits) under ``python`` (interpreter and flags)."""
    paths = []
    for i, p in enumerate(progs):
        path = workdir / f"p{i}.py"
        path.write_text(p)
        paths.append(path)
    cpu0, t0 = _children_cpu_s(), time.perf_counter()
    for path in paths:
        r = subprocess.run([*python, str(path)], cwd=workdir, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)
        assert r.returncode == 0, path
    return time.perf_counter() - t0, _children_cpu_s() - cpu0


def sandboxed(todo: list[HarnessJob]) -> tuple[float, float]:
    """(seconds, children's CPU seconds) to score every job with ``run_tests_many`` (one worker per core)."""
    cpu0, t0 = _children_cpu_s(), time.perf_counter()
    res = run_tests_many(todo, timeout_s=60)
    wall = time.perf_counter() - t0
    bad = [i for i, r in enumerate(res) if r.status != "passed"]
    assert not bad, f"canonical solutions failed: {bad}"
    return wall, _children_cpu_s() - cpu0


def sandboxed_without_harness(progs: list[str]) -> float:
    """Seconds to run the assembled programs in the same sandbox with ``run_many`` and the exit status as the
    verdict (scoring before issue 27): the harness's own cost is the difference."""
    t0 = time.perf_counter()
    res = run_many(progs, timeout_s=60)
    assert all(r.status == "passed" for r in res)
    return time.perf_counter() - t0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions of each measurement (default 5)")
    ap.add_argument("--policy", choices=["mostly-wrong"], help="time wrong samples against right ones instead")
    ap.add_argument("--problems", type=int, default=164, help="the first N HumanEval problems (default all 164)")
    args = ap.parse_args()
    recs = records()[:args.problems]
    if args.policy:
        load_before = os.getloadavg()
        out = mostly_wrong(recs, args.reps)
        print(json.dumps({"machine": {"cpu": cpu_model(), "cores": available_cores()}, "sandbox": describe(),
                          "reps": args.reps, "loadavg_before": [round(x, 2) for x in load_before],
                          "loadavg_after": [round(x, 2) for x in os.getloadavg()], **out}, indent=2))
        return
    progs, todo = programs(recs), jobs(recs)
    cores = available_cores()
    load_before = os.getloadavg()
    plain, sandbox, plain_cores, sandbox_cores, same, bare = [], [], [], [], [], []
    # The sandbox's interpreter is a system Python started with -I -S (no site import), which starts faster than
    # evalgate's: a second baseline runs the plain loop under that same interpreter and flags.
    same_python = [describe()["python"].split()[0], "-I", "-S", "-B"]
    with tempfile.TemporaryDirectory(prefix="evalgate-bench-") as d:
        run_tests_many(todo[:cores])  # warm the namespace probe and the page cache
        for _ in range(args.reps):
            wall, cpu = plain_loop(progs, Path(d), [sys.executable])
            plain.append(wall)
            plain_cores.append(cpu / wall)
            same.append(plain_loop(progs, Path(d), same_python)[0])
            bare.append(sandboxed_without_harness(progs))
            wall, cpu = sandboxed(todo)
            sandbox.append(wall)
            sandbox_cores.append(cpu / wall)
    med_plain, med_sandbox = statistics.median(plain), statistics.median(sandbox)
    ideal = med_plain / cores
    print(json.dumps({
        "machine": {"cpu": cpu_model(), "cores": cores, "os_cpu_count": os.cpu_count(),
                    "kernel": platform.release(), "python": platform.python_version()},
        "sandbox": describe(),
        "programs": len(progs), "reps": args.reps,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "plain_loop_s": [round(x, 3) for x in plain], "sandbox_s": [round(x, 3) for x in sandbox],
        "median_plain_loop_s": round(med_plain, 3), "median_plain_loop_over_cores_s": round(ideal, 3),
        "median_sandbox_s": round(med_sandbox, 3),
        "ratio_sandbox_to_plain_over_cores": round(med_sandbox / ideal, 3), "target_ratio": 1.5,
        "plain_loop_sandbox_python": same_python, "plain_loop_sandbox_python_s": [round(x, 3) for x in same],
        "ratio_sandbox_to_plain_sandbox_python_over_cores": round(med_sandbox / (statistics.median(same) / cores), 3),
        "sandbox_without_harness_s": [round(x, 3) for x in bare],
        "ratio_harness_to_without_harness": round(med_sandbox / statistics.median(bare), 3),
        "plain_loop_cores_busy": [round(x, 3) for x in plain_cores],
        "sandbox_cores_busy": [round(x, 3) for x in sandbox_cores],
    }, indent=2))


if __name__ == "__main__":
    main()
