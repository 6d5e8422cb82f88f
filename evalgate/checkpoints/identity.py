"""Checkpoint identity: BLAKE3/sha256 file digests, the digest cache, and a checkpoint's identity over its files.

A checkpoint is an HF model directory or a GGUF file. Its identity is a digest over exactly what the loaders open
(``identity_files``: config, generation config, tokenizer and chat template files, weight indexes and every weight
file, remote code), so the generation cache, re-reads and gate decisions never confuse two checkpoints
(docs/CHECKPOINTS.md, "What the identity covers"; a GGUF: the file's own digest).

Digest algorithms. New identities are BLAKE3 (``blake3:<64 hex>``); identities made before are bare sha256 hex and
stay valid (``digest_algorithm``). ``checkpoint_identity`` picks the algorithm per checkpoint:

1. the digest cache holds, for every identity file at its current stat, the digests of one algorithm only: that
   algorithm (no file is read unless ``verify``);
2. otherwise the store's latest run of this path (``recorded``) decides: a sha256 identity is computed and kept if
   it equals the recorded one; anything else makes a blake3 identity.

Trust. The digest cache (``$EVALGATE_HOME/file-digests.json``) is unauthenticated: anyone who can write the store's
directory can pair a changed file's stat with an old digest. It only speeds up runs on smoke and dev splits;
``verify=True`` (runs on public, private and human-audit splits, the gate, ``verify_identity``) hashes every byte
and warns about a cache entry the bytes contradict (docs/SECURITY.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import blake3
from filelock import FileLock

from evalgate.checkpoints.layout import not_hf_checkpoint, weight_files
from evalgate.core.environment import Environment, or_from_env
from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write
from evalgate.core.formatting import short_digest  # noqa: F401 - display; kept importable from here

# What the loaders open beside the weights (transformers' config, generation config, tokenizer and chat template
# files; vLLM reads the same). generation_config.json is in: transformers' generate() takes eos_token_id and more
# from it, and vLLM its default stop tokens.
LOADER_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "added_tokens.json", "tokenizer.model", "vocab.json", "vocab.txt",
                "merges.txt", "spiece.model", "sentencepiece.bpe.model", "chat_template.jinja", "chat_template.json")
LOADER_GLOBS = ("*.tiktoken", "additional_chat_templates/*.jinja", "*.index.json")
"""Patterns of further loader files: tiktoken vocabularies, named chat templates, weight indexes
(``*.safetensors.index.json``, ``*.bin.index.json``)."""
ADAPTER_FILES = ("adapter_config.json",)
"""A PEFT adapter's config: with ``peft`` installed, transformers then loads the base model it names (anywhere on
disk) and the adapter, not the directory's own weights; evalgate refuses such a directory (``identity_files``)."""


SHA256, BLAKE3 = "sha256", "blake3"
_PREFIX = BLAKE3 + ":"


def digest_algorithm(digest: str) -> str:
    """``"blake3"`` for a ``blake3:<hex>`` identity, ``"sha256"`` for a bare hex one (made before blake3)."""
    return BLAKE3 if digest.startswith(_PREFIX) else SHA256


def digest_hex(digest: str) -> str:
    """The hex part of an identity (``blake3:`` removed), for short names and directory keys."""
    return digest.removeprefix(_PREFIX)


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


# Digests this process computed from the bytes while verifying, by (resolved path, algorithm) -> (stat, digest):
# the gate verifies its checkpoints and then evaluates them, which verifies again. Kept in memory only, where no
# store writer can edit it.
_VERIFIED: dict[tuple[str, str], tuple[list[int], str]] = {}


