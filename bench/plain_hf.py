"""Baseline for bench/hf_overhead.py: a plain transformers script, no evalgate.

Reads a JSON spec (model_dir, prompts, temperature, top_p, max_tokens, n, stop), loads the model, generates every
prompt's n samples in one left-padded batch with transformers' own sampling, stopping early on the stop strings
(as evalgate does: DESIGN.md's performance notes), decodes, and prints the completion token count as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main(spec_path: str) -> None:
    t0 = time.perf_counter()
    spec = json.loads(open(spec_path).read())
    tok = AutoTokenizer.from_pretrained(spec["model_dir"], padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype=torch.float32).eval()
    torch.manual_seed(0)
    # one BOS: add it unless the rendered prompts already start with it (evalgate's rule)
    add = not (tok.bos_token and all(p.startswith(tok.bos_token) for p in spec["prompts"]))
    enc = tok(spec["prompts"], return_tensors="pt", padding=True, add_special_tokens=add)
    g0 = time.perf_counter()
    with torch.inference_mode():
        sampling = {"do_sample": True, "temperature": spec["temperature"], "top_p": spec["top_p"], "top_k": 0} \
            if spec["temperature"] > 0 else {"do_sample": False}
        out = model.generate(**enc, **sampling, max_new_tokens=spec["max_tokens"], num_return_sequences=spec["n"],
                             stop_strings=spec["stop"] or None, tokenizer=tok, pad_token_id=tok.pad_token_id)
    gen_s = time.perf_counter() - g0
    new = out[:, enc["input_ids"].shape[1]:]
    texts = tok.batch_decode(new, skip_special_tokens=True)
    tokens = int((new != tok.pad_token_id).sum())
    print(json.dumps({"samples": len(texts), "completion_tokens": tokens, "generate_s": gen_s, "texts": texts,
                      "wall_in_script_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main(sys.argv[1])
