"""A tiny random checkpoint with SmolLM2's real tokenizer: a 2-layer Llama (hidden size 16) saved as an HF directory
(``model.safetensors``, ``config.json``, ``generation_config.json``, the tokenizer files), for the tests that need a
folder shaped like a checkpoint (identity, layout, provenance, refusals before a read, plumbing with replayed
outputs) and not the real model's outputs. Its greedy text is noise, but the same noise for the same seed.

Built once per machine under ``$EVALGATE_MODELS`` (``tests/conftest.py`` sets it), in a folder named by a hash of
the build recipe and the GGUF the tokenizer comes from; a file lock and a rename make concurrent builders (pytest-xdist
workers) build it once."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from filelock import FileLock

SHAPE = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 8}
"""The tiny model's sizes; every other config field (vocabulary, special tokens, RoPE, context) is SmolLM2's."""
SEED = 1234
RECIPE = 1
"""Bumped when the build below changes what it writes (a new cache folder then)."""


def _gguf_key(gguf: Path) -> str:
    h = hashlib.sha256()
    with open(gguf, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def tiny_checkpoint(gguf: Path, cache: Path) -> Path:
    """The tiny checkpoint's directory under ``cache``: config and tokenizer from ``gguf`` (SmolLM2-135M-Instruct),
    random weights (seed ``SEED``) at the ``SHAPE`` sizes, float32; the same bytes on every build. Built on first use
    (about 9 s of CPU, most of it importing transformers and reading the GGUF's tokenizer, its metadata parsed once:
    ``parsed_once``; the weights are 3 MB).

    Returns a directory the caller must not modify (tests that change files copy it first)."""
    key = hashlib.sha256(json.dumps({"shape": SHAPE, "seed": SEED, "recipe": RECIPE, "gguf": _gguf_key(gguf)},
                                    sort_keys=True).encode()).hexdigest()[:16]
    out = cache / f"tiny-{key}"
    if (out / "config.json").is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / "config.json").is_file():
            return out
        import torch
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig, LlamaForCausalLM

        from evalgate.checkpoints.gguf import parsed_once

        tmp = Path(tempfile.mkdtemp(prefix=".tiny-", dir=cache))
        try:
            with parsed_once():  # the GGUF's metadata parsed once for both (evalgate.checkpoints.gguf)
                tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            for k, v in SHAPE.items():
                setattr(config, k, v)
            config.dtype = "float32"
            torch.manual_seed(SEED)
            model = LlamaForCausalLM(config).eval()
            model.save_pretrained(str(tmp), safe_serialization=True)
            GenerationConfig.from_model_config(config).save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            (tmp / "SOURCE").write_text(f"tiny random Llama {SHAPE}, seed {SEED}, tokenizer and config from {gguf}\n")
            tmp.chmod(0o755)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out
