"""GGUF checkpoints: converted once to an HF safetensors directory under ``$EVALGATE_HOME/models/``, keyed by the
GGUF's digest."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from filelock import FileLock

from evalgate.checkpoints.identity import digest_hex
from evalgate.core.environment import active
from evalgate.core.errors import BadInput, EngineError, MissingExtra
from evalgate.core.version import install_hint


def models_dir() -> Path:
    """Where converted GGUF checkpoints are cached (``evalgate.core.environment``: the workspace's, else
    ``$EVALGATE_MODELS``, else ``$EVALGATE_HOME/models``)."""
    return active().models_dir


def convert_gguf(gguf: Path, digest: str) -> Path:
    """Convert a GGUF file once to an HF safetensors directory ``$EVALGATE_HOME/models/<hex[:16]>`` (``hex``: the
    digest's hex part, ``digest_hex``; a GGUF known by its sha256 keeps its earlier conversion).

    transformers de-quantizes GGUF weights on load but refuses ``save_pretrained`` for such a model, so the state
    dict is saved with safetensors (tied ``lm_head`` dropped), with the config minus ``quantization_config``, the
    generation config and the tokenizer. The directory is written to a temporary name and renamed, under a file
    lock, so concurrent runs convert once and never see half a directory.

    Raises:
        MissingExtra: transformers/torch/gguf not installed.
        BadInput: the conversion failed and the file does not parse as GGUF (truncated or damaged).
        EngineError: the conversion failed on a file that parses.
    """
    out = models_dir() / digest_hex(digest)[:16]
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if (out / "config.json").is_file():
            return out
        try:
            import torch  # noqa: F401
            from safetensors.torch import save_file
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from evalgate.core.progress import gguf_conversion_bars, stage, stages_on
        except ImportError as e:
            raise MissingExtra(
                f"converting a GGUF checkpoint needs the hf extra: {install_hint('hf')} ({e})") from e
        # off a terminal transformers' bar is off: without this line a log shows nothing for a minute or more
        stage(f"converting {gguf} to an HF directory in {out} (once per file)", stages_on())
        tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=out.parent))
        try:
            with gguf_conversion_bars():  # its bar follows transformers' switch (off under evalgate run --json)
                tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            state = {k: v.contiguous() for k, v in model.state_dict().items()}
            if getattr(model.config, "tie_word_embeddings", False):
                state.pop("lm_head.weight", None)
            save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
            cfg = model.config.to_dict()
            cfg.pop("quantization_config", None)
            cfg["architectures"] = [type(model).__name__]
            (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
            model.generation_config.save_pretrained(str(tmp))
            tok.save_pretrained(str(tmp))
            (tmp / "SOURCE").write_text(f"converted from {gguf} (digest {digest})\n")
            tmp.chmod(0o755)
            os.replace(tmp, out)
        except Exception as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, MissingExtra):
                raise
            if damage := gguf_damage(gguf):
                raise BadInput(f"checkpoint {gguf} is not a complete GGUF file ({damage}); a truncated or failed "
                               "download? Pass a complete .gguf file") from e
            raise EngineError(f"could not convert GGUF {gguf} to an HF directory: {e}") from e
    return out


def gguf_damage(gguf: Path) -> str | None:
    """Why ``gguf`` does not parse as a GGUF file (``gguf.GGUFReader``: header, metadata and every tensor's data
    within the file), or None when it does; asked only after a conversion failed, to tell a damaged file (the
    user's to replace) from a conversion evalgate could not do. A few seconds for a 100 MB file."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return None
    try:
        GGUFReader(gguf)
    except Exception as e:  # noqa: BLE001 - ValueError, struct.error, OSError: the file does not parse
        return f"{type(e).__name__}: {e}"
    return None
