"""Checkpoint identity: BLAKE3/sha256 file digests, the digest cache, and a checkpoint's identity over its files.

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
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import blake3
from filelock import FileLock

from evalgate.checkpoints.layout import not_hf_checkpoint
from evalgate.core.environment import active
from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write

# Files whose bytes decide what a checkpoint generates. generation_config.json is deliberately absent: evalgate
# never lets it change what is sent to the engine (sampling comes only from the protocol).
_IDENTITY_GLOBS = ("*.safetensors", "*.bin", "*.gguf", "config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "tokenizer.model", "vocab.json", "merges.txt", "chat_template.jinja",
                   "chat_template.json")


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
        env = active()
        self.path = path or env.home / "file-digests.json"
        self.enabled = env.digest_cache
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
    why = not_hf_checkpoint(model_dir)
    if why:
        raise BadInput(f"{model_dir} is not an HF checkpoint directory ({why}; needs config.json and *.safetensors or "
                       "*.bin weights); pass a model directory or a .gguf file")
    files = sorted({p for g in _IDENTITY_GLOBS for p in model_dir.glob(g) if p.is_file()})
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