class DigestCache:
    """File digests remembered by ``(size, mtime_ns, ctime_ns, inode)``, in ``$EVALGATE_HOME/file-digests.json``.

    Hashing a checkpoint reads every weight byte (0.4 s for SmolLM2-135M in float32, ten seconds and more for a 7B
    model), on every run. A file whose size, modification time, status-change time and inode are unchanged is not
    read again. ``ctime`` cannot be set back by ``touch``/``utime``, so rewriting a file and restoring its mtime is
    still noticed. An entry is ``{"stat": [...], "sha256": hex, "blake3": hex}`` with the algorithms computed so
    far (entries written before blake3 hold only sha256). Set ``EVALGATE_NO_DIGEST_CACHE=1`` to always hash.
    Unreadable or corrupt cache files are ignored (and rewritten).

    Args:
        path: the cache file (default ``env.home/file-digests.json``).
        env: whose home and ``digest_cache`` switch (default the process's, ``or_from_env``).
    """

    def __init__(self, path: Path | None = None, *, env: Environment | None = None):
        env = or_from_env(env)
        self.path = path or env.home / "file-digests.json"
        self.enabled = env.digest_cache
        self._entries: dict[str, Any] = {}
        self._new: dict[str, Any] = {}
        self.contradicted: list[str] = []
        """Files whose cache entry their bytes contradicted (``digest`` with ``verify``)."""
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

    def digest(self, path: Path, algorithm: str, verify: bool = False) -> str:
        """Hex digest of ``path`` under ``algorithm``, from the cache when its stat signature is unchanged (never
        with ``verify``), else computed (``file_sha256`` / ``file_blake3``) and remembered for ``save``. With
        ``verify``, a cache entry for the same stat that the bytes contradict is reported on stderr and replaced:
        the cache was edited (``rms_norm_eps`` changed, the new stat copied into the old entry) or the file
        rewritten by something that kept size, times and inode.

        Raises:
            OSError: the file cannot be read.
        """
        hit = self.cached(path, algorithm)
        if hit is not None and not verify:
            return hit
        hash_file = _FILE_DIGEST[algorithm]
        key = str(path.resolve())
        sig, changed_at = self._stat(path)
        if verify and (seen := _VERIFIED.get((key, algorithm))) and seen[0] == sig:
            return seen[1]
        started = time.time()
        digest = hash_file(path)
        if verify and started - changed_at > RACY_WINDOW_S and self._stat(path)[0] == sig:
            _VERIFIED[(key, algorithm)] = (sig, digest)
        if not self.enabled:
            return digest
        if hit is not None and hit != digest:
            print(f"warning: the digest cache {self.path} holds a {algorithm} digest for {path} at its current "
                  "size, times and inode that its bytes do not have (an edited cache, or a file rewritten with its "
                  "stat kept): the identity is computed from the bytes and the entry replaced", file=sys.stderr)
            self.contradicted.append(str(path))
        if started - changed_at > RACY_WINDOW_S and self._stat(path)[0] == sig:
            old = next((e for e in (self._new.get(key), self._entries.get(key))
                        if isinstance(e, dict) and e.get("stat") == sig and e.get(algorithm) in (None, digest)), {})
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
                    if isinstance(were, dict) and were.get("stat") == entry["stat"] and all(
                            were.get(a) in (None, entry[a]) for a in (SHA256, BLAKE3) if a in entry):
                        entry = {**were, **entry}  # another process added the other algorithm meanwhile
                    current[key] = entry
                atomic_write(self.path, json.dumps(current))
            self._new = {}
        except OSError:
            pass


def _index_shards(model_dir: Path, index: Path) -> list[Path]:
    """The weight files a ``*.index.json`` names (its ``weight_map`` values), each checked to be a file directly in
    ``model_dir``.

    Raises:
        BadInput: the index does not parse, names a file outside the directory, or names one that is missing.
    """
    try:
        names = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise BadInput(f"{index}: not a weight index (a JSON object with a 'weight_map' of tensor -> file): "
                       f"{type(e).__name__}: {e}; copy the checkpoint again") from e
    out = []
    for name in sorted(str(n) for n in names):
        if Path(name).name != name or name in ("", ".", ".."):
            raise BadInput(f"{index}: names weight file {name!r} outside the checkpoint directory; a checkpoint's "
                           "index names files beside it")
        if not (model_dir / name).is_file():
            raise BadInput(f"{index}: names weight file {name!r}, which is not in {model_dir}; the checkpoint is "
                           "incomplete (still being written, or a partial copy)")
        out.append(model_dir / name)
    return out


def _remote_code(model_dir: Path) -> list[Path]:
    """The Python files of a directory whose ``config.json`` has an ``auto_map`` (remote code transformers runs with
    ``trust_remote_code``): every top-level ``*.py``, as a module named there may import its neighbours."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return sorted(model_dir.glob("*.py")) if isinstance(cfg, dict) and cfg.get("auto_map") else []


def identity_files(model_dir: Path) -> list[Path]:
    """The files of an HF directory its loaders open, sorted by path: ``LOADER_FILES`` and ``LOADER_GLOBS`` present,
    every weight file (``*.safetensors``, ``*.bin`` but ``training_args.bin``: each index's shards, and any weight
    file no index names, which is hashed too), and remote code (``_remote_code``).

    Raises:
        BadInput: the directory holds no weights or no config.json; a weight index does not parse or names a
            missing file or one outside the directory; a PEFT adapter (``ADAPTER_FILES``): merge it first.
    """
    why = not_hf_checkpoint(model_dir)
    if why:
        raise BadInput(f"{model_dir} is not an HF checkpoint directory ({why}; needs config.json and *.safetensors or "
                       "*.bin weights); pass a model directory or a .gguf file")
    if adapter := next((model_dir / a for a in ADAPTER_FILES if (model_dir / a).exists()), None):
        raise BadInput(f"{adapter}: a PEFT adapter; evalgate evaluates complete weights only (with peft installed, "
                       "transformers would load the base model the adapter names, from outside this directory). "
                       "Merge it (peft's merge_and_unload, then save_pretrained) and pass the merged directory")
    files = {model_dir / n for n in LOADER_FILES} | {p for g in LOADER_GLOBS for p in model_dir.glob(g)}
    files = {p for p in files if p.is_file()} | set(weight_files(model_dir)) | set(_remote_code(model_dir))
    for index in sorted(model_dir.glob("*.index.json")):
        files.update(_index_shards(model_dir, index))
    return sorted(files)


def _name(p: Path) -> str:
    """A file's name in the identity: its name, with its folder for a named chat template."""
    return f"{p.parent.name}/{p.name}" if p.parent.name == "additional_chat_templates" else p.name


