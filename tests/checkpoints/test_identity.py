"""Checkpoint identity: the file digest cache (a file is hashed again whenever it may have changed), BLAKE3 for new
identities, and checkpoints known by their sha256 identity keeping it (issue 21)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import blake3
import pytest

from evalgate.checkpoints import identity as checkpoints
from evalgate.checkpoints.identity import DigestCache, digest_algorithm, dir_digest
from evalgate.store import Store


def _old(path: Path, data: bytes) -> None:
    """Write ``data`` and date the file an hour back, as a checkpoint written long ago."""
    path.write_bytes(data)
    t = time.time() - 3600
    os.utime(path, (t, t))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file read to hash it, under either algorithm."""
    hashed: list[Path] = []
    for name in ("file_sha256", "file_blake3"):
        real = getattr(checkpoints, name)

        def spy(path: Path, real: Any = real) -> str:
            hashed.append(path)
            return str(real(path))

        monkeypatch.setattr(checkpoints, name, spy)
    return hashed


def _b3(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()


ALGORITHMS = {"sha256": lambda b: hashlib.sha256(b).hexdigest(), "blake3": _b3}


@pytest.mark.parametrize("alg", ["sha256", "blake3"])
def test_unchanged_file_is_not_read_again_and_a_rewrite_is_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   alg: str) -> None:
    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.05)
    hashed = _counting(monkeypatch)
    expect = ALGORITHMS[alg]
    f = tmp_path / "model.safetensors"
    _old(f, b"aaaa")
    time.sleep(0.1)  # the utime above changed ctime to now: let it age past the racy window
    cache_file = tmp_path / "digests.json"
    assert DigestCache(cache_file).digest(f, alg) == expect(b"aaaa")
    c = DigestCache(cache_file)
    c.digest(f, alg)
    c.save()
    assert len(hashed) == 2  # nothing saved by the first (no save()), so the second hashed too
    assert DigestCache(cache_file).digest(f, alg) == expect(b"aaaa")
    assert len(hashed) == 2  # third: from the cache file, not read

    # same size, the old mtime put back: ctime still moves, so the new bytes are hashed
    st = f.stat()
    time.sleep(0.1)
    f.write_bytes(b"bbbb")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert DigestCache(cache_file).digest(f, alg) == expect(b"bbbb")
    assert len(hashed) == 3


def test_a_file_changed_within_the_racy_window_is_not_remembered(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    hashed = _counting(monkeypatch)
    f = tmp_path / "config.json"
    f.write_text("{}")  # just written: a rewrite in the same timestamp tick could go unseen
    cache_file = tmp_path / "digests.json"
    for _ in range(2):
        c = DigestCache(cache_file)
        c.digest(f, "blake3")
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
    assert c.digest(f, "sha256") == hashlib.sha256(b"x").hexdigest()
    c.save()
    monkeypatch.setenv("EVALGATE_NO_DIGEST_CACHE", "1")
    DigestCache(cache_file).digest(f, "sha256")
    assert len(hashed) == 2


@pytest.mark.parametrize("alg, prefix", [("sha256", ""), ("blake3", "blake3:")])
def test_dir_digest_equals_the_uncached_formula(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alg: str,
                                                prefix: str) -> None:
    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.0)
    for name, data in [("config.json", b"{}"), ("model.safetensors", b"w" * 10), ("README.md", b"not identity")]:
        _old(tmp_path / name, data)
    # by hand: the algorithm over "name\0digest(file)\n" for the identity files, sorted by name (sha256: the
    # identity every checkpoint had before blake3, bare hex)
    h = ALGORITHMS[alg]
    expect = prefix + h(b"".join(f"{n}\0{h(d)}\n".encode()
                                 for n, d in [("config.json", b"{}"), ("model.safetensors", b"w" * 10)]))
    cache = tmp_path / "c.json"
    assert dir_digest(tmp_path, DigestCache(cache), alg) == expect
    assert dir_digest(tmp_path, DigestCache(cache), alg) == expect  # from the cache: same answer
    assert cache.exists()
    assert digest_algorithm(expect) == alg


