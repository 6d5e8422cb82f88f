"""Issue 42, a neighbour of item 2 checked: a GGUF's identity is the file's own digest, so its conversion must read
nothing else. transformers' ``from_pretrained(folder, gguf_file=...)`` is asked for a folder; a
``tokenizer_config.json`` (chat template), ``chat_template.jinja`` or ``generation_config.json`` planted beside the
GGUF must not reach the converted checkpoint. This held before issue 42 too (transformers 5 takes tokenizer and
generation settings from the GGUF when ``gguf_file`` is given); the test keeps it so. Real SmolLM2 GGUF, converted
afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.checkpoints.resolve import resolve_checkpoint


def test_files_beside_a_gguf_do_not_reach_its_conversion(home: Path, smollm2_gguf: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALGATE_MODELS", str(home / "models"))  # a conversion of its own, not the shared cache
    beside = home / "models-in" / "m"
    beside.mkdir(parents=True)
    gguf = beside / "smollm2.gguf"
    gguf.symlink_to(smollm2_gguf)
    (beside / "tokenizer_config.json").write_text(json.dumps({"chat_template": "PLANTED {{ messages }}"}))
    (beside / "chat_template.jinja").write_text("PLANTED {{ messages }}")
    (beside / "generation_config.json").write_text(json.dumps({"eos_token_id": 7, "bos_token_id": 7}))
    ck = resolve_checkpoint(gguf)
    assert ck.digest == resolve_checkpoint(smollm2_gguf).digest  # the identity is the GGUF's alone
    converted = ck.model_dir
    text = "".join(p.read_text() for p in converted.iterdir() if p.suffix in (".json", ".jinja"))
    assert "PLANTED" not in text
    assert json.loads((converted / "generation_config.json").read_text()).get("eos_token_id") != 7