def _combine(files: list[Path], digests: list[str], algorithm: str, single: bool) -> str:
    """The identity string: a single file's digest as it is (a GGUF), else the hash, under the same algorithm, of
    ``name\\0file digest\\n`` per file; ``blake3:`` in front for blake3."""
    if single:
        out = digests[0]
    else:
        h = hashlib.sha256() if algorithm == SHA256 else blake3.blake3()
        for p, d in zip(files, digests, strict=True):
            h.update(f"{_name(p)}\0{d}\n".encode())
        out = h.hexdigest()
    return out if algorithm == SHA256 else _PREFIX + out


def _identity(files: list[Path], algorithm: str, cache: DigestCache, single: bool, verify: bool = False) -> str:
    # The files of a sharded checkpoint are hashed side by side (hashlib and blake3 release the GIL).
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        digests = list(pool.map(lambda p: cache.digest(p, algorithm, verify), files))
    return _combine(files, digests, algorithm, single)


def checkpoint_identity(files: list[Path], recorded: Callable[[], str | None] | None = None,
                        cache: DigestCache | None = None, single: bool = False, verify: bool = False) -> str:
    """The identity of a checkpoint made of ``files``, keeping a sha256 identity it is already known by.

    Args:
        files: the identity files (``identity_files``), or the one GGUF file with ``single=True``.
        recorded: returns the identity the store last recorded for this checkpoint's path
            (``Store.recorded_checkpoint``) or None; called only when the digest cache does not decide (opening
            the store costs more than a fully cached digest). None: no store at hand.
        cache: the DigestCache (default: a new one); saved before returning.
        single: the identity is the one file's own digest (a GGUF), not a hash over names and digests.
        verify: hash every byte (the cache still picks the algorithm, and is refreshed); for every trust
            decision (runs on public, private and human-audit splits, the gate). False: a file whose stat
            signature is cached is not read (smoke and dev runs, sweeps, watch).

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
        if len(complete) == 1:  # hashed by one algorithm only, unchanged since: read only to verify
            if not verify:
                return _combine(files, known[complete[0]], complete[0], single)
            return _identity(files, complete[0], cache, single, verify)
        last = recorded() if recorded is not None else None
        if last is not None and digest_algorithm(last) == SHA256:
            if (legacy := _identity(files, SHA256, cache, single, verify)) == last:
                return legacy
        return _identity(files, BLAKE3, cache, single, verify)
    finally:
        cache.save()


def verify_identity(path: Path, expected: str, *, env: Environment | None = None) -> str:
    """The identity of the checkpoint at ``path`` (an HF directory or a ``.gguf`` file) computed from its bytes
    under the algorithm of ``expected`` (no cached digest is taken): equal to ``expected`` exactly when the files
    its loaders open are the ones that identity was made of. For the gate, which decides on stored runs.
    ``env``: whose digest cache is refreshed (default the process's).

    Raises:
        BadInput: not a checkpoint (``identity_files``).
        OSError: a file cannot be read.
    """
    single = path.is_file()
    files = [path] if single else identity_files(path)
    cache = DigestCache(env=env)
    try:
        return _identity(files, digest_algorithm(expected), cache, single, verify=True)
    finally:
        cache.save()


def dir_digest(model_dir: Path, cache: DigestCache | None = None, algorithm: str = BLAKE3,
               verify: bool = False) -> str:
    """The identity of an HF directory under one algorithm: ``algorithm`` over ``name\\0file digest\\n`` of its
    identity files, sorted by name (``blake3:`` in front for blake3). File digests come from ``cache`` (a
    ``DigestCache``; default: a new one) when the files are unchanged and ``verify`` is False.

    Raises:
        BadInput: the directory holds no weights or no config.json (``identity_files``).
    """
    cache = cache or DigestCache()
    files = identity_files(model_dir)
    out = _identity(files, algorithm, cache, False, verify)
    cache.save()
    return out