def test_file_sha256_equals_hashlib_and_raises_read_errors(tmp_path: Path) -> None:
    from evalgate.checkpoints.identity import file_sha256

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


# BLAKE3 spec's official vectors (BLAKE3-team/BLAKE3 test_vectors/test_vectors.json): input bytes i % 251, the
# first 32 bytes of each case's extended "hash" output. 1025 and 7169 bytes span several 1 KiB chunks (the tree).
@pytest.mark.parametrize("length, expect", [
    (0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"),
    (1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"),
    (1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"),
    (7169, "a003fc7a51754a9b3c7fae0367ab3d782dccf28855a03d435f8cfe74605e7817"),
])
def test_file_blake3_equals_the_spec_test_vectors(tmp_path: Path, length: int, expect: str) -> None:
    from evalgate.checkpoints.identity import file_blake3

    f = tmp_path / "input"
    f.write_bytes(bytes(i % 251 for i in range(length)))
    assert file_blake3(f) == expect


def _model(d: Path, weights: bytes = b"\x01\x02\x03\x04") -> dict[str, bytes]:
    """A minimal HF directory (config.json + a valid safetensors file), dated an hour back; returns its identity
    files' bytes by name."""
    import numpy as np
    from safetensors.numpy import save

    d.mkdir(parents=True, exist_ok=True)
    files = {"config.json": b'{"model_type": "llama"}',
             "model.safetensors": save({"w": np.frombuffer(weights, dtype=np.uint8)})}
    for name, data in files.items():
        _old(d / name, data)
    return files


def _by_hand(files: dict[str, bytes], alg: str) -> str:
    h = ALGORITHMS[alg]
    out = h(b"".join(f"{n}\0{h(files[n])}\n".encode() for n in sorted(files)))
    return out if alg == "sha256" else "blake3:" + out


def test_a_new_checkpoint_gets_a_blake3_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.checkpoints.resolve import resolve_checkpoint

    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.0)
    files = _model(tmp_path / "ckpt")
    asked: list[str] = []

    def recorded(path: str) -> None:  # a store that knows nothing of this checkpoint
        asked.append(path)

    ck = resolve_checkpoint(tmp_path / "ckpt", recorded=recorded)
    assert ck.digest == _by_hand(files, "blake3") and digest_algorithm(ck.digest) == "blake3"
    assert asked == [str((tmp_path / "ckpt").resolve())]
    hashed = _counting(monkeypatch)
    assert resolve_checkpoint(tmp_path / "ckpt", recorded=recorded).digest == ck.digest
    assert hashed == [] and len(asked) == 1  # from the digest cache: nothing read, the store not asked


def test_old_digest_cache_entries_keep_the_sha256_identity_without_reading(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache file as the code before blake3 wrote it ({"stat", "sha256"} per file): the checkpoint keeps its
    sha256 identity and no byte is read; a changed file then makes a new, blake3, identity."""
    from evalgate.checkpoints.resolve import resolve_checkpoint

    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.0)
    d = tmp_path / "ckpt"
    files = _model(d)
    entries = {}
    for name, data in files.items():
        st = (d / name).stat()
        entries[str((d / name).resolve())] = {"stat": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino],
                                              "sha256": hashlib.sha256(data).hexdigest()}
    DigestCache().path.parent.mkdir(parents=True)
    DigestCache().path.write_text(json.dumps(entries))
    hashed = _counting(monkeypatch)
    assert resolve_checkpoint(d).digest == _by_hand(files, "sha256") and hashed == []
    files = _model(d, weights=b"\x01\x02\x03\x05")  # same size, new bytes
    assert resolve_checkpoint(d).digest == _by_hand(files, "blake3")


def _replay_run(tmp_path: Path) -> tuple[Path, Any]:
    """A frozen protocol, a one-item split and replay RunOptions (no model runs)."""
    import yaml

    from evalgate.protocol.freeze import freeze
    from evalgate.runner.evaluate import RunOptions
    from evalgate.splits import write_split

    proto = tmp_path / "legacy.yaml"
    proto.write_text(yaml.safe_dump({
        "name": "legacy", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
        "sampling": {"max_tokens": 8}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
        "extraction": {"rule": "gsm8k"}}))
    freeze(proto, Store)
    write_split("sums", "dev", [{"id": "a", "prompt": "1+1?", "answer": "2"}], {"source": "test"})
    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"item_id": "a", "turn": 0, "text": "The answer is 2"}) + "\n")
    return proto, RunOptions(backend="replay", backend_options={"file": str(replay)}, progress=False)


def test_a_store_of_sha256_runs_stays_a_cache_hit_and_sweep_skips_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs stored under a checkpoint's sha256 identity (as every run before blake3; no digest cache left, e.g.
    another machine): the rerun keeps that identity, generates nothing and a sweep skips the unit. Changed
    weights make a new, blake3, identity that the run records with its algorithm."""
    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.core.errors import BadInput
    from evalgate.runner import prompts
    from evalgate.runner.evaluate import evaluate
    from evalgate.store import Store
    from evalgate.sweep import SweepOptions, sweep

    def no_tokenizer(model_dir: Path) -> None:  # the directory has none (chat_template none): skip importing
        raise BadInput("no tokenizer")        # transformers only to find that out

    monkeypatch.setattr(prompts, "load_tokenizer", no_tokenizer)
    d = tmp_path / "seed-1" / "checkpoint-5"
    files = _model(d)
    proto, opts = _replay_run(tmp_path)
    store = Store()
    legacy = _by_hand(files, "sha256")  # what resolve_checkpoint returned before blake3
    old = evaluate(proto, Checkpoint(d.resolve(), "hf", legacy, d.resolve()), "sums", opts, store)
    assert old["counts"]["generated"] == 1
    monkeypatch.setenv("EVALGATE_NO_DIGEST_CACHE", "1")
    again = evaluate(proto, d, "sums", opts, store)
    assert again["checkpoint"]["digest"] == legacy and again["checkpoint"]["digest_algorithm"] == "sha256"
    assert (again["counts"]["generated"], again["counts"]["cached"]) == (0, 1)
    swept = sweep(proto, str(tmp_path / "seed-*" / "checkpoint-*"), ["sums"], SweepOptions(run=opts), store)
    assert swept.counts == {"skipped": 1}

    files = _model(d, weights=b"\x09\x02\x03\x04")
    new = evaluate(proto, d, "sums", opts, store)
    assert new["checkpoint"]["digest"] == _by_hand(files, "blake3")
    assert new["checkpoint"]["digest_algorithm"] == "blake3" and new["counts"]["generated"] == 1
    stored = store.runs(run_id=new["run_id"])[0]
    assert stored.checkpoint_digest == new["checkpoint"]["digest"]
    hashed = _counting(monkeypatch)
    assert evaluate(proto, d, "sums", opts, store)["counts"]["generated"] == 0
    # blake3 recorded: each file read once (blake3: the cache is off), no sha256 computed to compare
    assert sorted(hashed) == [d.resolve() / "config.json", d.resolve() / "model.safetensors"]


def test_a_gate_baseline_known_by_sha256_keeps_that_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline a gate resolves (evaluating its decision reads) gets the identity its stored runs have, so the
    gate's inputs, and with them the reuse of an unchanged gate, stay as they were."""
    import yaml

    from evalgate.gate import load_policy
    from evalgate.gate.reads import baseline_digest
    from evalgate.store import Store
    from tests import gate_fixtures as fx

    monkeypatch.setenv("EVALGATE_NO_DIGEST_CACHE", "1")
    base = tmp_path / "baseline"
    files = _model(base)
    store = Store()
    fx.add_run(store, "dev-base", _by_hand(files, "sha256"), base.resolve(), "fx-dev", "dev", None, None, fx.B,
               split_sha256="s")
    policy_file = tmp_path / "gate.yaml"
    policy_file.write_text(yaml.safe_dump(fx.policy_dict(str(base))))
    policy = load_policy(policy_file)
    assert baseline_digest(policy, [], True, store) == _by_hand(files, "sha256")
    empty = Store(tmp_path / "empty.duckdb")  # no store record, no digest cache
    assert baseline_digest(policy, [], True, empty) == _by_hand(files, "blake3")


def test_runs_are_found_by_a_digest_prefix_with_or_without_the_algorithm(tmp_path: Path) -> None:
    from evalgate.store import Store
    from evalgate.views.runs import select_runs
    from tests import gate_fixtures as fx

    store = Store()
    for run_id, digest in (("new", "blake3:" + "ab12" * 16), ("old", "ab12" * 15 + "cdef")):
        fx.add_run(store, run_id, digest, tmp_path / run_id, "fx-dev", "dev", None, None, fx.B, split_sha256="s")
    assert [r.run_id for r in select_runs(store, checkpoint="blake3:ab12ab")] == ["new"]
    assert [r.run_id for r in select_runs(store, checkpoint="ab12ab12")] == ["new", "old"]


def test_a_gguf_keeps_its_sha256_identity_and_conversion_and_a_new_one_gets_blake3(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GGUF's identity is the file's own digest; its conversion directory is keyed by the digest's hex part, so a
    GGUF hashed before blake3 (the cache entry the old code wrote) finds the conversion made then."""
    from evalgate.checkpoints.resolve import resolve_checkpoint

    monkeypatch.setattr(checkpoints, "RACY_WINDOW_S", 0.0)
    monkeypatch.setenv("EVALGATE_MODELS", str(tmp_path / "models"))
    old, new = tmp_path / "old.gguf", tmp_path / "new.gguf"
    _old(old, b"GGUF" + b"\x00" * 60)
    _old(new, b"GGUF" + b"\x01" * 60)
    sha, b3 = hashlib.sha256(old.read_bytes()).hexdigest(), _b3(new.read_bytes())
    for key in (sha[:16], b3[:16]):  # conversions already made (converting needs a real model)
        (tmp_path / "models" / key).mkdir(parents=True)
        (tmp_path / "models" / key / "config.json").write_text("{}")
    st = old.stat()
    DigestCache().path.parent.mkdir(parents=True)
    DigestCache().path.write_text(json.dumps({str(old.resolve()): {
        "stat": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino], "sha256": sha}}))
    ck = resolve_checkpoint(old)
    assert (ck.digest, ck.model_dir) == (sha, tmp_path / "models" / sha[:16])
    ck = resolve_checkpoint(new)
    assert (ck.digest, ck.model_dir) == ("blake3:" + b3, tmp_path / "models" / b3[:16])


def test_short_digest_keeps_the_algorithm_visible() -> None:
    from evalgate.core.formatting import short_digest

    sha = "ab" * 32
    assert short_digest(sha) == "abababababab"  # a bare sha256 identity: 12 hex digits
    # the BLAKE3 spec's empty-input hash as an identity: prefix kept, then 12 hex digits (not "blake3:af134")
    assert short_digest("blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262") == \
        "blake3:af1349b9f5f9"


@pytest.mark.parametrize("text,problem", [('{"model_type": "llama",\n', ":2: checkpoint config is not valid JSON"),
                                          ("[1, 2]", ": checkpoint config must be a JSON object, not list")])
def test_a_damaged_config_is_named_not_taken_for_missing_tokenizer_files(tmp_path: Path, text: str,
                                                                         problem: str) -> None:
    # fresh-user finding: 'evalgate run' said "no loadable tokenizer (... config file ... is not a valid JSON
    # file); a checkpoint directory needs its tokenizer files"
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.core.errors import BadInput

    _model(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "config.json").write_text(text)
    with pytest.raises(BadInput) as e:
        resolve_checkpoint(tmp_path / "ckpt")
    assert e.value.message.startswith(f"{tmp_path / 'ckpt' / 'config.json'}{problem}")
