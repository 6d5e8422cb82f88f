"""Checkpoint identity: weight digests, HF directories and GGUF files, training run / seed / step.

A checkpoint is an HF model directory (config + safetensors + tokenizer) or a GGUF file. Its identity is a digest
over the files that decide its outputs (weights, config, tokenizer), so the generation cache can never confuse
two checkpoints. A GGUF file is converted once to an HF safetensors directory under ``$EVALGATE_HOME/models/``,
keyed by the GGUF's digest.

Digest algorithms. New identities are BLAKE3 (``blake3:<64 hex>``), hashed on all cores: sha256 runs on one core at
about the speed of a cold read, so it was the bottleneck for a large single file (docs/BENCHMARKS.md). Identities
made before are bare sha256 hex and stay valid; ``digest_algorithm`` tells the two apart. So that a checkpoint
known by its sha256 identity keeps it (its cached generations, stored runs, gate reuse and sweep skips all key on
the identity string), ``checkpoint_identity`` picks the algorithm per checkpoint:

1. the digest cache holds, for every identity file at its current stat, the digests of one algorithm only: that
   algorithm (no file is read; sha256 only: hashed before this change, blake3 only: since);
2. otherwise (files new or changed, the cache off, or both algorithms cached) the store's latest run of this path
   (``recorded``) decides: a sha256 identity is computed and kept if it equals the recorded one; anything else
   (a blake3 identity, a changed content, nothing recorded, no store given) makes a blake3 identity.

A copy of a sha256-known checkpoint at a new path, with no digest cache entries, gets a new blake3 identity (its
earlier generations are not reused); finding it would mean reading every checkpoint twice.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
from filelock import FileLock

from evalgate.errors import BadInput, EngineError, MissingExtra
from evalgate.fileio import atomic_write
from evalgate.version import install_hint

# Files whose bytes decide what a checkpoint generates. generation_config.json is deliberately absent: evalgate
# never lets it change what is sent to the engine (sampling comes only from the protocol).
_IDENTITY_GLOBS = ("*.safetensors", "*.bin", "*.gguf", "config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "tokenizer.model", "vocab.json", "merges.txt", "chat_template.jinja",
                   "chat_template.json")
_STEP_RE = re.compile(r"checkpoint-(\d+)$")


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


SHA256, BLAKE3 = "sha256", "blake3"
_PREFIX = BLAKE3 + ":"


def digest_algorithm(digest: str) -> str:
    """``"blake3"`` for a ``blake3:<hex>`` identity, ``"sha256"`` for a bare hex one (made before blake3)."""
    return BLAKE3 if digest.startswith(_PREFIX) else SHA256


def digest_hex(digest: str) -> str:
    """The hex part of an identity (``blake3:`` removed), for short names and directory keys."""
    return digest.removeprefix(_PREFIX)


def short_digest(digest: str, n: int = 12) -> str:
    """A checkpoint identity shortened for display: the first ``n`` hex digits, ``blake3:`` kept in front of a
    BLAKE3 identity so the algorithm stays visible (``blake3:af1349b9f5f9``; a sha256 one is bare hex)."""
    head = digest_hex(digest)[:n]
    return f"{_PREFIX}{head}" if digest.startswith(_PREFIX) else head


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in 4 MiB chunks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_blake3(path: Path) -> str:
    """Hex BLAKE3 (the 32-byte default output) of a file, memory-mapped and hashed on all
    cores (``max_threads=AUTO``; the BLAKE3 tree lets chunks be hashed in parallel).

    Raises:
        OSError: the file cannot be read.
    """
    h = blake3.blake3(max_threads=blake3.blake3.AUTO)
    h.update_mmap(path)
    return h.hexdigest()


# Looked up at call time, so a test can count the files actually read.
_FILE_DIGEST: dict[str, Callable[[Path], str]] = {SHA256: lambda p: file_sha256(p), BLAKE3: lambda p: file_blake3(p)}


# A cached file digest is trusted only for files last changed more than this long before it was computed: file
# timestamps are coarse (a kernel tick), so a file rewritten within the same tick keeps its mtime and ctime
# ("racy git", see git's Documentation/technical/racy-git.txt). Such files are simply hashed again next time.
RACY_WINDOW_S = 2.0


class DigestCache:
    """File digests remembered by ``(size, mtime_ns, ctime_ns, inode)``, in ``$EVALGATE_HOME/file-digests.json``.

    Hashing a checkpoint reads every weight byte (0.4 s for SmolLM2-135M in float32, ten seconds and more for a 7B
    model), on every run. A file whose size, modification time, status-change time and inode are unchanged is not
    read again. ``ctime`` cannot be set back by ``touch``/``utime``, so rewriting a file and restoring its mtime is
    still noticed. An entry is ``{"stat": [...], "sha256": hex, "blake3": hex}`` with the algorithms computed so
    far (entries written before blake3 hold only sha256). Set ``EVALGATE_NO_DIGEST_CACHE=1`` to always hash.
    Unreadable or corrupt cache files are ignored (and rewritten).
    """

    def __init__(self, path: Path | None = None):
        self.path = path or Path(os.environ.get("EVALGATE_HOME", ".evalgate")) / "file-digests.json"
        self.enabled = os.environ.get("EVALGATE_NO_DIGEST_CACHE", "") in ("", "0")
        self._entries: dict[str, Any] = {}
        self._new: dict[str, Any] = {}
        if self.enabled:
            try:
                loaded = json.loads(self.path.read_text())
                self._entries = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._entries = {}

    @staticmethod
    def _stat(path: Path) -> tuple[list[int], float]:
        st = path.stat()
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino], max(st.st_mtime_ns, st.st_ctime_ns) / 1e9

    def cached(self, path: Path, algorithm: str) -> str | None:
        """The remembered hex digest of ``path`` under ``algorithm`` (``"sha256"``/``"blake3"``) if its stat
        signature is unchanged, else None; reads no file content."""
        if not self.enabled:
            return None
        key = str(path.resolve())
        sig = self._stat(path)[0]
        for hit in (self._new.get(key), self._entries.get(key)):
            if isinstance(hit, dict) and hit.get("stat") == sig and isinstance(hit.get(algorithm), str):
                return hit[algorithm]
        return None

    def digest(self, path: Path, algorithm: str) -> str:
        """Hex digest of ``path`` under ``algorithm``, from the cache when its stat signature is unchanged, else
        computed (``file_sha256`` / ``file_blake3``) and remembered for ``save``.

        Raises:
            OSError: the file cannot be read.
        """
        if (hit := self.cached(path, algorithm)) is not None:
            return hit
        hash_file = _FILE_DIGEST[algorithm]
        if not self.enabled:
            return hash_file(path)
        key = str(path.resolve())
        sig, changed_at = self._stat(path)
        started = time.time()
        digest = hash_file(path)
        if started - changed_at > RACY_WINDOW_S and self._stat(path)[0] == sig:
            old = next((e for e in (self._new.get(key), self._entries.get(key))
                        if isinstance(e, dict) and e.get("stat") == sig), {})
            self._new[key] = {**old, "stat": sig, algorithm: digest}
        return digest

    def save(self) -> None:
        """Write new entries (merged with the file's current ones, under a lock, atomically); errors ignored: the
        cache only saves time."""
        if not (self.enabled and self._new):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.path) + ".lock"):
                try:
                    current = json.loads(self.path.read_text())
                    current = current if isinstance(current, dict) else {}
                except (OSError, ValueError):
                    current = {}
                for key, entry in self._new.items():
                    were = current.get(key)
                    if isinstance(were, dict) and were.get("stat") == entry["stat"]:
                        entry = {**were, **entry}  # another process added the other algorithm meanwhile
                    current[key] = entry
                atomic_write(self.path, json.dumps(current))
            self._new = {}
        except OSError:
            pass


def identity_files(model_dir: Path) -> list[Path]:
    """The files of an HF directory that decide its outputs (``_IDENTITY_GLOBS``), sorted by name.

    Raises:
        BadInput: the directory holds no weights or no config.json.
    """
    files = sorted({p for g in _IDENTITY_GLOBS for p in model_dir.glob(g) if p.is_file()})
    names = {p.name for p in files}
    if "config.json" not in names or not any(n.endswith((".safetensors", ".bin")) for n in names):
        raise BadInput(
            f"{model_dir} is not an HF checkpoint directory (needs config.json and *.safetensors or *.bin); "
            "pass a model directory or a .gguf file"
        )
    return files


def _combine(files: list[Path], digests: list[str], algorithm: str, single: bool) -> str:
    """The identity string: a single file's digest as it is (a GGUF), else the hash, under the same algorithm, of
    ``name\\0file digest\\n`` per file; ``blake3:`` in front for blake3."""
    if single:
        out = digests[0]
    else:
        h = hashlib.sha256() if algorithm == SHA256 else blake3.blake3()
        for p, d in zip(files, digests, strict=True):
            h.update(f"{p.name}\0{d}\n".encode())
        out = h.hexdigest()
    return out if algorithm == SHA256 else _PREFIX + out


def _identity(files: list[Path], algorithm: str, cache: DigestCache, single: bool) -> str:
    # The files of a sharded checkpoint are hashed side by side (hashlib and blake3 release the GIL).
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        digests = list(pool.map(lambda p: cache.digest(p, algorithm), files))
    return _combine(files, digests, algorithm, single)


def checkpoint_identity(files: list[Path], recorded: Callable[[], str | None] | None = None,
                        cache: DigestCache | None = None, single: bool = False) -> str:
    """The identity of a checkpoint made of ``files``, keeping a sha256 identity it is already known by.

    Args:
        files: the identity files (``identity_files``), or the one GGUF file with ``single=True``.
        recorded: returns the identity the store last recorded for this checkpoint's path
            (``Store.recorded_checkpoint``) or None; called only when the digest cache does not decide (opening
            the store costs more than a fully cached digest). None: no store at hand.
        cache: the DigestCache (default: a new one); saved before returning.
        single: the identity is the one file's own digest (a GGUF), not a hash over names and digests.

    Returns:
        ``blake3:<hex>``, or bare sha256 hex where the checkpoint is known by it: the rule in the module
        docstring.

    Raises:
        OSError: a file cannot be read.
    """
    cache = cache or DigestCache()
    try:
        known = {alg: [d for p in files if (d := cache.cached(p, alg)) is not None] for alg in (SHA256, BLAKE3)}
        complete = [alg for alg, digests in known.items() if len(digests) == len(files)]
        if len(complete) == 1:  # hashed by one algorithm only, unchanged since: no file is read
            return _combine(files, known[complete[0]], complete[0], single)
        last = recorded() if recorded is not None else None
        if last is not None and digest_algorithm(last) == SHA256:
            if (legacy := _identity(files, SHA256, cache, single)) == last:
                return legacy
        return _identity(files, BLAKE3, cache, single)
    finally:
        cache.save()


def dir_digest(model_dir: Path, cache: DigestCache | None = None, algorithm: str = BLAKE3) -> str:
    """The identity of an HF directory under one algorithm: ``algorithm`` over ``name\\0file digest\\n`` of its
    identity files, sorted by name (``blake3:`` in front for blake3). File digests come from ``cache`` (a
    ``DigestCache``; default: a new one) when the files are unchanged.

    Raises:
        BadInput: the directory holds no weights or no config.json.
    """
    cache = cache or DigestCache()
    files = identity_files(model_dir)
    out = _identity(files, algorithm, cache, False)
    cache.save()
    return out


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


def models_dir() -> Path:
    """Where converted GGUF checkpoints are cached: ``$EVALGATE_MODELS``, else ``$EVALGATE_HOME/models``."""
    if os.environ.get("EVALGATE_MODELS"):
        return Path(os.environ["EVALGATE_MODELS"])
    return Path(os.environ.get("EVALGATE_HOME", ".evalgate")) / "models"


def convert_gguf(gguf: Path, digest: str) -> Path:
    """Convert a GGUF file once to an HF safetensors directory ``$EVALGATE_HOME/models/<hex[:16]>`` (``hex``: the
    digest's hex part, ``digest_hex``; a GGUF known by its sha256 keeps its earlier conversion).

    transformers de-quantizes GGUF weights on load but refuses ``save_pretrained`` for such a model, so the state
    dict is saved with safetensors (tied ``lm_head`` dropped), with the config minus ``quantization_config``, the
    generation config and the tokenizer. The directory is written to a temporary name and renamed, under a file
    lock, so concurrent runs convert once and never see half a directory.

    Raises:
        MissingExtra: transformers/torch/gguf not installed.
        EngineError: the conversion failed.
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

            from evalgate.progress import gguf_conversion_bars
        except ImportError as e:
            raise MissingExtra(
                f"converting a GGUF checkpoint needs the hf extra: {install_hint('hf')} ({e})") from e
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
            raise EngineError(f"could not convert GGUF {gguf} to an HF directory: {e}") from e
    return out


def _trainer_state(dir_: Path) -> dict | None:
    f = dir_ / "trainer_state.json"
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
    if m := _STEP_RE.search(dir_.name):
        values["step"], src["step"] = int(m.group(1)), f"folder name {dir_.name!r}"
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
    elif _STEP_RE.search(dir_.name):
        values["train_run"], src["train_run"] = dir_.parent.name, f"folder holding {dir_.name!r}"
    for k, looked in (("train_seed", "no seed-N/seed_N folder, training_args.bin or trainer_state.json seed; "
                                     "pass --train-seed"),
                      ("train_run", "no seed-N or checkpoint-N folder to name it after; pass --train-run"),
                      ("step", "no checkpoint-N folder or trainer_state.json global_step; pass --step")):
        src.setdefault(k, f"not inferred: {looked}")
    return values, src


def resolve_checkpoint(
    path: str | Path,
    train_run: str | None = None,
    train_seed: int | None = None,
    step: int | None = None,
    recorded: Callable[[str], str | None] | None = None,
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

    Raises:
        BadInput: path missing or neither an HF directory nor a ``.gguf`` file.
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
        digest = checkpoint_identity([p], (lambda: recorded(str(p))) if recorded else None, single=True)
        prov = {k: "flag" if v is not None else "not inferred: a GGUF file carries no training metadata; pass "
                f"--{k.replace('_', '-')}" for k, v in given.items()}
        return Checkpoint(p, "gguf", digest, convert_gguf(p, digest), train_run, train_seed, step, prov)
    digest = checkpoint_identity(identity_files(p), (lambda: recorded(str(p))) if recorded else None)
    check_weight_files(p)
    inferred, src = infer_training(p)
    values = {k: given[k] if given[k] is not None else inferred[k] for k in given}
    prov = {k: "flag" if given[k] is not None else src[k] for k in given}
    return Checkpoint(p, "hf", digest, p, values["train_run"], values["train_seed"], values["step"], prov)


def load_tokenizer(model_dir: str | Path) -> Any:
    """The checkpoint's tokenizer (transformers ``AutoTokenizer``), which evalgate uses to render chat templates.

    Raises:
        MissingExtra: transformers not installed.
        BadInput: the directory has no loadable tokenizer.
    """
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
