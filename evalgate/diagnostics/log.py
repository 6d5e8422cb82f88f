"""Training logs read into one shape: a ``TrainLog`` of per-key series.

Readers: HF/TRL ``trainer_state.json`` (its ``log_history``), JSONL (one JSON object per logged step with ``step``
or ``global_step``; verl's file logger nests the metrics as ``{"step": N, "data": {...}}``, which is read too) and
TensorBoard event files (the ``tensorboard`` package's ``EventAccumulator``; install ``evalgate[tensorboard]``).

A log that is being written while it is read gives the readable part and a warning in ``TrainLog.warnings``, never
an exception: a ``trainer_state.json`` cut mid-file keeps every complete ``log_history`` entry before the cut; a
JSONL file whose last line is half written drops that line; a TensorBoard file cut mid-record keeps the records
before it. Damage anywhere else (a bad JSONL line followed by good ones) is bad input.

A step logged twice (a run resumed from a checkpoint re-logs the steps after it) keeps the last value per key, and
the repeated steps are listed in ``TrainLog.duplicate_steps``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.diagnostics.keys import KEY_MAP, STRIP_PREFIX
from evalgate.errors import BadInput, MissingExtra

_STEP_DIR = re.compile(r"checkpoint-(\d+)$")
_SKIP = frozenset(("step", "global_step", "epoch", "_step", "_timestamp", "_runtime"))


@dataclass
class TrainLog:
    """One training run's logged metrics.

    Attributes:
        source: file or directory read.
        format: ``trainer_state``, ``jsonl`` or ``tensorboard``.
        raw: raw key (``train/`` prefix stripped) -> ``{step: value}`` after de-duplication (last wins).
        series: canonical key (``keys.KEY_MAP``) -> ``[(step, value)]`` in step order, from the first raw key of the
            map the log holds (only canonical keys the log has).
        used: canonical key -> the raw key its series came from.
        raw_keys: every numeric key the log holds, sorted.
        nonfinite: ``[(step, raw key)]`` of NaN/inf values, in step order.
        duplicate_steps: steps logged more than once for the same key (a resumed run), sorted.
        warnings: what could not be read (a half-written file), one sentence each.
        meta: ``trainer_state.json`` top-level numbers (``global_step``, ``max_steps``, ``logging_steps``) when known.
    """

    source: str
    format: str
    raw: dict[str, dict[int, float]] = field(default_factory=dict)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    used: dict[str, str] = field(default_factory=dict)
    raw_keys: list[str] = field(default_factory=list)
    nonfinite: list[tuple[int, str]] = field(default_factory=list)
    duplicate_steps: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, int] = field(default_factory=dict)

    @property
    def steps(self) -> tuple[int, int] | None:
        """(first, last) logged step over every key, or None for an empty log."""
        firsts = [min(d) for d in self.raw.values() if d]
        return (min(firsts), max(max(d) for d in self.raw.values() if d)) if firsts else None


def from_records(records: list[dict[str, Any]], source: str, fmt: str, warnings: list[str] | None = None) -> TrainLog:
    """Build a TrainLog from step records (dicts with ``step`` or ``global_step`` and metric keys), in file order.

    Records without a step are skipped (trainer_state.json's final summary has none of the mapped keys). Values
    that are not numbers (strings, lists) are ignored; ``bool`` is not a number here.
    """
    raw: dict[str, dict[int, float]] = {}
    dups: set[int] = set()
    for rec in records:
        step = rec.get("step", rec.get("global_step"))
        if isinstance(rec.get("data"), dict):  # verl's file logger: {"step": N, "data": {...}}
            rec = rec["data"]
        if isinstance(step, bool) or not isinstance(step, int | float):
            continue
        s = int(step)
        for k, v in rec.items():
            if k in _SKIP:
                continue
            if type(v) is not float:
                if isinstance(v, bool) or not isinstance(v, int | str):
                    continue
                try:
                    v = float(v)
                except ValueError:
                    continue
            if k.startswith(STRIP_PREFIX):
                k = k[len(STRIP_PREFIX):]
            d = raw.get(k)
            if d is None:
                d = raw[k] = {}
            elif s in d:
                dups.add(s)
            d[s] = v
    return _build(raw, source, fmt, sorted(dups), warnings or [])


def _build(raw: dict[str, dict[int, float]], source: str, fmt: str, dups: list[int], warnings: list[str]) -> TrainLog:
    log = TrainLog(source, fmt, raw=raw, raw_keys=sorted(raw), duplicate_steps=dups, warnings=warnings)
    for k, d in raw.items():
        log.nonfinite.extend((s, k) for s, v in d.items() if not math.isfinite(v))
    log.nonfinite.sort()
    if dups:
        log.warnings.append(f"{len(dups)} step(s) logged more than once (steps {dups[0]}..{dups[-1]}; a resumed "
                            "run?): the last value of each was kept")
    for canon, candidates in KEY_MAP.items():
        for c in candidates:
            if c in raw:
                log.series[canon] = sorted(raw[c].items())
                log.used[canon] = c
                break
    return log


def _recover_log_history(text: str) -> tuple[list[dict[str, Any]], int]:
    """The complete ``log_history`` entries of a ``trainer_state.json`` cut mid-write, and the offset read to."""
    start = text.find('"log_history"')
    if start < 0:
        return [], 0
    pos = text.find("[", start)
    if pos < 0:
        return [], start
    dec = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out, pos
        try:
            obj, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out, pos
        if isinstance(obj, dict):
            out.append(obj)


def read_trainer_state(path: str | Path) -> TrainLog:
    """Read an HF/TRL ``trainer_state.json`` (its ``log_history``); a file cut mid-write gives its complete entries
    and a warning.

    Raises:
        BadInput: missing file, or a file that is neither a trainer state nor a cut one (no ``log_history``).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{p}: cannot read the training log ({e}); pass the trainer_state.json the trainer "
                       "wrote") from e
    warnings: list[str] = []
    meta: dict[str, int] = {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        hist, upto = _recover_log_history(text)
        if not hist:
            raise BadInput(f"{p}: not valid JSON ({e.msg} at line {e.lineno}) and no complete log_history entry "
                           "before it; is this a Trainer's trainer_state.json?") from e
        warnings.append(f"{p}: file ends mid-write (JSON error at line {e.lineno}); read the {len(hist)} complete "
                        f"log_history entries before character {upto}")
    else:
        found = doc.get("log_history") if isinstance(doc, dict) else None
        if not isinstance(found, list):
            raise BadInput(f"{p}: no 'log_history' list; is this a Trainer's trainer_state.json?")
        hist = found
        meta = {k: doc[k] for k in ("global_step", "max_steps", "logging_steps", "save_steps")
                if isinstance(doc.get(k), int) and not isinstance(doc.get(k), bool)}
    log = from_records([h for h in hist if isinstance(h, dict)], str(p), "trainer_state", warnings)
    log.meta = meta
    return log


def read_jsonl(path: str | Path) -> TrainLog:
    """Read a JSONL metrics log: one JSON object per line with ``step`` (or ``global_step``) and metric keys.

    A last line that is not valid JSON (the writer is mid-line) is dropped with a warning.

    Raises:
        BadInput: a line before the last that is not a JSON object (naming the line).
    """
    p = Path(path)
    try:
        lines = p.read_bytes().splitlines()
    except OSError as e:
        raise BadInput(f"{p}: cannot read the training log ({e})") from e
    while lines and not lines[-1].strip():
        lines.pop()
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    loads = json.loads
    for i, line in enumerate(lines, 1):
        try:
            rec = loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if i == len(lines):
                warnings.append(f"{p}:{i}: last line is incomplete (being written?); read the {len(records)} lines "
                                "before it")
                break
            if not line.strip():
                continue
            raise BadInput(f"{p}:{i}: not valid JSON ({e}); each line must be one JSON object") from e
        if not isinstance(rec, dict):
            raise BadInput(f"{p}:{i}: each line must be a JSON object with 'step' and metric keys")
        records.append(rec)
    return from_records(records, str(p), "jsonl", warnings)


def read_tensorboard(path: str | Path) -> TrainLog:
    """Read scalar summaries from TensorBoard event files under ``path`` (a file or a directory). A file cut
    mid-record keeps the records before the cut (``EventAccumulator`` stops there).

    Raises:
        MissingExtra: the ``tensorboard`` package is not installed.
    """
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        raise MissingExtra("reading TensorBoard event files needs: pip install 'evalgate[tensorboard]'") from e
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.rglob("events.out.tfevents.*"))
    raw: dict[str, dict[int, float]] = {}
    dups: set[int] = set()
    warnings: list[str] = []
    for f in files:
        cut = _tfrecord_tail(f)
        if cut:
            warnings.append(f"{f}: ends in a partial record ({cut} bytes; being written?); read the complete records "
                            "before it")
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        try:
            acc.Reload()
        except Exception as e:  # noqa: BLE001 - a damaged event file: keep what was read, say so
            warnings.append(f"{f}: stopped reading ({type(e).__name__}: {e}); kept the records before it")
        for tag in acc.Tags().get("scalars", []):
            key = tag[len(STRIP_PREFIX):] if tag.startswith(STRIP_PREFIX) else tag
            d = raw.setdefault(key, {})
            for ev in acc.Scalars(tag):
                if int(ev.step) in d:
                    dups.add(int(ev.step))
                d[int(ev.step)] = float(ev.value)
    return _build(raw, str(p), "tensorboard", sorted(dups), warnings)


