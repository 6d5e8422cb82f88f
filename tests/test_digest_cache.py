"""The file digest cache behind checkpoint identity: a file is hashed again whenever it may have changed."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from evalgate import checkpoints
from evalgate.checkpoints import DigestCache, dir_digest


def _old(path: Path, data: bytes) -> None:
    """Write ``data`` and date the file an hour back, as a checkpoint written long ago."""
    path.write_bytes(data)
    t = time.time() - 3600
    os.utime(path, (t, t))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    hashed: list[Path] = []
    real = checkpoints.file_sha256

    def spy(path: Path, chunk: int = 1 << 22) -> str:
        hashed.append(path)
        return real(path, chunk)

    monkeypatch.setattr(checkpoints, "file_sha256", spy)
    return hashed


def test_unchanged_file_is_not_read_again_and_a_rewrite_is_noticed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.05)
    hashed = _counting(monkeypatch)
    f = tmp_path / "model.safetensors"
    _old(f, b"aaaa")
    time.sleep(0.1)  # the utime above changed ctime to now: let it age past the racy window
    cache_file = tmp_path / "digests.json"
    assert DigestCache(cache_file).sha256(f) == hashlib.sha256(b"aaaa").hexdigest()
    c = DigestCache(cache_file)
    c.sha256(f)
    c.save()
    assert len(hashed) == 2  # nothing saved by the first (no save()), so the second hashed too
    assert DigestCache(cache_file).sha256(f) == hashlib.sha256(b"aaaa").hexdigest()
    assert len(hashed) == 2  # third: from the cache file, not read

    # same size, the old mtime put back: ctime still moves, so the new bytes are hashed
    st = f.stat()
    time.sleep(0.1)
    f.write_bytes(b"bbbb")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert DigestCache(cache_file).sha256(f) == hashlib.sha256(b"bbbb").hexdigest()
    assert len(hashed) == 3


def test_a_file_changed_within_the_racy_window_is_not_remembered(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    hashed = _counting(monkeypatch)
    f = tmp_path / "config.json"
    f.write_text("{}")  # just written: a rewrite in the same timestamp tick could go unseen
    cache_file = tmp_path / "digests.json"
    for _ in range(2):
        c = DigestCache(cache_file)
        c.sha256(f)
        c.save()
    assert len(hashed) == 2 and not cache_file.exists()


def test_disabled_by_environment_and_corrupt_cache_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.0)
    hashed = _counting(monkeypatch)
    f = tmp_path / "w.bin"
    _old(f, b"x")
    cache_file = tmp_path / "digests.json"
    cache_file.write_text("{not json")
    c = DigestCache(cache_file)
    assert c.sha256(f) == hashlib.sha256(b"x").hexdigest()
    c.save()
    monkeypatch.setenv("EVALGATE_NO_DIGEST_CACHE", "1")
    DigestCache(cache_file).sha256(f)
    assert len(hashed) == 2


def test_dir_digest_equals_the_uncached_formula(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.0)
    for name, data in [("config.json", b"{}"), ("model.safetensors", b"w" * 10), ("README.md", b"not identity")]:
        _old(tmp_path / name, data)
    # by hand: sha256 over "name\0sha256(file)\n" for the identity files, sorted by name
    expect = hashlib.sha256(b"".join(f"{n}\0{hashlib.sha256(d).hexdigest()}\n".encode()
                                     for n, d in [("config.json", b"{}"), ("model.safetensors", b"w" * 10)]))
    cache = tmp_path / "c.json"
    assert dir_digest(tmp_path, DigestCache(cache)) == expect.hexdigest()
    assert dir_digest(tmp_path, DigestCache(cache)) == expect.hexdigest()  # from the cache: same answer
    assert cache.exists()


def test_file_sha256_equals_hashlib_and_raises_read_errors(tmp_path: Path) -> None:
    from evalgate.checkpoints import file_sha256

    data = bytes(range(256)) * 70_001  # not a multiple of the chunk size
    f = tmp_path / "w.safetensors"
    f.write_bytes(data)
    assert file_sha256(f, chunk=4096) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert file_sha256(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()
    with pytest.raises(OSError):
        file_sha256(tmp_path / "missing")
    with pytest.raises(OSError):
        file_sha256(tmp_path)
