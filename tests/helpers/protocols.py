"""Protocol files the real-model tests write into their home."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def addition_scoring_truncated(home: Path) -> Path:
    """``protocols/addition.yaml`` copied to ``home/protocols/`` with ``extraction.score_truncated: true`` (the base
    model's answers run past its 12 tokens: a judge scores them anyway); returns the copy's path."""
    doc = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    doc["extraction"]["score_truncated"] = True
    (home / "protocols").mkdir(exist_ok=True)
    addition = home / "protocols" / "addition.yaml"
    addition.write_text(yaml.safe_dump(doc, sort_keys=False))
    return addition
