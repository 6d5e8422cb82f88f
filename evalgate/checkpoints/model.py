"""What a checkpoint directory holds beside its identity: readable weight files, finite weights, the context
length its config declares, and its tokenizer."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from evalgate.checkpoints.identity import LOADER_FILES, LOADER_GLOBS, file_blake3
from evalgate.core.errors import BadInput, MissingExtra
from evalgate.core.fileio import decode_utf8
from evalgate.core.version import install_hint


def check_weight_files(model_dir: Path) -> None:
    """Refuse a directory whose ``*.safetensors`` files are truncated or malformed, before any split is read.

    ``safetensors.safe_open`` reads only the header and checks that the tensors it lists cover the file exactly
    (a cut-off copy fails with "incomplete metadata, file not fully covered"); a few milliseconds per file.
    Without the safetensors package (no hf extra) nothing is checked here.

    Raises:
        BadInput: a weights file cannot be opened, naming it.
    """
    try:
        from safetensors import safe_open
    except ImportError:
        return
    for f in sorted(model_dir.glob("*.safetensors")):
        try:
            with safe_open(str(f), "numpy"):
                pass
        except Exception as e:  # noqa: BLE001 - SafetensorError, OSError: any failure means the file is unusable
            raise BadInput(f"checkpoint weights {f} cannot be read ({type(e).__name__}: {e}); it is truncated or "
                           "damaged (an interrupted copy or download?). Copy it again") from e


def check_config(model_dir: Path) -> None:
    """Refuse a directory whose ``config.json`` is not a JSON object (a cut-off copy, a merge conflict), before any
    split is read: transformers reports a damaged config while loading the tokenizer, which reads as missing
    tokenizer files.

    Raises:
        BadInput: naming the file and the line where it stops parsing.
    """
    f = model_dir / "config.json"
    try:
        cfg = json.loads(decode_utf8(f.read_bytes(), f))
    except json.JSONDecodeError as e:
        raise BadInput(f"{f}:{e.lineno}: checkpoint config is not valid JSON ({e.msg}); it is damaged (an "
                       "interrupted copy or save?). Copy it again") from e
    if not isinstance(cfg, dict):
        raise BadInput(f"{f}: checkpoint config must be a JSON object, not {type(cfg).__name__}; copy it again")


def nonfinite_count(t: Any) -> int:
    """How many values of a torch tensor are NaN or infinite (0 for an empty or non-floating tensor).

    The common case, all finite, costs one ``torch.aminmax`` pass (NaN propagates to both ends, infinity sits at
    one of them): measured here about 10x faster than ``torch.isfinite(t).all()``, which builds a boolean tensor
    as large as ``t`` (bench/finite_check.py). Only a tensor that fails is counted in full.
    """
    import torch

    if not t.is_floating_point() or t.numel() == 0:
        return 0
    lo, hi = torch.aminmax(t)
    if bool(torch.isfinite(lo)) and bool(torch.isfinite(hi)):
        return 0
    return int((~torch.isfinite(t)).sum())


def check_finite_weights(model_dir: Path) -> None:
    """Refuse a directory whose ``*.safetensors`` weights hold NaN or infinity, for engines that load the files
    themselves (vLLM); the hf backend checks the tensors it loaded instead (``backends.hf.check_finite``).

    Reads every floating tensor once (``safetensors.safe_open``, torch) and counts its non-finite values
    (``nonfinite_count``): about the cost of reading the weights, small beside an engine's start. A single
    non-finite weight makes every logit NaN and the run a "complete" one of empty or garbage completions.

    Raises:
        BadInput: naming the file, the first non-finite tensor and how many of its values are non-finite.
    """
    try:
        import torch  # noqa: F401 - the "pt" framework of safe_open
        from safetensors import safe_open
    except ImportError:
        return
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            for name in st.keys():  # noqa: SIM118 - a safe_open handle is not iterable
                t = st.get_tensor(name)
                if bad := nonfinite_count(t):
                    raise BadInput(f"checkpoint {model_dir}: tensor {name} in {f.name} holds {bad} non-finite "
                                   f"value(s) (NaN or infinity) of {t.numel()}: the model cannot produce meaningful "
                                   "output. The training step that saved it diverged or the file is damaged; "
                                   "evaluate another checkpoint")


_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")


def context_length(model_dir: Path) -> tuple[int, str] | None:
    """The checkpoint's context length in tokens (prompt + completion), from its ``config.json``, and where it
    came from; None when the config names none.

    The first of ``max_position_embeddings``, ``n_positions``, ``max_seq_len``, ``seq_length`` and
    ``max_sequence_length`` in the config or its ``text_config`` (multimodal configs such as Gemma 3's). RoPE
    scaling of type ``linear``, ``dynamic`` or ``yarn`` multiplies it by its ``factor`` (``yarn``: the
    ``original_max_position_embeddings`` times the factor), as vLLM derives its maximum model length
    (``vllm.config``); ``llama3`` and the default type already state the extended length.
    """
    try:
        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    for where, c in (("config.json", cfg), ("config.json text_config", cfg.get("text_config"))):
        if not isinstance(c, dict):
            continue
        key = next((k for k in _CONTEXT_KEYS if isinstance(c.get(k), int) and c[k] > 0), None)
        if key is None:
            continue
        n, src = c[key], f"{where} {key}"
        rope = c.get("rope_scaling") or c.get("rope_parameters") or {}
        kind = rope.get("rope_type", rope.get("type")) if isinstance(rope, dict) else None
        factor = rope.get("factor") if isinstance(rope, dict) else None
        if kind in ("linear", "dynamic", "yarn") and isinstance(factor, int | float) and factor > 1:
            base = rope.get("original_max_position_embeddings") if kind == "yarn" else None
            n = int((base if isinstance(base, int) else n) * factor)
            src += f" with {kind} RoPE scaling x{factor}"
        return n, src
    return None


def tokenizer_files(model_dir: Path) -> list[Path]:
    """The files of ``model_dir`` a tokenizer is read from, sorted: ``identity.LOADER_FILES`` and the
    ``LOADER_GLOBS`` present (tokenizer, vocabulary, config and chat template files) but weight indexes; empty
    for a directory that does not exist."""
    found = {model_dir / n for n in LOADER_FILES} | {p for g in LOADER_GLOBS if not g.endswith("index.json")
                                                     for p in model_dir.glob(g)}
    return sorted(p for p in found if p.is_file())


def _files_key(files: list[Path]) -> tuple[tuple[str, str], ...]:
    return tuple((str(p), file_blake3(p)) for p in files)


def _state(tokenizer: Any) -> str:
    """What a caller could have changed on a tokenizer: its attributes (special tokens, chat template, padding and
    truncation sides, ...) and its fast backend's truncation, padding, vocabulary size and special-token split."""
    attrs = sorted((k, v) for k, v in vars(tokenizer).items() if k not in ("_tokenizer", "deprecation_warnings"))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    settings = None if backend is None else (backend.truncation, backend.padding,
                                             backend.get_vocab_size(with_added_tokens=True),
                                             backend.encode_special_tokens)
    return repr((attrs, settings))


_LOADED: OrderedDict[str, tuple[tuple[tuple[str, str], ...], Any, str]] = OrderedDict()
_LOADED_MAX = 4
_LOADED_LOCK = threading.Lock()


def load_tokenizer(model_dir: str | Path) -> Any:
    """The checkpoint's tokenizer (transformers ``AutoTokenizer``), which evalgate uses to render chat templates.

    Loaded once per directory and process while its ``tokenizer_files`` keep their content (BLAKE3 of each, read on
    every call: about a millisecond for SmolLM2's 3.5 MB, against 100-200 ms to load): a run, the gate and a sweep
    render several splits of one checkpoint. The object is shared: read it, do not change it (``copy.deepcopy``
    it first). One whose attributes or backend settings changed since it was loaded (``_state``) is not handed
    out again; a fresh one is loaded. Directories are not shared even where their files are equal: a tokenizer
    records where it was loaded from (``name_or_path``). The last four directories are kept.

    A directory holding none of the ``tokenizer_files`` is refused without importing transformers.

    Raises:
        MissingExtra: transformers not installed.
        BadInput: the directory has no loadable tokenizer.
    """
    where = Path(model_dir)
    files = tokenizer_files(where)
    if not files:
        raise BadInput(f"{model_dir}: no loadable tokenizer (no tokenizer, vocabulary or config file such as "
                       "tokenizer.json or config.json); a checkpoint directory needs its tokenizer files")
    key, before = str(where.resolve()), _files_key(files)
    with _LOADED_LOCK:
        kept = _LOADED.get(key)
    if kept is not None and kept[0] == before and _state(kept[1]) == kept[2]:
        with _LOADED_LOCK:
            _LOADED.move_to_end(key)
        return kept[1]
    tokenizer = _load_tokenizer(model_dir)
    if _files_key(tokenizer_files(where)) == before:  # not rewritten while transformers read it
        with _LOADED_LOCK:
            _LOADED[key] = (before, tokenizer, _state(tokenizer))
            _LOADED.move_to_end(key)
            while len(_LOADED) > _LOADED_MAX:
                _LOADED.popitem(last=False)
    return tokenizer


def _load_tokenizer(model_dir: str | Path) -> Any:
    """``AutoTokenizer.from_pretrained`` on the directory, its errors as ``load_tokenizer`` raises them."""
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise MissingExtra(
            f"rendering prompts with a checkpoint's tokenizer needs: {install_hint('hf')} ({e})") from e
    try:
        return AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError) as e:
        raise BadInput(
            f"{model_dir}: no loadable tokenizer ({e}); a checkpoint directory needs its tokenizer files") from e
