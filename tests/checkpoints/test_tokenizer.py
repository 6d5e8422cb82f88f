"""``checkpoints.model.load_tokenizer``: a directory without tokenizer files refused before transformers is
imported; the tokenizer kept per directory while its files keep their content and nobody changed it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from evalgate.checkpoints import model
from evalgate.checkpoints.model import load_tokenizer, tokenizer_files
from evalgate.core.errors import BadInput, MissingExtra

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def no_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import transformers`` fails (ImportError), as without the hf extra."""
    monkeypatch.setitem(sys.modules, "transformers", None)


def test_a_folder_without_tokenizer_files_is_refused_before_transformers_is_imported(
        tmp_path: Path, no_transformers: None) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    weights_only = tmp_path / "weights-only"
    weights_only.mkdir()
    for name in ("model.safetensors", "replay.jsonl", "SOURCE", "model.safetensors.index.json"):
        (weights_only / name).write_text("{}")
    (weights_only / "sub").mkdir()
    (weights_only / "sub" / "tokenizer.json").write_text("{}")  # not at the top: transformers does not read it
    for d in (empty, weights_only, tmp_path / "missing"):
        with pytest.raises(BadInput, match="no loadable tokenizer"):  # MissingExtra if it had imported transformers
            load_tokenizer(d)


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "tokenizer.json", "vocab.json",
                                  "tokenizer.model", "chat_template.jinja", "cl100k_base.tiktoken"])
def test_any_tokenizer_or_config_file_goes_on_to_transformers(tmp_path: Path, no_transformers: None,
                                                              name: str) -> None:
    (tmp_path / name).write_text("{}")
    assert tokenizer_files(tmp_path) == [tmp_path / name]
    with pytest.raises(MissingExtra, match="hf"):
        load_tokenizer(tmp_path)


@pytest.mark.integration  # imports transformers and torch: seconds in a fresh worker
def test_a_config_alone_can_name_a_tokenizer_without_vocabulary_files(tmp_path: Path) -> None:
    """Why config.json counts: ByT5's tokenizer needs no file (a token is a UTF-8 byte plus 3: pad, eos, unk)."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5", "tokenizer_class": "ByT5Tokenizer"}))
    assert load_tokenizer(tmp_path)("hi")["input_ids"] == [ord("h") + 3, ord("i") + 3, 1]


def _copy(tiny_checkpoint: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        shutil.copy(tiny_checkpoint / f, dest / f)
    return dest


def _render(tok: object) -> str:
    return tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)  # type: ignore[attr-defined]


def test_one_directory_gets_one_tokenizer_until_a_file_changes_even_with_its_size_and_times_kept(
        tmp_path: Path, tiny_checkpoint: Path) -> None:
    d = _copy(tiny_checkpoint, tmp_path / "ckpt")
    first = load_tokenizer(d)
    assert load_tokenizer(str(d)) is first
    assert _render(first).endswith("<|im_start|>assistant\n")
    tpl = d / "chat_template.jinja"
    before = tpl.stat()
    text = tpl.read_text()
    tpl.write_text(text.replace("<|im_start|>assistant", "<|im_start|>ASSISTANT"))  # same length
    os.utime(tpl, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert tpl.stat().st_size == before.st_size and tpl.stat().st_mtime_ns == before.st_mtime_ns
    changed = load_tokenizer(d)
    assert changed is not first
    assert _render(changed).endswith("<|im_start|>ASSISTANT\n")
    assert _render(first).endswith("<|im_start|>assistant\n")  # the earlier object is not touched
    (d / "added_tokens.json").write_text(json.dumps({"<|zz|>": 49152}))  # a new file: a new key too
    assert load_tokenizer(d) is not changed


def test_equal_files_in_two_directories_are_two_tokenizers_each_naming_its_directory(
        tmp_path: Path, tiny_checkpoint: Path) -> None:
    a, b = _copy(tiny_checkpoint, tmp_path / "checkpoint-10"), _copy(tiny_checkpoint, tmp_path / "checkpoint-20")
    ta, tb = load_tokenizer(a), load_tokenizer(b)
    assert ta is not tb
    assert (ta.name_or_path, tb.name_or_path) == (str(a), str(b))
    assert load_tokenizer(a) is ta and load_tokenizer(b) is tb


def test_a_tokenizer_someone_changed_is_not_handed_out_again(tmp_path: Path, tiny_checkpoint: Path) -> None:
    d = _copy(tiny_checkpoint, tmp_path / "ckpt")
    first = load_tokenizer(d)
    first.chat_template = "{{ 'changed' }}"
    second = load_tokenizer(d)
    assert second is not first and _render(second).endswith("<|im_start|>assistant\n")
    second.backend_tokenizer.enable_truncation(max_length=2)
    third = load_tokenizer(d)
    assert third is not second and third.backend_tokenizer.truncation is None
    assert len(third("a b c d e", add_special_tokens=False)["input_ids"]) == 5
    third.add_tokens(["<|zz|>"])
    fourth = load_tokenizer(d)
    assert fourth is not third and len(fourth) == len(third) - 1
    assert load_tokenizer(d) is fourth


def test_files_rewritten_while_transformers_reads_them_are_not_kept(tmp_path: Path, tiny_checkpoint: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy(tiny_checkpoint, tmp_path / "ckpt")
    real = model._load_tokenizer

    def rewritten_during_the_load(where: str | Path) -> object:
        tok = real(where)
        tpl = d / "chat_template.jinja"
        tpl.write_text(tpl.read_text().replace("<|im_start|>assistant", "<|im_start|>ASSISTANT"))
        return tok

    monkeypatch.setattr(model, "_load_tokenizer", rewritten_during_the_load)
    first = load_tokenizer(d)
    monkeypatch.setattr(model, "_load_tokenizer", real)
    second = load_tokenizer(d)
    assert second is not first and _render(second).endswith("<|im_start|>ASSISTANT\n")
