"""The ``replay`` backend: returns recorded model turns instead of generating (deterministic, no model).

Each request is answered from the record of its item, sample index and turn (``GenerationRequest.turn``); a
record without ``sample_index`` answers every sample of its item. Completion tokens are counted as
whitespace-separated words. ``requests_seen`` lists every ``(item_id, sample_index, turn)`` answered, so tests can
check which turns a run generated. ``delay_s`` makes each request take that long (a slow engine's pace).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalgate.backends.base import (
    Completion,
    GenerationRequest,
    GenerationResult,
    ReplayOptions,
)
from evalgate.core.errors import BadInput, EngineError
from evalgate.core.fileio import iter_jsonl


class ReplayBackend:
    """Recorded turns as a backend.

    Args:
        model_dir: unused (recorded).
        options: ``ReplayOptions`` (the recording's file).
        tokenizer: unused.

    Raises:
        BadInput: the file is missing or a record lacks ``item_id``, ``turn`` or ``text``.
    """

    name = "replay"

    def __init__(self, model_dir: str, options: ReplayOptions, tokenizer: Any = None):
        self.options = options
        path = Path(options.file)
        if not path.is_file():
            raise BadInput(f"replay backend: recording {path} not found; pass --backend-option file=PATH")
        self.records: dict[tuple[str, int | None, int], dict[str, Any]] = {}
        for line, r in iter_jsonl(path.read_text(encoding="utf-8"), path, "fix that record"):
            if not isinstance(r, dict) or not {"item_id", "turn", "text"} <= set(r):
                raise BadInput(f"{path}:{line}: a replay record needs item_id, turn and text")
            self.records[(str(r["item_id"]), r.get("sample_index"), int(r["turn"]))] = r
        self.requests_seen: list[tuple[str, int, int]] = []

    def _completion(self, key: str, j: int, turn: int) -> Completion:
        r = self.records.get((key, j, turn)) or self.records.get((key, None, turn))
        if r is None:
            raise EngineError(f"replay backend: no recorded turn {turn} for item {key!r} sample {j} in "
                              f"{self.options.file}")
        self.requests_seen.append((key, j, turn))
        calls = r.get("tool_calls")
        return Completion(r["text"], len(r["text"].split()), r.get("finish_reason", "stop"), None,
                          tuple(calls) if calls is not None else None)

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        out = []
        for req in requests:
            if self.options.delay_s:
                time.sleep(self.options.delay_s)
            res = GenerationResult(req, tuple(self._completion(req.key, j, req.turn) for j in req.sample_indices))
            if on_result:
                on_result(res)
            out.append(res)
        return out

    def info(self) -> dict[str, Any]:
        return {"engine": "replay", "file": self.options.file}
