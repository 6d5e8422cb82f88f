"""GGUF checkpoints: converted once to an HF safetensors directory under ``$EVALGATE_HOME/models/``, keyed by the
GGUF's digest, reproducibly; for a trust decision the cached directory is checked against a fresh conversion."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

from evalgate.checkpoints.identity import digest_hex, file_blake3
from evalgate.core.environment import Environment, or_from_env
from evalgate.core.errors import BadInput, EngineError, MissingExtra
from evalgate.core.version import install_hint


def models_dir(*, env: Environment | None = None) -> Path:
    """Where converted GGUF checkpoints are cached: ``env``'s ``models_dir`` (default the process's,
    ``or_from_env``: ``$EVALGATE_MODELS``, else ``$EVALGATE_HOME/models``)."""
    return or_from_env(env).models_dir


# Converted folders this process checked against a fresh conversion, by folder -> the stat of every file in it then
# (``_snapshot``): the gate verifies its checkpoints and then evaluates them, which verifies again. In memory only.
_VERIFIED: dict[str, list[tuple[str, int, int, int, int]]] = {}


def convert_gguf(gguf: Path, digest: str, verify: bool = False, *, env: Environment | None = None) -> Path:
    """Convert a GGUF file once to an HF safetensors directory ``$EVALGATE_HOME/models/<hex[:16]>`` (``hex``: the
    digest's hex part, ``digest_hex``; a GGUF known by its sha256 keeps its earlier conversion).

    transformers de-quantizes GGUF weights on load but refuses ``save_pretrained`` for such a model, so the state
    dict is saved with safetensors (tied ``lm_head`` dropped), with the config minus ``quantization_config`` and
    ``_name_or_path`` (where the GGUF lay: the bytes would differ by machine), the generation config and the
    tokenizer. The directory is written to a temporary name and renamed, under a file lock, so concurrent runs
    convert once and never see half a directory. The conversion is reproducible: the same GGUF converted from any
    path, by the same transformers, gives the same bytes (docs/CHECKPOINTS.md, "HF directories and GGUF files").

    Trust: the folder is a cache anyone who can write ``$EVALGATE_HOME`` can edit, and the checkpoint's identity is
    the GGUF's digest, not the folder's. Without ``verify`` an existing folder is reused unchecked (dev and smoke
    runs). With ``verify`` (every trust decision: the caller has just hashed the GGUF's bytes into ``digest``) the
    GGUF is converted again and the folder must equal the fresh conversion file for file, byte for byte; a
    folder that differs (a file changed, added or removed) is reported on stderr and made equal to the fresh one
    (file by file, each replaced atomically), so what loads is always what the hashed GGUF converts to. Checked
    once per process while the folder's files keep their stat.

    Raises:
        MissingExtra: transformers/torch/gguf not installed.
        BadInput: the conversion failed and the file does not parse as GGUF (truncated or damaged).
        EngineError: the conversion failed on a file that parses.
    """
    out = models_dir(env=env) / digest_hex(digest)[:16]
    if not verify and (out / "config.json").is_file():
        return out
    if verify and _VERIFIED.get(str(out)) == _snapshot(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if not verify and (out / "config.json").is_file():
            return out
        try:
            import gguf as gguf_py  # noqa: F401
            import torch  # noqa: F401
            from safetensors.torch import save_file  # noqa: F401
            from transformers import AutoModelForCausalLM  # noqa: F401

            from evalgate.core.progress import stage, stages_on
        except ImportError as e:
            raise MissingExtra(
                f"converting a GGUF checkpoint needs the hf extra: {install_hint('hf')} ({e})") from e
        # off a terminal transformers' bar is off: without this line a log shows nothing for a minute or more
        if out.exists():
            stage(f"checking {out} against a fresh conversion of {gguf}", stages_on())
        else:
            stage(f"converting {gguf} to an HF directory in {out} (once per file)", stages_on())
        tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=out.parent))
        try:
            _write_conversion(gguf, digest, tmp)
        except Exception as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, MissingExtra):
                raise
            if damage := gguf_damage(gguf):
                raise BadInput(f"checkpoint {gguf} is not a complete GGUF file ({damage}); a truncated or failed "
                               "download? Pass a complete .gguf file") from e
            raise EngineError(f"could not convert GGUF {gguf} to an HF directory: {e}") from e
        if out.exists():
            if diff := _compare(out, tmp):
                print(f"warning: the converted folder {out} is not what {gguf} (digest {digest}) converts to "
                      f"({_phrase(diff)}): replaced by a fresh conversion (a tampered or damaged cache; "
                      "docs/CHECKPOINTS.md)", file=sys.stderr)
                _replace_files(out, tmp, diff)
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.replace(tmp, out)
        if verify:
            _VERIFIED[str(out)] = _snapshot(out)
    return out


_PARSING = threading.Lock()
"""Held while ``parsed_once`` has gguf's functions replaced: one conversion at a time in a process."""


@contextmanager
def parsed_once() -> Iterator[None]:
    """While the block runs, each GGUF file is parsed once and gguf-py's tensor-name map built once per
    (architecture, layer count): transformers' GGUF loading (5.x) builds a ``gguf.GGUFReader`` for the tokenizer's
    config, the model's config and the weights (three parses of the file's metadata, 2.5 s of CPU each for
    SmolLM2-135M's 49,152-token vocabulary) and calls ``gguf.get_tensor_name_map`` again for every submodule of the
    model (397 times, 6 s). Both are pure for the same arguments (the reader maps the file read-only), so the
    block shares one result: the same converted bytes for a third of the CPU (``bench/gguf_convert.py``).

    The two names are replaced on the ``gguf`` module, where transformers imports them from when it loads a GGUF,
    and restored on exit; a lock keeps two threads from converting at once."""
    import gguf as gguf_py

    lib: Any = gguf_py  # its names are replaced for the block
    with _PARSING:
        reader, name_map = lib.GGUFReader, lib.get_tensor_name_map
        readers: dict[tuple[str, str], Any] = {}

        def shared_reader(path: str | os.PathLike[str], mode: str = "r") -> Any:
            key = (os.fspath(path), mode)
            if key not in readers:
                readers[key] = reader(path, mode)
            return readers[key]

        lib.GGUFReader, lib.get_tensor_name_map = shared_reader, functools.cache(name_map)
        try:
            yield
        finally:
            lib.GGUFReader, lib.get_tensor_name_map = reader, name_map


def _write_conversion(gguf: Path, digest: str, tmp: Path) -> None:
    """Write the HF directory converted from ``gguf`` into the empty directory ``tmp`` (see ``convert_gguf``)."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalgate.core.progress import gguf_conversion_bars

    with gguf_conversion_bars(), parsed_once():  # its bar follows transformers' switch (off under run --json)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg.pop("_name_or_path", None)  # the GGUF's folder: machine-specific, never read back by the loaders
    cfg["architectures"] = [type(model).__name__]
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    model.generation_config.save_pretrained(str(tmp))
    tok.save_pretrained(str(tmp))
    (tmp / "SOURCE").write_text(f"converted from a GGUF file with digest {digest}\n")
    for f in tmp.rglob("*"):  # one mode for every file, whatever wrote it
        f.chmod(0o755 if f.is_dir() else 0o644)
    tmp.chmod(0o755)


def _files(folder: Path) -> dict[str, Path]:
    """Every file under ``folder`` (symbolic links included), by its path relative to ``folder``."""
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if not p.is_dir()}


def _snapshot(folder: Path) -> list[tuple[str, int, int, int, int]]:
    """``(name, size, mtime_ns, ctime_ns, inode)`` of every file under ``folder``; empty when it is absent."""
    if not folder.is_dir():
        return []
    out = []
    for name, p in _files(folder).items():
        st = p.lstat()
        out.append((name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return out


def _compare(folder: Path, fresh: Path) -> list[tuple[str, str]]:
    """``(name, "added" | "missing" | "differs")`` for each file of ``folder`` and ``fresh`` that is not in both
    with the same bytes (BLAKE3); a symbolic link in ``folder`` differs (the conversion writes none)."""
    have, want = _files(folder), _files(fresh)
    out = [(n, "added") for n in have if n not in want] + [(n, "missing") for n in want if n not in have]
    for name in sorted(set(have) & set(want)):
        if have[name].is_symlink() or file_blake3(have[name]) != file_blake3(want[name]):
            out.append((name, "differs"))
    return out


def _phrase(diff: list[tuple[str, str]]) -> str:
    return "; ".join(f"{name} {kind}" for name, kind in diff)


def _replace_files(folder: Path, fresh: Path, diff: list[tuple[str, str]]) -> None:
    """Make ``folder`` hold ``fresh``'s files (``diff``: ``_compare(folder, fresh)``), one ``os.replace`` per
    differing file, so a process loading from ``folder`` meanwhile never misses a file the conversion writes."""
    for name, kind in diff:
        target = folder / name
        if kind == "added":
            target.unlink()
            continue
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(fresh / name, target)


def folder_differences(folder: Path, fresh: Path) -> str:
    """What differs between ``folder`` and ``fresh`` (file names, then each file's BLAKE3 digest), as a short
    phrase (``"adapter_config.json added; config.json differs"``), or ``""`` when they hold the same files with
    the same bytes. A symbolic link in ``folder`` is a difference (the conversion writes none).

    Raises:
        OSError: a file cannot be read.
    """
    return _phrase(_compare(folder, fresh))


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
