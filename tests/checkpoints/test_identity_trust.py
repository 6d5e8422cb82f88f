"""Issue 42, items 1 and 2: a checkpoint's identity is the content of what its loaders open, and no trust decision
takes a digest from the stat-keyed cache.

Attacks as the issue found them on landed main: the digest cache poisoned (config.json changed, its new stat copied
into the old entry: the old identity came back without a byte read), and the shard index outside the identity (two
complete weight files, the index edited to name the other: same identity). Neighbours: ``*.bin.index.json``, a
weight file no index names, tokenizer and chat template files, generation_config.json, remote code, PEFT adapters,
and a GGUF file. Expected identities are computed here by hand from the formula (docs/ARCHITECTURE.md): the
algorithm over ``name\\0digest(file)\\n`` per identity file, sorted by path.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import blake3
import pytest

from evalgate.checkpoints import identity as ident
from evalgate.checkpoints.identity import checkpoint_identity, identity_files, verify_identity
from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.core.errors import BadInput

CONFIG = {"model_type": "llama", "rms_norm_eps": 1e-5}


def _old(path: Path, data: bytes) -> None:
    """Write ``data`` and date the file an hour back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    t = time.time() - 3600
    os.utime(path, (t, t))


def _by_hand(files: dict[str, bytes]) -> str:
    """The blake3 identity of a directory whose identity files are ``files`` (name -> bytes)."""
    h = blake3.blake3()
    for name in sorted(files):
        h.update(f"{name}\0{blake3.blake3(files[name]).hexdigest()}\n".encode())
    return "blake3:" + h.hexdigest()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EVALGATE_NO_DIGEST_CACHE", raising=False)
    # every digest is remembered at once (the window itself: tests/checkpoints/test_identity.py): a file is
    # trusted from the cache whatever its age, which is what the attacks below need, with no wait for ctime to age
    monkeypatch.setattr(ident, "RACY_WINDOW_S", 0.0)
    monkeypatch.setattr(ident, "_VERIFIED", {})
    return tmp_path / "home"


def _weights() -> bytes:
    """A small, valid safetensors file (resolve_checkpoint opens its header)."""
    import numpy as np
    from safetensors.numpy import save

    return save({"w": np.arange(4, dtype=np.float32)})


