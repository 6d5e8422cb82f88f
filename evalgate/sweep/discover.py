"""Finding a sweep's checkpoints: HF/TRL directories and GGUF files matched by a glob."""

from __future__ import annotations

import glob
from collections.abc import Callable
from pathlib import Path

from evalgate.checkpoints.layout import is_checkpoint, not_hf_checkpoint
from evalgate.checkpoints.resolve import Checkpoint, resolve_checkpoint
from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput
from evalgate.core.formatting import short_digest


def discover_checkpoints(pattern: str, recorded: Callable[[str], str | None] | None = None,
                         env: Environment | None = None) -> tuple[list[Checkpoint], list[str]]:
    """The checkpoints a glob matches, resolved (digest, training run, seed and step: ``resolve_checkpoint``).

    Args:
        pattern: a glob (``**`` allowed), e.g. ``runs/*/checkpoint-*`` or ``models/*.gguf``.
        recorded: ``Store.recorded_checkpoint``, so checkpoints known by a sha256 identity keep it (None: only
            the digest cache says so; ``checkpoints.checkpoint_identity``).
        env: whose digest and models caches (default the process's, ``or_from_env``).

    Returns:
        ``(checkpoints, ignored)``: the checkpoints ordered by training run, training seed, step and path (one
        per identity: a path whose digest was already found is dropped), and the matched paths that are not
        checkpoints (``checkpoints.layout.is_checkpoint``: a folder without ``config.json`` or weights, a file that
        is not ``.gguf``), each with the reason.

    Raises:
        BadInput: the glob matches no checkpoint; a matched checkpoint cannot be resolved (no weights, a damaged
            GGUF file: names the path).
    """
    matched = sorted(Path(p) for p in glob.glob(str(Path(pattern).expanduser()), recursive=True))
    found: dict[str, Checkpoint] = {}
    ignored: list[str] = []
    for path in matched:
        if not is_checkpoint(path):
            why = "not .gguf" if path.is_file() else not_hf_checkpoint(path)
            ignored.append(f"{path}: not a checkpoint ({why}; an HF directory with config.json and weights, or a "
                           ".gguf file)")
            continue
        ckpt = resolve_checkpoint(path, recorded=recorded, env=env)
        if ckpt.digest in found:
            first = found[ckpt.digest]
            other_seed = (ckpt.train_run, ckpt.train_seed) != (first.train_run, first.train_seed)
            ignored.append(f"{path}: the same checkpoint (digest {short_digest(ckpt.digest)}) as {first.path}"
                           + (f"; identical weights under another training seed ({ckpt.train_run} seed "
                              f"{ckpt.train_seed} step {ckpt.step} vs {first.train_run} seed {first.train_seed} "
                              f"step {first.step}): it gets no run of its own, so that seed lacks this step "
                              "(a copied folder, or seeds that did not diverge?)" if other_seed else ""))
            continue
        found[ckpt.digest] = ckpt
    if not found:
        raise BadInput(f"--checkpoints {pattern!r} matches no checkpoint ({len(matched)} paths matched, none an HF "
                       "directory with config.json and weights or a .gguf file); quote the glob so the shell does not "
                       "expand it, e.g. --checkpoints 'runs/*/checkpoint-*'")
    order = sorted(found.values(), key=lambda c: (c.train_run or "", c.train_seed if c.train_seed is not None else -1,
                                                   c.step if c.step is not None else -1, str(c.path)))
    return order, ignored
