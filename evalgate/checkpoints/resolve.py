"""A checkpoint path resolved: its kind (HF directory or GGUF file), identity, loadable directory and training
provenance (``resolve_checkpoint``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.checkpoints.gguf import convert_gguf
from evalgate.checkpoints.identity import DigestCache, checkpoint_identity, identity_files
from evalgate.checkpoints.model import check_config, check_weight_files
from evalgate.checkpoints.provenance import infer_training
from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput


@dataclass(frozen=True)
class Checkpoint:
    """A resolved checkpoint.

    Attributes:
        path: what the user passed (directory or GGUF file), absolute.
        kind: ``hf`` or ``gguf``.
        digest: identity: ``blake3:<hex>``, or bare sha256 hex for checkpoints known before blake3 (see the
            module docstring; ``digest_algorithm``).
        model_dir: HF directory the engines load (the conversion cache for a GGUF).
        train_run, train_seed, step: training provenance (flags, else inferred: see ``infer_training``).
        provenance: where each of train_run, train_seed and step came from (``"flag"``, ``"folder name
            'seed-1'"``, ``"training_args.bin (seed)"`` ...) or why it could not be inferred (``"not inferred:
            ..."``).
    """

    path: Path
    kind: str
    digest: str
    model_dir: Path
    train_run: str | None = None
    train_seed: int | None = None
    step: int | None = None
    provenance: dict[str, str] = field(default_factory=dict, compare=False, hash=False)



def resolve_checkpoint(
    path: str | Path,
    train_run: str | None = None,
    train_seed: int | None = None,
    step: int | None = None,
    recorded: Callable[[str], str | None] | None = None,
    verify: bool = False,
    env: Environment | None = None,
) -> Checkpoint:
    """Resolve a checkpoint path to its identity and loadable HF directory.

    Training provenance comes from the arguments, else from the directory (``infer_training``); the checkpoint's
    ``provenance`` says which, or why a value is missing. A GGUF file carries none (only the arguments).

    Args:
        path: an HF model directory or a ``.gguf`` file.
        train_run, train_seed, step: training provenance given by the user (None: inferred).
        recorded: maps the resolved absolute path to the identity the store last recorded for it
            (``Store.recorded_checkpoint``), so a checkpoint known by its sha256 identity keeps it
            (``checkpoint_identity``); None: only the digest cache says so.
        verify: hash every byte of the identity files, taking no digest from the stat-keyed cache (a trust
            decision: a run on a public, private or human-audit split, the gate); for a GGUF, also check its
            cached conversion against a fresh one (``convert_gguf``).
        env: whose digest cache and converted-models cache (default the process's, ``or_from_env``).

    Raises:
        BadInput: path missing or neither an HF directory nor a ``.gguf`` file; weights that cannot be read or a
            ``config.json`` that is not a JSON object (naming the file); a weight index that names a missing file
            or one outside the directory; a PEFT adapter (``identity_files``).
    """
    given: dict[str, Any] = {"train_run": train_run, "train_seed": train_seed, "step": step}
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise BadInput(f"checkpoint {path} not found; pass an HF model directory or a .gguf file")
    if p.is_file():
        if p.suffix != ".gguf":
            raise BadInput(f"checkpoint {path} is a file but not .gguf; pass an HF model directory or a .gguf file")
        with open(p, "rb") as f:
            magic = f.read(4)
        if magic != b"GGUF":  # the GGUF format's first four bytes (ggml docs/gguf.md)
            raise BadInput(f"checkpoint {path} is not a GGUF file (it does not start with the bytes 'GGUF'; it starts "
                           f"with {magic!r}); a truncated or failed download? Pass a complete .gguf file")
        digest = checkpoint_identity([p], (lambda: recorded(str(p))) if recorded else None, DigestCache(env=env),
                                     single=True, verify=verify)
        prov = {k: "flag" if v is not None else "not inferred: a GGUF file carries no training metadata; pass "
                f"--{k.replace('_', '-')}" for k, v in given.items()}
        model_dir = convert_gguf(p, digest, verify, env=env)
        return Checkpoint(p, "gguf", digest, model_dir, train_run, train_seed, step, prov)
    digest = checkpoint_identity(identity_files(p), (lambda: recorded(str(p))) if recorded else None,
                                 DigestCache(env=env), verify=verify)
    check_weight_files(p)
    check_config(p)
    inferred, src = infer_training(p)
    values = {k: given[k] if given[k] is not None else inferred[k] for k in given}
    prov = {k: "flag" if given[k] is not None else src[k] for k in given}
    return Checkpoint(p, "hf", digest, p, values["train_run"], values["train_seed"], values["step"], prov)

