"""What a checkpoint is on disk: the one definition of the ``checkpoint-N`` folder name, of "is this a checkpoint"
and of "is it completely written", used by ``sweep`` (discovery), ``watch`` (when to read one), the diagnostics
(the newest checkpoint's training log), provenance (the step) and identity (the files refused).

- **a checkpoint** is an HF model directory (``config.json`` and at least one weights file: ``*.safetensors`` or a
  ``*.bin`` other than the trainer's ``training_args.bin``) or a ``.gguf`` file;
- **its step** comes from a folder named exactly ``checkpoint-N`` (the HF Trainer's and TRL's layout); a staging
  folder (``tmp-checkpoint-N``, written before the rename) or ``checkpoint-N.bak`` is no step;
- **completely written** (a checkpoint a trainer saved, ``incomplete`` is None): a checkpoint directory whose
  sharded weights (``*.index.json``) are all present and whose ``trainer_state.json`` parses. That its files
  stopped changing is the watcher's settle time, not a property of the files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["CHECKPOINT_DIR", "TRAINER_STATE", "checkpoint_step", "incomplete", "is_checkpoint", "is_complete",
           "is_hf_checkpoint", "not_hf_checkpoint", "weight_files"]

CHECKPOINT_DIR = re.compile(r"checkpoint-(\d+)")
"""A training checkpoint's folder name, matched whole (``fullmatch``): group 1 is the step."""
TRAINER_STATE = "trainer_state.json"
NOT_WEIGHTS = frozenset({"training_args.bin"})
"""``*.bin`` files in a checkpoint folder that are not weights (the HF Trainer's pickled arguments)."""


def checkpoint_step(name: str) -> int | None:
    """The step N of a folder named ``checkpoint-N``, else None (``tmp-checkpoint-5``, ``checkpoint-5.bak``)."""
    m = CHECKPOINT_DIR.fullmatch(name)
    return int(m.group(1)) if m else None


def weight_files(d: Path) -> list[Path]:
    """The weights files of directory ``d``: ``*.safetensors`` and ``*.bin`` other than ``training_args.bin``,
    sorted by name."""
    return sorted(p for g in ("*.safetensors", "*.bin") for p in d.glob(g) if p.is_file() and p.name not in NOT_WEIGHTS)


def not_hf_checkpoint(d: Path) -> str | None:
    """Why directory ``d`` is not an HF checkpoint directory (no ``config.json``, no weights), or None when it is."""
    if not d.is_dir():
        return "not a directory"
    if not (d / "config.json").is_file():
        return "no config.json"
    if not weight_files(d):
        return "no weights (*.safetensors, or *.bin other than training_args.bin)"
    return None


def is_hf_checkpoint(d: Path) -> bool:
    """``d`` is an HF model directory: ``config.json`` and a weights file (``not_hf_checkpoint``)."""
    return not_hf_checkpoint(d) is None


def is_checkpoint(path: Path) -> bool:
    """``path`` is a checkpoint evalgate can evaluate: an HF model directory or a ``.gguf`` file."""
    return (path.is_file() and path.suffix == ".gguf") or is_hf_checkpoint(path)


def _missing_shards(d: Path) -> list[str]:
    """Shards that a ``*.index.json`` of ``d`` names and that are not there (yet); an index that does not parse
    (being written) counts as missing itself."""
    missing: list[str] = []
    for index in sorted(d.glob("*.index.json")):
        try:
            names = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, OSError, KeyError, TypeError, AttributeError):
            missing.append(index.name)
            continue
        missing += sorted(n for n in names if not (d / str(n)).is_file())
    return missing


def incomplete(d: Path) -> str | None:
    """Why the checkpoint directory ``d`` a trainer is saving cannot be read yet, or None when it is completely
    written: an HF checkpoint directory (``not_hf_checkpoint``) with every shard its weight index names and a
    ``trainer_state.json`` that parses (the HF Trainer writes it last)."""
    why = not_hf_checkpoint(d)
    if why:
        return f"{why} yet"
    missing = _missing_shards(d)
    if missing:
        return f"weight shards not written yet: {', '.join(missing[:3])}" + (" ..." if len(missing) > 3 else "")
    state = d / TRAINER_STATE
    if not state.is_file():
        return f"no {TRAINER_STATE} yet"
    try:
        json.loads(state.read_text())
    except (ValueError, OSError) as e:
        return f"{TRAINER_STATE} does not parse yet ({type(e).__name__}); retrying"
    return None


def is_complete(d: Path) -> bool:
    """``d`` is a completely written training checkpoint (``incomplete`` is None)."""
    return incomplete(d) is None
