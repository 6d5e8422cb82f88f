"""Training logs read into one shape: a ``TrainLog`` of per-key series.

Readers: HF/TRL ``trainer_state.json`` (its ``log_history``), JSONL (one JSON object per logged step with ``step``
or ``global_step``; verl's file logger nests the metrics as ``{"step": N, "data": {...}}``, which is read too) and
TensorBoard event files (the ``tensorboard`` package's ``EventAccumulator``; install ``evalgate[tensorboard]``), W&B run
files and MLflow runs (``evalgate.diagnostics.tracker_logs``; ``evalgate[wandb]``, ``evalgate[mlflow]``). Each is a
``LogReader`` in ``LOG_READERS``, declaring how it recognises a log given by itself and where it finds one in a run
directory; ``read_path`` and ``find_train_log`` dispatch on that one table. To add a format: one module with a
reader (``from_records`` builds the ``TrainLog``) and one registration: ``LOG_READERS.register(name,
LogReader(...))`` here, or an entry point in the group ``evalgate.log_readers`` naming a ``LogReader``.

A log that is being written while it is read gives the readable part and a warning in ``TrainLog.warnings``, never
an exception: a ``trainer_state.json`` cut mid-file keeps every complete ``log_history`` entry before the cut; a
JSONL file whose last line is half written drops that line; a TensorBoard file cut mid-record keeps the records
before it. Damage anywhere else (a bad JSONL line followed by good ones) is bad input.

A step logged twice (a run resumed from a checkpoint re-logs the steps after it) keeps the last value per key, and
the repeated steps are listed in ``TrainLog.duplicate_steps``.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from evalgate.checkpoints.layout import checkpoint_step
from evalgate.core.errors import BadInput, MissingExtra
from evalgate.core.registry import Registry
from evalgate.core.version import install_hint
from evalgate.diagnostics.keys import KEY_MAP, STRIP_PREFIX
from evalgate.diagnostics.tracker_logs import MLFLOW_PREFIX, mlflow_records, wandb_files, wandb_records


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of acyclic objects (parsed records, tuples) are built: its
    generation-0 passes would otherwise rescan them again and again (Python docs, ``gc.disable``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _loads(data: bytes | str) -> Any:
    """orjson where it can (several times faster than json), json for what only json reads (NaN, Infinity: HF's
    trainer_state.json writes them)."""
    try:
        return orjson.loads(data)
    except ValueError:
        try:
            return json.loads(data)
        except RecursionError:  # json recurses per nesting level; orjson already refused past its 1024
            raise json.JSONDecodeError("nested too deeply to read", "", 0) from None


STEP_KEYS = ("step", "global_step", "train/global_step", "train/step")
"""Keys a record's step is read from, in this order (``train/global_step``: HF's W&B callback; ``train/step``)."""
_SKIP = frozenset((*STEP_KEYS, "epoch", "train/epoch", "_step", "_timestamp", "_runtime"))


@dataclass
class TrainLog:
    """One training run's logged metrics.

    Attributes:
        source: file or directory read.
        format: ``trainer_state``, ``jsonl``, ``tensorboard``, ``wandb`` or ``mlflow``.
        columns: raw key (``train/`` prefix stripped) -> ``(steps, values)``, two lists in step order after
            de-duplication (a repeated step keeps its last value).
        series: canonical key (``keys.KEY_MAP``) -> ``[(step, value)]`` in step order, from the first raw key of the
            map the log holds (only canonical keys the log has).
        used: canonical key -> the raw key its series came from.
        raw_keys: every numeric key the log holds, sorted.
        nonfinite: ``[(step, raw key)]`` of NaN/inf values, in step order.
        duplicate_steps: steps logged more than once for the same key (a resumed run), sorted.
        warnings: what could not be read (a half-written file), one sentence each.
        meta: ``trainer_state.json`` top-level numbers (``global_step``, ``max_steps``, ``logging_steps``) when known.
        abandoned: per resume (a record whose step is below the highest step logged before it, in file order), the
            first step logged again and the log as it stood before the resume (every record before it, a repeated
            step keeping its last value): the segment the resumed run replaced, which the diagnosis judges too.
        choice: how the log was chosen among several in a run directory (``find_train_log``), or None.
    """

    source: str
    format: str
    columns: dict[str, tuple[list[int], list[float]]] = field(default_factory=dict)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    used: dict[str, str] = field(default_factory=dict)
    raw_keys: list[str] = field(default_factory=list)
    nonfinite: list[tuple[int, str]] = field(default_factory=list)
    duplicate_steps: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, int] = field(default_factory=dict)
    abandoned: list[tuple[int, TrainLog]] = field(default_factory=list)
    choice: str | None = None

    @property
    def steps(self) -> tuple[int, int] | None:
        """(first, last) logged step over every key, or None for an empty log."""
        spans = [(st[0], st[-1]) for st, _ in self.columns.values() if st]
        return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else None


def from_records(records: list[dict[str, Any]], source: str, fmt: str, warnings: list[str] | None = None) -> TrainLog:
    """Build a TrainLog from step records (dicts with ``step`` or ``global_step`` and metric keys), in file order.

    Records without a step are skipped (trainer_state.json's final summary has none of the mapped keys). Values
    that are not numbers (strings that are not numerals, lists) are ignored; ``bool`` is not a number here.

    Records are grouped by their key tuple (a trainer logs the same keys every step) and transposed into columns
    with ``zip``, so the per-value work runs in C: 100,000 steps x 28 keys take a fraction of the JSON parse.

    A record whose step is below the highest step logged before it starts a resumed segment: the log before it is
    kept in ``TrainLog.abandoned`` (a grad-norm blow-up before a resume must not vanish because the
    resumed run re-logged its steps).
    """
    log = _from_records(records, source, fmt, warnings)
    for b in _resume_points(records):
        log.abandoned.append((_step_of(records[b]) or 0, _from_records(records[:b], source, fmt, [])))
    if log.abandoned:
        log.warnings.append("the run was resumed: " + "; ".join(
            f"steps {r}..{a.steps[1] if a.steps else r} were logged again from step {r}" for r, a in log.abandoned)
            + "; the abandoned segment is judged too")
    return log


def _step_of(rec: dict[str, Any]) -> int | None:
    """A record's step (the first of ``STEP_KEYS`` that is a finite number), or None."""
    for k in STEP_KEYS:
        v = rec.get(k)
        if v is not None:
            return int(v) if type(v) in (int, float) and math.isfinite(v) else None
    return None


def _resume_points(records: list[dict[str, Any]]) -> list[int]:
    """Indexes of the records where a resumed run starts logging again: a step below the highest step of the
    segment before it (file order). HF logs several records at one step (train, eval, the final summary), so an
    equal step is no resume."""
    out: list[int] = []
    hi: int | None = None
    for i, s in enumerate(map(_step_of, records)):
        if s is None:
            continue
        if hi is not None and s < hi:
            out.append(i)
            hi = s
        elif hi is None or s > hi:
            hi = s
    return out


def _from_records(records: list[dict[str, Any]], source: str, fmt: str,
                  warnings: list[str] | None = None) -> TrainLog:
    """``from_records`` without the resume segments."""
    groups: dict[tuple[str, ...], tuple[list[int], list[tuple[Any, ...]]]] = {}
    keysets = set(map(tuple, records))
    if len(keysets) == 1 and "data" not in (keys := next(iter(keysets))):  # one key set: transpose in C
        groups[keys] = (list(range(len(records))), list(map(tuple, map(dict.values, records))))
        records = []
    for i, rec in enumerate(records):
        data = rec.get("data")
        if isinstance(data, dict) and "step" in rec:  # verl's file logger: {"step": N, "data": {...}}
            rec = {**data, "step": rec["step"]}
        keys = tuple(rec)
        g = groups.get(keys)
        if g is None:
            g = groups[keys] = ([], [])
        g[0].append(i)
        g[1].append(tuple(rec.values()))
    parts: dict[str, list[tuple[list[int], list[int], list[float]]]] = {}
    stepless: set[str] = set()
    for keys, (idx, rows) in groups.items():
        skey = next((k for k in STEP_KEYS if k in keys), None)
        if skey is None:
            stepless.update(keys)
            continue
        cols: list[Any] = list(zip(*rows, strict=True))
        steps, keep = _steps(cols[keys.index(skey)])
        if keep is not None:
            idx = [idx[j] for j in keep]
            cols = [[c[j] for j in keep] for c in cols]
        for k, col in zip(keys, cols, strict=True):
            if k in _SKIP:
                continue
            name = k[len(STRIP_PREFIX):] if k.startswith(STRIP_PREFIX) else k
            vals = _floats(col)
            if vals is None:
                continue
            st, ix, vs = steps, idx, vals[0]
            if vals[1] is not None:
                st, ix = [steps[j] for j in vals[1]], [idx[j] for j in vals[1]]
            parts.setdefault(name, []).append((ix, st, vs))
    merged: dict[str, tuple[list[int], list[float]]] = {}
    dups: set[int] = set()
    clean: dict[int, bool] = {}  # id(steps list) -> unique and sorted (one list is shared by a group's keys)
    for name, ps in parts.items():
        merged[name] = _merge(ps, dups, clean)
    warnings = list(warnings or [])
    if stepless - {"data"}:
        names = sorted(stepless)
        warnings.append(f"records without a step key ({', '.join(STEP_KEYS)}) were skipped; their keys: "
                        + ", ".join(names[:12]) + (" ..." if len(names) > 12 else ""))
    return _build(merged, source, fmt, sorted(dups), warnings)


def _steps(col: tuple[Any, ...]) -> tuple[list[int], list[int] | None]:
    """Step column as ints, and the rows to keep (None: all) when some steps are not numbers."""
    types = set(map(type, col))
    if types <= {int}:
        return list(col), None
    keep = [j for j, v in enumerate(col) if type(v) in (int, float) and math.isfinite(v)]
    return [int(col[j]) for j in keep], keep


def _floats(col: Any) -> tuple[list[float], list[int] | None] | None:
    """A value column as floats, and the rows that hold numbers (None: all); None when no row does."""
    types = set(map(type, col))
    if types == {float}:
        return list(col), None  # a list as annotated (zip gave a tuple): a stored verdict reloads equal
    if types <= {float, int}:
        return list(map(_as_float, col)), None
    keep, vals = [], []
    for j, v in enumerate(col):
        if type(v) in (float, int) or (type(v) is str and _numeral(v)):
            keep.append(j)
            vals.append(_as_float(v))
    return (vals, keep) if keep else None


def _as_float(v: float | int | str) -> float:
    """``float(v)``, with an integer beyond the float range (JSON allows 400 digits) as +-inf: a non-finite value,
    reported as such, not an OverflowError."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if int(v) > 0 else -math.inf


def _numeral(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _merge(ps: list[tuple[list[int], list[int], list[float]]], dups: set[int],
           clean: dict[int, bool]) -> tuple[list[int], list[float]]:
    """One key's values from every record group as (steps, values) in step order, a repeated step keeping its last
    value (file order); repeated steps are added to ``dups``."""
    if len(ps) == 1:
        _, st, vs = ps[0]
        ok = clean.get(id(st))
        if ok is None:
            ok = clean[id(st)] = len(set(st)) == len(st) and st == sorted(st)
        if ok:
            return st, vs
        ordered = list(zip(st, vs, strict=True))
    else:
        ordered = [(s, v) for _, s, v in sorted((t for ix, st, vs in ps for t in zip(ix, st, vs, strict=True)),
                                                 key=lambda t: t[0])]
    last = dict(ordered)
    if len(last) < len(ordered):
        seen: set[int] = set()
        for s, _ in ordered:
            if s in seen:
                dups.add(s)
            seen.add(s)
    items = sorted(last.items())
    return [s for s, _ in items], [v for _, v in items]


def _all_finite(vs: list[float]) -> bool:
    """Whether every value is finite: one ``fsum`` (fast, and finite exactly when every value is) unless the sum
    itself overflows (two values near 1e308), then a scan."""
    try:
        return math.isfinite(math.fsum(vs))
    except OverflowError:
        return all(math.isfinite(v) for v in vs)


def _build(cols: dict[str, tuple[list[int], list[float]]], source: str, fmt: str, dups: list[int],
           warnings: list[str]) -> TrainLog:
    log = TrainLog(source, fmt, columns=cols, raw_keys=sorted(cols), duplicate_steps=dups, warnings=warnings)
    for k, (st, vs) in cols.items():
        if not _all_finite(vs):
            log.nonfinite.extend((s, k) for s, v in zip(st, vs, strict=True) if not math.isfinite(v))
    log.nonfinite.sort()
    if dups:
        log.warnings.append(f"{len(dups)} step(s) logged more than once (steps {dups[0]}..{dups[-1]}; a resumed "
                            "run?): the last value of each was kept")
    for canon, candidates in KEY_MAP.items():
        for c in candidates:
            if c in cols:
                log.series[canon] = list(zip(*cols[c], strict=True))
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
    with _no_gc():
        return _read_trainer_state(path)


def _read_trainer_state(path: str | Path) -> TrainLog:
    """``read_trainer_state`` without the garbage-collector pause."""
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{p}: cannot read the training log ({e}); pass the trainer_state.json the trainer "
                       "wrote") from e
    warnings: list[str] = []
    meta: dict[str, int] = {}
    try:
        doc = _loads(text)
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


def read_wandb(path: str | Path) -> TrainLog:
    """A W&B run (a ``.wandb`` file or a directory holding one) as a ``TrainLog`` of format ``wandb``; the reading
    and its errors are ``tracker_logs.wandb_records``'s."""
    records, source, warnings = wandb_records(path)
    return from_records(records, source, "wandb", warnings)


def read_mlflow(ref: str) -> TrainLog:
    """An MLflow run ``runs:/<run_id>`` as a ``TrainLog`` of format ``mlflow``; the reading and its errors are
    ``tracker_logs.mlflow_records``'s."""
    records, source, warnings = mlflow_records(ref)
    return from_records(records, source, "mlflow", warnings)


def read_jsonl(path: str | Path) -> TrainLog:
    """Read a JSONL metrics log: one JSON object per line with ``step`` (or ``global_step``) and metric keys.

    A last line that is not valid JSON and has no newline after it (the writer is mid-line) is dropped with a
    warning.

    Raises:
        BadInput: any other line that is not a JSON object (naming the line), a finished last line included.
    """
    with _no_gc():
        return _read_jsonl(path)


def _read_jsonl(path: str | Path) -> TrainLog:
    """``read_jsonl`` without the garbage-collector pause."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise BadInput(f"{p}: cannot read the training log ({e})") from e
    try:  # the common case in one parse: every line valid JSON, read as one array
        whole = orjson.loads(b"[" + data.strip().replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        whole = None
    if whole is not None and all(type(r) is dict for r in whole):
        return from_records(whole, str(p), "jsonl")
    lines = data.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    mid_line = not data.rstrip(b" \t").endswith((b"\n", b"\r"))  # a line being written has no newline yet
    for i, line in enumerate(lines, 1):
        try:
            rec = _loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            if i == len(lines) and mid_line:
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
        raise MissingExtra(f"reading TensorBoard event files needs: {install_hint('tensorboard')}") from e
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.rglob("events.out.tfevents.*"))
    records: list[dict[str, Any]] = []  # per file, one record per step: a resumed run's new file re-logs steps
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
        by_step: dict[int, dict[str, Any]] = {}
        for tag in acc.Tags().get("scalars", []):
            for ev in acc.Scalars(tag):
                by_step.setdefault(int(ev.step), {"step": int(ev.step)})[tag] = float(ev.value)
        records.extend(by_step[k] for k in sorted(by_step))
    return from_records(records, str(p), "tensorboard", warnings)


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


@dataclass(frozen=True)
class LogReader:
    """One training-log format: how its logs are recognised and read.

    Attributes:
        read: ``read(path) -> TrainLog``; ``path`` is what ``recognises`` accepted or ``find`` returned (a file, a
            directory, or the text of a reference for a ``remote`` reader). Raises ``BadInput`` naming the file and
            line of damage, ``MissingExtra`` naming the pip extra.
        describe: what its logs are, as a noun phrase for messages and docs (``a TensorBoard events file``).
        recognises: ``recognises(text) -> bool``: whether a path (its text) given by itself (``--from``, a gate
            policy's ``training_logs``) is a log of this format; None: the reader of a file no other reader
            recognises (the first such reader).
        find: ``find(run_dir) -> list[Path]``: this format's logs in a run directory, preferred first; None: it has
            none there.
        remote: its logs are no files (an MLflow ``runs:/<id>``): ``recognises`` is asked before the path is
            looked for on disk.
    """

    read: Callable[[Any], TrainLog]
    describe: str
    recognises: Callable[[str], bool] | None = None
    find: Callable[[Path], list[Path]] | None = None
    remote: bool = False


LOG_READERS: Registry[LogReader] = Registry("training-log format", LogReader, entry_point_group="evalgate.log_readers")
"""Training-log readers by format name (``TrainLog.format``), in order of preference (a run directory's logs are
found in registration order, plugins last); plugins through the ``evalgate.log_readers`` entry-point group."""

_NOT_METRICS = frozenset(("evalgate-queue.jsonl",))


def _trainer_states(d: Path) -> list[Path]:
    """The newest ``checkpoint-N``'s ``trainer_state.json``, then one in ``d`` itself."""
    ckpts = sorted(((n, c) for c in d.iterdir() if (n := checkpoint_step(c.name)) is not None and c.is_dir()),
                   reverse=True)
    newest = next((c / "trainer_state.json" for _, c in ckpts if (c / "trainer_state.json").is_file()), None)
    return [p for p in (newest, d / "trainer_state.json") if p is not None and p.is_file()]


LOG_READERS.register("trainer_state", LogReader(
    read_trainer_state, "a trainer_state.json", find=_trainer_states))
LOG_READERS.register("tensorboard", LogReader(
    read_tensorboard, "a TensorBoard events file", recognises=lambda t: Path(t).name.startswith("events.out.tfevents"),
    find=lambda d: [d] if any(d.rglob("events.out.tfevents.*")) else []))
LOG_READERS.register("jsonl", LogReader(  # evalgate-log.jsonl (EvalgateCallback's) among them; not the watch's queue
    read_jsonl, "a .jsonl metrics log", recognises=lambda t: Path(t).suffix == ".jsonl",
    find=lambda d: [j for j in sorted(d.glob("*.jsonl")) if j.name not in _NOT_METRICS]))
LOG_READERS.register("wandb", LogReader(
    read_wandb, "a W&B run file", recognises=lambda t: Path(t).suffix == ".wandb",
    find=lambda d: [d] if wandb_files(d) else []))
LOG_READERS.register("mlflow", LogReader(
    read_mlflow, f"an MLflow run {MLFLOW_PREFIX}<run_id>", recognises=lambda t: t.startswith(MLFLOW_PREFIX),
    remote=True))


def _readers() -> list[tuple[str, LogReader]]:
    return [(name, LOG_READERS[name]) for name in LOG_READERS.names(sort=False)]


def _candidates(d: Path) -> list[tuple[LogReader, Path]]:
    """The training logs a run directory may hold, in order of preference on a tie: each reader's ``find``, in
    ``LOG_READERS`` order (the newest ``checkpoint-N``'s ``trainer_state.json``, one in the directory, its TensorBoard
    events (HF's ``runs/<date>/``), its ``*.jsonl`` metrics logs, a W&B run, then plugins')."""
    return [(r, c) for _, r in _readers() if r.find is not None for c in r.find(d)]


def find_train_log(run_dir: str | Path) -> TrainLog | None:
    """Find and read the most complete training log of a run directory (the parent of its ``checkpoint-N``
    directories).

    Every candidate (``_candidates``: the newest checkpoint's ``trainer_state.json``, one in ``run_dir``,
    TensorBoard events under it, its ``*.jsonl`` logs, a W&B run, a plugin format's) is read; the one reaching the
    highest step wins, then the one with the most logged values, then the earlier candidate. A checkpoint's
    ``trainer_state.json`` stops at that checkpoint, so a callback's or TensorBoard's log that goes further is the
    run's log. The choice is named in ``TrainLog.choice``; a candidate that cannot be read is
    named there too.

    Returns:
        The log, or None when there is none.

    Raises:
        BadInput: every candidate is unreadable (the first one's error).
    """
    d = Path(run_dir)
    if d.is_file():
        return read_path(d)
    if not d.is_dir():
        return None
    read: list[tuple[Path, TrainLog]] = []
    bad: list[tuple[Path, Exception]] = []
    for reader, c in _candidates(d):
        try:
            read.append((c, reader.read(c)))
        except (BadInput, MissingExtra) as e:
            bad.append((c, e))
    if not read:
        if bad:
            raise bad[0][1]
        return None

    def rank(item: tuple[Path, TrainLog]) -> tuple[int, int]:
        st = item[1].steps
        return (st[1] if st else -1, sum(len(v[0]) for v in item[1].columns.values()))

    best = max(read, key=rank)  # max keeps the first of equals: the preferred candidate
    if len(read) + len(bad) > 1:
        others = [f"{c} ({_span(lg)})" for c, lg in read if lg is not best[1]]
        others += [f"{c} (unreadable: {e})" for c, e in bad]
        best[1].choice = (f"read {best[0]} ({_span(best[1])}), the most complete of the run's logs; also found: "
                          + "; ".join(others))
    return best[1]


def _span(log: TrainLog) -> str:
    st = log.steps
    return f"steps {st[0]}..{st[1]}" if st else "no logged step"


def read_path(path: str | Path) -> TrainLog:
    """Read a training log by the first reader of ``LOG_READERS`` that recognises it (an MLflow ``runs:/<id>``,
    a TensorBoard event file, ``*.jsonl``, ``*.wandb``, a plugin's format), a file no reader recognises as a
    ``trainer_state.json``, or a run directory (``find_train_log``).

    Raises:
        BadInput: no such file, a directory without a log, or a log without a logged step (``require_steps``).
    """
    text, p = str(path), Path(path)
    readers = [r for _, r in _readers()]
    remote = next((r for r in readers if r.remote and r.recognises is not None and r.recognises(text)), None)
    if remote is not None:
        return require_steps(remote.read(text))
    if p.is_dir():
        log = find_train_log(p)
        if log is None:
            found = ", ".join(r.describe for r in readers if r.find is not None)
            raise BadInput(f"{p}: no training log found in the directory (looked for {found})")
        return require_steps(log)
    if not p.exists():
        raise BadInput(f"{p}: no such file or directory; pass a run directory or a log: "
                       + ", ".join(r.describe for r in readers))
    local = [r for r in readers if not r.remote]
    reader = next((r for r in local if r.recognises is not None and r.recognises(text)), None)
    reader = reader or next(r for r in local if r.recognises is None)
    return require_steps(reader.read(p))


def require_steps(log: TrainLog) -> TrainLog:
    """The log itself when it has a logged step; else BadInput naming what was expected and the keys read (issue
    28, item 9: an empty file or a W&B export without a known step key read as "no logged steps" and passed).

    Raises:
        BadInput: no record with a step key and a numeric value.
    """
    if log.steps is not None:
        return log
    seen = "; ".join(log.warnings) or "nothing was read (an empty log?)"
    raise BadInput(f"{log.source}: no logged step: expected one record per logged step with a step key "
                   f"({', '.join(STEP_KEYS)}) and numeric metric keys; {seen}. Pass the trainer's "
                   "trainer_state.json, its metrics JSONL or TensorBoard events")
