"""Checkpoints: what one is on disk and how it is known.

A checkpoint is an HF model directory (config + safetensors + tokenizer) or a GGUF file. Import from the module that
owns a name (nothing is re-exported here, so importing one part does not load the others):

- ``layout``: the ``checkpoint-N`` folder name, "is this a checkpoint", "is it completely written" (one definition
  for sweep, watch, the diagnostics and identity);
- ``identity``: file digests (BLAKE3, sha256 kept), ``DigestCache``, ``checkpoint_identity``;
- ``resolve``: ``Checkpoint`` and ``resolve_checkpoint`` (identity + loadable directory + provenance);
- ``provenance``: training run, seed and step inferred, ``training_args.bin`` read by a safe unpickler;
- ``gguf``: GGUF conversion to an HF directory, cached by digest;
- ``model``: weight-file and finite-weight checks, context length, the tokenizer.
"""