def _ckpt(d: Path, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    files = {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": _weights(), **(extra or {})}
    for name, data in files.items():
        _old(d / name, data)
    return files


def _identity(d: Path, verify: bool = False) -> str:
    files = identity_files(d)
    return checkpoint_identity(files, verify=True) if verify else checkpoint_identity(files)


# -- 1. the digest cache is no trust anchor --------------------------------------------------------------------------
def _poison(cache_file: Path, f: Path) -> None:
    """Copy ``f``'s current stat signature into its (old) cache entry, as the issue's attacker did."""
    entries = json.loads(cache_file.read_text())
    st = f.stat()
    entries[str(f.resolve())]["stat"] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    cache_file.write_text(json.dumps(entries))


def test_a_poisoned_cache_entry_does_not_survive_verification(tmp_path: Path, home: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "ckpt"
    files = _ckpt(d)
    old = _identity(d)
    assert old == _by_hand(files)
    changed = json.dumps({**CONFIG, "rms_norm_eps": 0.5}).encode()  # same length would not matter: size is in stat
    _old(d / "config.json", changed)
    _poison(home / "file-digests.json", d / "config.json")
    assert _identity(d) == old  # a smoke/dev run's fast path takes the poisoned entry (documented)
    new = _by_hand({**files, "config.json": changed})
    assert _identity(d, verify=True) == new
    assert "digest cache" in capsys.readouterr().err
    assert resolve_checkpoint(d, verify=True).digest == new
    assert verify_identity(d, old) == new
    # the entry was replaced by the bytes' digest: the dev fast path now agrees too
    assert _identity(d) == new


def test_a_poisoned_gguf_entry_does_not_survive_verification(tmp_path: Path, home: Path) -> None:
    g = tmp_path / "m.gguf"
    _old(g, b"GGUF" + b"\0" * 60)
    old = checkpoint_identity([g], single=True)
    _old(g, b"GGUF" + b"\1" * 60)
    _poison(home / "file-digests.json", g)
    assert checkpoint_identity([g], single=True, verify=True) == "blake3:" + blake3.blake3(
        b"GGUF" + b"\1" * 60).hexdigest() != old


def test_verification_keeps_a_sha256_identity_the_store_knows(tmp_path: Path, home: Path) -> None:
    """The compatibility rule holds under verification: the bytes are hashed with the recorded algorithm."""
    import hashlib

    d = tmp_path / "ckpt"
    files = _ckpt(d)
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
    legacy = h.hexdigest()
    assert checkpoint_identity(identity_files(d), lambda: legacy, verify=True) == legacy
    assert verify_identity(d, legacy) == legacy


# -- 2. what the loaders open is what is hashed ------------------------------------------------------------------------
def _index(names: dict[str, str]) -> bytes:
    return json.dumps({"metadata": {"total_size": 1}, "weight_map": names}).encode()


@pytest.mark.parametrize("index_name, a, b", [
    ("model.safetensors.index.json", "model-00001-of-00001.safetensors", "other-00001-of-00001.safetensors"),
    ("pytorch_model.bin.index.json", "pytorch_model-00001-of-00001.bin", "other_model-00001-of-00001.bin"),
])
def test_editing_the_shard_index_changes_the_identity(tmp_path: Path, home: Path, index_name: str, a: str,
                                                      b: str) -> None:
    """Two complete weight files, the index switched from one to the other (the issue's argmax 56 vs 12)."""
    d = tmp_path / "ckpt"
    files = {"config.json": json.dumps(CONFIG).encode(), a: b"weights-A" * 50, b: b"weights-B" * 50,
             index_name: _index({"model.embed_tokens.weight": a, "lm_head.weight": a})}
    for name, data in files.items():
        _old(d / name, data)
    first = _identity(d)
    assert first == _by_hand(files)
    swapped = _index({"model.embed_tokens.weight": b, "lm_head.weight": b})
    _old(d / index_name, swapped)
    assert _identity(d) == _by_hand({**files, index_name: swapped}) != first


def test_a_weight_file_no_index_names_is_hashed_too(tmp_path: Path, home: Path) -> None:
    d = tmp_path / "ckpt"
    files = _ckpt(d, {"model.safetensors.index.json": _index({"w": "model.safetensors"}),
                      "stray.safetensors": b"not named"})
    assert _identity(d) == _by_hand(files)
    _old(d / "stray.safetensors", b"changed!!")
    assert _identity(d) != _by_hand(files)


@pytest.mark.parametrize("named, why", [("missing-00001.safetensors", "not in"),
                                        ("../outside.safetensors", "outside the checkpoint directory"),
                                        ("sub/model.safetensors", "outside the checkpoint directory")])
def test_an_index_naming_a_missing_or_outside_file_is_refused(tmp_path: Path, home: Path, named: str,
                                                              why: str) -> None:
    d = tmp_path / "ckpt"
    _ckpt(d, {"model.safetensors.index.json": _index({"w": named})})
    _old(tmp_path / "outside.safetensors", b"x")
    _old(d / "sub" / "model.safetensors", b"x")
    with pytest.raises(BadInput, match=why):
        identity_files(d)


def test_an_index_that_does_not_parse_is_refused(tmp_path: Path, home: Path) -> None:
    d = tmp_path / "ckpt"
    _ckpt(d, {"model.safetensors.index.json": b'{"weight_map": '})
    with pytest.raises(BadInput, match="not a weight index"):
        identity_files(d)


LOADER_FILES = ["generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                "added_tokens.json", "tokenizer.model", "vocab.json", "vocab.txt", "merges.txt", "spiece.model",
                "chat_template.jinja", "chat_template.json", "cl100k.tiktoken",
                "additional_chat_templates/tool_use.jinja"]


@pytest.mark.parametrize("name", LOADER_FILES)
def test_each_loader_file_is_in_the_identity(tmp_path: Path, home: Path, name: str) -> None:
    d = tmp_path / "ckpt"
    files = _ckpt(d, {name: b"one"})
    assert _identity(d) == _by_hand(files)
    _old(d / name, b"two")
    assert _identity(d) == _by_hand({**files, name: b"two"}) != _by_hand(files)


@pytest.mark.parametrize("name", ["README.md", "trainer_state.json", "training_args.bin", "optimizer.pt",
                                  "rng_state.pth", "modeling_llama.py"])
def test_files_no_loader_opens_are_left_out(tmp_path: Path, home: Path, name: str) -> None:
    """Training state, documentation and Python files of a config without ``auto_map``: changing them changes
    nothing the model generates, so the identity stays (its generations stay cached)."""
    d = tmp_path / "ckpt"
    files = _ckpt(d)
    _old(d / name, b"anything")
    assert _identity(d) == _by_hand(files)


def test_remote_code_named_by_auto_map_is_in_the_identity(tmp_path: Path, home: Path) -> None:
    d = tmp_path / "ckpt"
    cfg = json.dumps({**CONFIG, "auto_map": {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}}).encode()
    files = _ckpt(d, {"config.json": cfg, "modeling_x.py": b"class XForCausalLM: ...\n",
                      "helpers.py": b"EPS = 1e-5\n"})
    assert _identity(d) == _by_hand(files)
    _old(d / "helpers.py", b"EPS = 0.5\n")  # imported by modeling_x: transformers copies relative imports too
    assert _identity(d) == _by_hand({**files, "helpers.py": b"EPS = 0.5\n"})


def test_a_peft_adapter_is_refused(tmp_path: Path, home: Path) -> None:
    """With peft installed, transformers loads the adapter's base model from wherever adapter_config.json says:
    files outside the directory, outside any identity."""
    d = tmp_path / "ckpt"
    _ckpt(d, {"adapter_config.json": json.dumps({"base_model_name_or_path": str(tmp_path / "other")}).encode(),
              "adapter_model.safetensors": b"lora"})
    with pytest.raises(BadInput, match="PEFT adapter"):
        identity_files(d)
