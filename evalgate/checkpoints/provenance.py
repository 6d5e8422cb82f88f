"""Training provenance of a checkpoint directory: training run, seed and step from folder names and the trainer's
saved files (``trainer_state.json``; ``training_args.bin`` read with an unpickler that runs no code from it)."""

from __future__ import annotations

import io
import json
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

from evalgate.checkpoints.layout import TRAINER_STATE, checkpoint_step


def _trainer_state(dir_: Path) -> dict | None:
    f = dir_ / TRAINER_STATE
    if f.is_file():
        try:
            return json.loads(f.read_text())
        except json.JSONDecodeError:
            return None
    return None


class _Stub:
    """Stands in for every class a pickle names, so reading one runs no code from it (see ``_args_seed``)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _StubUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _Stub

    def persistent_load(self, pid: Any) -> None:  # tensor storages of a torch file: not needed here
        return None


def _args_seed(dir_: Path) -> int | None:
    """``seed`` of the ``training_args.bin`` the HF Trainer (and TRL's trainers, whose configs subclass
    ``TrainingArguments``) saves in every checkpoint directory: a ``torch.save`` zip holding ``<name>/data.pkl``.

    Read with an unpickler that maps every class to an inert stub, so no code from the file runs (``torch.load``
    would need ``weights_only=False`` for these objects, which executes arbitrary pickled code).
    """
    f = dir_ / "training_args.bin"
    if not f.is_file():
        return None
    try:
        with zipfile.ZipFile(f) as z:
            name = next(n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl")
            obj = _StubUnpickler(io.BytesIO(z.read(name))).load()
    except Exception:  # not a zip, no data.pkl, an unreadable pickle: the seed is simply not known from here
        return None
    state = obj.state if isinstance(obj, _Stub) else None
    if isinstance(state, tuple):  # (dict, slots) for classes with __slots__
        state = state[0]
    seed = state.get("seed") if isinstance(state, dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


_SEED_RE = re.compile(r"(?:^|[-_.])seed[-_=]?(\d+)$", re.IGNORECASE)


FOLDER_WINS = "the folder name wins"
"""Ends the provenance note of a value whose folder name and saved training file disagree (``disagreements``)."""


def disagreements(provenance: dict[str, str]) -> list[str]:
    """Warnings for the provenance values whose folder name and the trainer's saved files disagree (a renamed or
    copied checkpoint folder, or a ``trainer_state.json`` from another checkpoint), e.g. ``step 800 from folder name
    'checkpoint-800' (trainer_state.json global_step says 750; the folder name wins)``."""
    return [f"training {k.replace('_', ' ')} from {v}: pass --{k.replace('_', '-')} if the folder name is wrong"
            for k, v in provenance.items() if v.endswith(f"{FOLDER_WINS})")]


def infer_training(dir_: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Training run, seed and step of a checkpoint directory, from common layouts, and where each came from.

    - step: a ``checkpoint-N`` folder name, else ``global_step`` of ``trainer_state.json``. The folder name wins
      over a different ``global_step`` (it is the name sweeps, globs and people use), and the disagreement is noted
      in the source (``disagreements`` turns such notes into the run's warnings).
    - train_seed: a ``seed-N`` / ``seed_N`` / ``seedN`` folder name (the checkpoint's own folder or one of its two
      parents, e.g. ``run/seed-1/checkpoint-9``), else ``seed`` of ``training_args.bin`` (HF Trainer, TRL), else
      ``trial_params.seed`` of ``trainer_state.json``. A folder name wins over the saved arguments (it is the label
      the runs are told apart by); a disagreement is noted in the source.
    - train_run: the folder above the seed folder (``run/seed-1/checkpoint-9`` -> ``run``), else the folder
      holding a ``checkpoint-N`` folder.

    Returns:
        ``({"train_run", "train_seed", "step"}, {field: source})``; a value that cannot be inferred is None and its
        source says ``"not inferred: ..."`` with what was looked for.
    """
    values: dict[str, Any] = {"train_run": None, "train_seed": None, "step": None}
    src: dict[str, str] = {}
    state = _trainer_state(dir_)
    saved_step = (state or {}).get("global_step")
    if (folder_step := checkpoint_step(dir_.name)) is not None:
        values["step"], src["step"] = folder_step, f"folder name {dir_.name!r}"
        if isinstance(saved_step, int) and saved_step != values["step"]:
            src["step"] += f" (trainer_state.json global_step says {saved_step}; {FOLDER_WINS})"
    elif state and isinstance(state.get("global_step"), int):
        values["step"], src["step"] = state["global_step"], "trainer_state.json global_step"
    seed_dir = next((d for d in (dir_, dir_.parent, dir_.parent.parent) if _SEED_RE.search(d.name)), None)
    args_seed = _args_seed(dir_)
    trial = (state or {}).get("trial_params") or {}
    if seed_dir is not None:
        values["train_seed"] = int(_SEED_RE.search(seed_dir.name).group(1))  # type: ignore[union-attr]
        src["train_seed"] = f"folder name {seed_dir.name!r}" + (
            f" (training_args.bin says seed {args_seed}; {FOLDER_WINS})"
            if args_seed not in (None, values["train_seed"]) else "")
    elif args_seed is not None:
        values["train_seed"], src["train_seed"] = args_seed, "training_args.bin (seed)"
    elif isinstance(trial.get("seed"), int):
        values["train_seed"], src["train_seed"] = trial["seed"], "trainer_state.json trial_params.seed"
    if seed_dir is not None and seed_dir != dir_:
        values["train_run"], src["train_run"] = seed_dir.parent.name, f"folder above {seed_dir.name!r}"
    elif folder_step is not None:
        values["train_run"], src["train_run"] = dir_.parent.name, f"folder holding {dir_.name!r}"
    for k, looked in (("train_seed", "no seed-N/seed_N folder, training_args.bin or trainer_state.json seed; "
                                     "pass --train-seed"),
                      ("train_run", "no seed-N or checkpoint-N folder to name it after; pass --train-run"),
                      ("step", "no checkpoint-N folder or trainer_state.json global_step; pass --step")):
        src.setdefault(k, f"not inferred: {looked}")
    return values, src