def _tfrecord_tail(path: Path) -> int:
    """Bytes at the end of a TFRecord file that do not form a complete record (0 for a complete file).

    TFRecord framing: uint64 little-endian length, uint32 CRC of it, the data, uint32 CRC of the data.
    """
    size = path.stat().st_size
    pos = 0
    with path.open("rb") as fh:
        while pos < size:
            head = fh.read(8)
            if len(head) < 8:
                break
            end = pos + 8 + 4 + int.from_bytes(head, "little") + 4
            if end > size:
                break
            fh.seek(end)
            pos = end
    return size - pos


def find_train_log(run_dir: str | Path) -> TrainLog | None:
    """Find and read the training log of a run directory (the parent of its ``checkpoint-N`` directories).

    Order: ``trainer_state.json`` in the highest ``checkpoint-N`` (it holds the whole history up to that step),
    else one in ``run_dir``; TensorBoard event files under ``run_dir``; ``*.jsonl`` in ``run_dir``.

    Returns:
        The log, or None when there is none.
    """
    d = Path(run_dir)
    if d.is_file():
        return read_path(d)
    if not d.is_dir():
        return None
    ckpts = sorted(((int(m.group(1)), c) for c in d.iterdir() if (m := _STEP_DIR.search(c.name))), reverse=True)
    for _, c in ckpts:
        if (c / "trainer_state.json").is_file():
            return read_trainer_state(c / "trainer_state.json")
    if (d / "trainer_state.json").is_file():
        return read_trainer_state(d / "trainer_state.json")
    if any(d.rglob("events.out.tfevents.*")):
        return read_tensorboard(d)
    jsonl = sorted(d.glob("*.jsonl"))
    return read_jsonl(jsonl[0]) if jsonl else None


def read_path(path: str | Path) -> TrainLog:
    """Read a training log file by its kind (``*.jsonl``, TensorBoard event file, else ``trainer_state.json``), or a
    run directory (``find_train_log``).

    Raises:
        BadInput: no such file, or a directory without a log.
    """
    p = Path(path)
    if p.is_dir():
        log = find_train_log(p)
        if log is None:
            raise BadInput(f"{p}: no trainer_state.json, TensorBoard events or .jsonl log found")
        return log
    if not p.exists():
        raise BadInput(f"{p}: no such file or directory; pass a trainer_state.json, .jsonl, event file or run "
                       "directory")
    if p.name.startswith("events.out.tfevents"):
        return read_tensorboard(p)
    if p.suffix == ".jsonl":
        return read_jsonl(p)
    return read_trainer_state(p)
