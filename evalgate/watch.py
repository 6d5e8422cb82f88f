"""``watch``: evaluate a training run's checkpoints as they land, re-read its log, and stop it when it breaks.

A checkpoint ``RUN_DIR/checkpoint-N`` is evaluated only when it is completely written: weights, ``config.json`` and
``trainer_state.json`` present, ``trainer_state.json`` parses, and no file in it changed (name, size, mtime) for the
settle time. A checkpoint that ``EvalgateCallback`` announced in ``RUN_DIR/evalgate-queue.jsonl`` (written after the
trainer's save returned) needs no settle time. Checkpoints are evaluated oldest step first, one at a time, through
``evaluate()`` (same store and generation cache as ``evalgate run``, purpose ``watch``); a checkpoint the store
already holds a complete run for (same weights digest, protocol hash, split, backend and sampling seed) is not
evaluated again, so a restarted watch resumes where it stopped.

After every change of a run's training log (the callback's ``evalgate-log.jsonl``, else the newest
``trainer_state.json``) the diagnostics run again. A finding whose severity is in the guards' ``fail_on``, or a dev
metric that fell more than the policy's ``selection.collapse_drop`` from the run's previous checkpoint, writes
``RUN_DIR/STOP`` (JSON: reason, step, time) that a training loop (or ``EvalgateCallback``) polls.

One watch per run directory: a lock under ``$EVALGATE_HOME/watch-locks`` (filelock) makes a second one refuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from evalgate.checkpoints import resolve_checkpoint
from evalgate.diagnostics.diagnose import Diagnosis, diagnose, format_table, seed_from_path
from evalgate.diagnostics.guards import Guards, trips
from evalgate.diagnostics.log import TrainLog, find_train_log, read_jsonl
from evalgate.errors import EvalgateError, RefusedByPolicy
from evalgate.fileio import atomic_write
from evalgate.protocol import load_protocol, verify
from evalgate.run import RunOptions, evaluate
from evalgate.splits import SplitManager, actor_name
from evalgate.store import Store, home

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "adapter_model.safetensors")
STATE_FILE = "trainer_state.json"
QUEUE_FILE = "evalgate-queue.jsonl"
LOG_FILE = "evalgate-log.jsonl"
STOP_FILE = "STOP"
EXIT_STOPPED = 1
"""``--exit-on-stop``: the exit code after a STOP file was written (a failed run, like a gate FAIL)."""
_CKPT = re.compile(r"^checkpoint-(\d+)$")


@dataclass
class WatchOptions:
    """What ``watch`` evaluates and how.

    Attributes:
        protocol: frozen protocol YAML.
        split: the dev split evaluated.
        metric: the run metric followed (``pass@1``, ``mean_score``; a policy's ``metric`` overrides).
        collapse_drop: absolute drop of the metric from the run's previous checkpoint that writes STOP (None: off).
        guards: diagnostics thresholds and the severities that write STOP.
        settle_s: seconds a checkpoint's files must stay unchanged before it is read.
        poll_s: seconds between looks at the run directories.
        exit_on_stop: exit (``EXIT_STOPPED``) after writing a STOP file instead of watching on.
        exit_when_done: exit 0 once every run's newest ``trainer_state.json`` reached ``max_steps`` and every
            checkpoint is evaluated.
        status_dir: where ``status.json`` and ``status.html`` are written.
        run: RunOptions of every evaluation (backend, seed, actor, ...; purpose ``watch``).
    """

    protocol: Path
    split: str
    metric: str = "pass@1"
    collapse_drop: float | None = 0.1
    guards: Guards = field(default_factory=Guards)
    settle_s: float = 10.0
    poll_s: float = 1.0
    exit_on_stop: bool = False
    exit_when_done: bool = False
    status_dir: Path = Path("reports/watch")
    run: RunOptions = field(default_factory=lambda: RunOptions(purpose="watch", progress=False))

    @classmethod
    def from_policy(cls, policy_path: str | Path, **kw: Any) -> WatchOptions:
        """Options taking ``metric``, ``selection.collapse_drop`` and the guards (the diagnostics' ``Guards``) from a
        gate policy file; ``kw`` as the constructor."""
        from evalgate.gate.policy import load_policy

        pol = load_policy(policy_path)
        extra: dict[str, Any] = {"metric": pol.metric, "collapse_drop": pol.selection.collapse_drop,
                                 "guards": pol.guards}
        return cls(**{**extra, **kw})


@dataclass
class CheckpointState:
    """One checkpoint seen by the watch.

    Attributes:
        run_dir, path, step: where it is.
        status: ``settling`` (being written or waiting out the settle time), ``ready``, ``evaluating``, ``done``,
            ``skipped`` (deleted) or ``failed`` (its evaluation raised).
        message: why it waits, was skipped or failed.
        metric: the dev metric once done; ``run_id`` the run that holds it (``resumed``: found in the store).
        last_change: wall time (epoch s) its files last changed; ``eval_started``: when its evaluation began.
    """

    run_dir: str
    path: str
    step: int
    status: str = "settling"
    message: str | None = None
    metric: float | None = None
    run_id: str | None = None
    resumed: bool = False
    last_change: float | None = None
    eval_started: float | None = None
    signature: tuple[tuple[str, int, int], ...] | None = field(default=None, repr=False)


@dataclass
class RunState:
    """One watched run directory: its checkpoints, its diagnosis and its STOP reason."""

    run_dir: str
    checkpoints: dict[int, CheckpointState] = field(default_factory=dict)
    diagnosis: Diagnosis | None = None
    log_key: tuple[str, int, int] | None = None
    stop: dict[str, Any] | None = None
    max_steps: int | None = None
    global_step: int | None = None
    finished: bool = False


def signature(ckpt: Path) -> tuple[tuple[str, int, int], ...]:
    """(relative path, size, mtime_ns) of every file under ``ckpt``, sorted: any write changes it."""
    out = []
    for root, _, files in os.walk(ckpt):
        for f in files:
            p = os.path.join(root, f)
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(p)
                out.append((os.path.relpath(p, ckpt), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


def incomplete(ckpt: Path) -> str | None:
    """Why ``ckpt`` cannot be read yet (no weights, no config, no or unparsable ``trainer_state.json``), or None."""
    if not any((ckpt / w).is_file() for w in WEIGHT_FILES):
        return "no weights file yet"
    if not (ckpt / "config.json").is_file() and not (ckpt / "adapter_config.json").is_file():
        return "no config.json yet"
    state = ckpt / STATE_FILE
    if not state.is_file():
        return f"no {STATE_FILE} yet"
    try:
        json.loads(state.read_text())
    except (ValueError, OSError) as e:
        return f"{STATE_FILE} does not parse yet ({type(e).__name__}); retrying"
    return None


def read_queue(run_dir: Path) -> tuple[set[int], bool]:
    """What ``EvalgateCallback`` wrote to ``run_dir/evalgate-queue.jsonl``: the steps it announced as saved, and
    whether training ended (an ``{"event": "train_end"}`` line). A half-written last line is ignored until it is
    complete."""
    q = run_dir / QUEUE_FILE
    steps: set[int] = set()
    ended = False
    if not q.is_file():
        return steps, ended
    for line in q.read_text().splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            rec = json.loads(line)
            if rec.get("event") == "train_end":
                ended = True
            else:
                steps.add(int(rec["step"]))
    return steps, ended


def write_stop(run_dir: Path, reason: str, step: int | None, source: str) -> dict[str, Any]:
    """Write ``run_dir/STOP`` (JSON: reason, step, source, time) atomically; returns what was written."""
    doc = {"reason": reason, "step": step, "source": source, "time": datetime.now(UTC).isoformat(),
           "by": f"evalgate watch (pid {os.getpid()})"}
    atomic_write(run_dir / STOP_FILE, json.dumps(doc, indent=2) + "\n")
    return doc


@contextlib.contextmanager
def watch_locks(run_dirs: list[Path]) -> Iterator[None]:
    """Hold one lock per run directory for the watch's lifetime.

    Raises:
        RefusedByPolicy: another watch holds one of them (exit 2).
    """
    locks: list[FileLock] = []
    d = home() / "watch-locks"
    d.mkdir(parents=True, exist_ok=True)
    try:
        for rd in run_dirs:
            key = hashlib.sha256(str(rd.resolve()).encode()).hexdigest()[:16]
            lock = FileLock(str(d / f"{key}.lock"))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                holder = (d / f"{key}.pid").read_text().strip() if (d / f"{key}.pid").is_file() else "unknown"
                raise RefusedByPolicy(f"another evalgate watch ({holder}) is watching {rd}; stop it first (Ctrl-C or "
                                      "SIGTERM), or watch another run directory") from None
            locks.append(lock)
            (d / f"{key}.pid").write_text(f"pid {os.getpid()} on {os.uname().nodename}\n")
        yield
    finally:
        for lock in locks:
            lock.release()


class Watcher:
    """The watch loop over one or more run directories (see the module docstring).

    Args:
        run_dirs: training output directories (the parents of ``checkpoint-N``); they may not exist yet.
        opts: WatchOptions.
        store: the Store (default ``$EVALGATE_HOME``).
        say: where progress lines go (default: stderr).

    Raises:
        BadInput, ProtocolDrift: protocol or split invalid (checked at construction, before any watching).
        RefusedByPolicy: the split's tier does not allow purpose ``watch`` (a private split; logged as refused).
    """

    def __init__(self, run_dirs: list[str | Path], opts: WatchOptions, store: Store | None = None,
                 say: Callable[[str], None] | None = None):
        self.opts = opts
        self.store = store or Store()
        self.protocol = load_protocol(opts.protocol)
        verify(self.protocol)
        # a split the tier never lets 'watch' read (private) is refused here, before a stored run of it is reused
        SplitManager(self.store).check_purpose(opts.split, opts.run.purpose, actor_name(opts.run.actor))
        self.seed = self.protocol.spec.sampling.seed if opts.run.seed is None else opts.run.seed
        self.runs = [RunState(str(Path(d))) for d in run_dirs]
        self._say = say or (lambda s: print(s, file=sys.stderr, flush=True))
        self._said: set[str] = set()
        self.evaluating: CheckpointState | None = None
        self.started = datetime.now(UTC).isoformat()
        self.evaluated = 0
        self.signal: int | None = None
        self._interruptible = False

    def say(self, line: str, once: bool = False) -> None:
        if once and line in self._said:
            return
        self._said.add(line)
        self._say(f"watch: {line}")

    # -- one look at the run directories ----------------------------------------------------------------------
    def scan(self) -> None:
        """Find new checkpoints, advance settling ones, notice deleted ones, re-diagnose changed logs."""
        now = time.time()
        for rs in self.runs:
            rd = Path(rs.run_dir)
            if not rd.is_dir():
                self.say(f"{rd} does not exist yet; waiting for it", once=True)
                continue
            queued, ended = read_queue(rd)
            rs.finished = rs.finished or ended
            present = {int(m.group(1)): rd / c for c in os.listdir(rd) if (m := _CKPT.match(c)) and (rd / c).is_dir()}
            for step, path in present.items():
                cs = rs.checkpoints.setdefault(step, CheckpointState(str(rd), str(path), step))
                if cs.status == "settling":
                    self._settle(cs, path, step in queued, now)
                    if cs.status == "ready":
                        self._progress(rs, path)
            for step, cs in rs.checkpoints.items():
                if step not in present and cs.status in ("settling", "ready"):
                    cs.status, cs.message = "skipped", "deleted before it was evaluated"
                    self.say(f"{cs.path} was deleted before it was evaluated; skipping it")
            self._diagnose(rs)

    def _settle(self, cs: CheckpointState, path: Path, queued: bool, now: float) -> None:
        sig = signature(path)
        if sig != cs.signature:
            cs.signature, cs.last_change = sig, now
        why = incomplete(path)
        if why is not None:
            cs.message = why
            if "does not parse" in why:
                self.say(f"{path}: {why}", once=True)
            return
        if queued or now - (cs.last_change or now) >= self.opts.settle_s:
            cs.status, cs.message = "ready", "announced by EvalgateCallback" if queued else None
        else:
            cs.message = f"settling ({now - (cs.last_change or now):.0f}/{self.opts.settle_s:g} s unchanged)"

    @staticmethod
    def _progress(rs: RunState, ckpt: Path) -> None:
        """Training progress from a complete checkpoint's ``trainer_state.json``: global_step, max_steps, and
        finished once global_step reached max_steps."""
        with contextlib.suppress(ValueError, OSError, TypeError):
            state = json.loads((ckpt / STATE_FILE).read_text())
            g, m = int(state.get("global_step") or 0), int(state.get("max_steps") or 0)
            if g >= (rs.global_step or 0):
                rs.global_step, rs.max_steps = g, m or rs.max_steps
            rs.finished = rs.finished or bool(m and g >= m)

    def _log_source(self, rd: Path) -> Path | None:
        if (rd / LOG_FILE).is_file():
            return rd / LOG_FILE
        steps = sorted((int(m.group(1)), rd / c) for c in os.listdir(rd) if (m := _CKPT.match(c)))
        for _, c in reversed(steps):
            if (c / STATE_FILE).is_file():
                return c / STATE_FILE
        return rd / STATE_FILE if (rd / STATE_FILE).is_file() else None

    def _diagnose(self, rs: RunState) -> None:
        rd = Path(rs.run_dir)
        src = self._log_source(rd)
        if src is None:
            return
        with contextlib.suppress(FileNotFoundError):
            st = src.stat()
            key = (str(src), st.st_size, st.st_mtime_ns)
            if key == rs.log_key:
                return
            try:
                log: TrainLog | None = read_jsonl(src) if src.name == LOG_FILE else find_train_log(rd)
            except EvalgateError as e:  # being written: the next look reads it again
                self.say(f"training log not readable yet ({e}); retrying", once=True)
                return
            rs.log_key = key
            if log is None:
                return
            seed = seed_from_path(rd)
            rs.diagnosis = diagnose(log, self.opts.guards, label=rd.name, seed=seed)
            hits = trips(rs.diagnosis, self.opts.guards, live=not rs.finished)
            if hits:
                f = hits[0]
                self._stop(rs, f"{f.signal} ({f.status}) at step {f.step}: {f.message}", f.step, "diagnostics")

    def _stop(self, rs: RunState, reason: str, step: int | None, source: str) -> None:
        if rs.stop is not None:
            return
        rs.stop = write_stop(Path(rs.run_dir), reason, step, source)
        self.say(f"STOP written to {Path(rs.run_dir) / STOP_FILE}: {reason}")

    # -- evaluation ---------------------------------------------------------------------------------------------
    def next_ready(self) -> CheckpointState | None:
        """The oldest ready checkpoint (lowest step; run directory order breaks ties)."""
        ready = [(cs.step, i, cs) for i, rs in enumerate(self.runs) for cs in rs.checkpoints.values()
                 if cs.status == "ready"]
        return min(ready, key=lambda t: (t[0], t[1]))[2] if ready else None

    def evaluate_one(self, cs: CheckpointState) -> None:
        """Evaluate one checkpoint (or find its complete run in the store); a deleted checkpoint is skipped, an
        evaluation that raises marks it failed and the watch goes on."""
        rs = next(r for r in self.runs if r.run_dir == cs.run_dir)
        path = Path(cs.path)
        cs.status, cs.eval_started, self.evaluating = "evaluating", time.time(), cs
        self.write_status()
        try:
            ckpt = resolve_checkpoint(path, recorded=self.store.recorded_checkpoint)
            done = self.store.runs(checkpoint_digest=ckpt.digest, protocol_hash=self.protocol.sha256,
                                   split=self.opts.split, backend=self.opts.run.backend, sampling_seed=self.seed,
                                   status="complete")
            if done:
                doc, cs.resumed = done[-1], True
                self.say(f"{path.name} ({rs.run_dir}): already evaluated (run {doc['run_id']}); not evaluated again")
            else:
                self.say(f"evaluating {path} on {self.opts.split}")
                self._interruptible = True
                try:
                    doc = evaluate(self.opts.protocol, ckpt, self.opts.split, self.opts.run, self.store)
                finally:
                    self._interruptible = False
                self.evaluated += 1
        except KeyboardInterrupt:  # a signal during the evaluation: evaluate() marked its run interrupted
            cs.status, cs.message = "ready", "interrupted by a signal; evaluated again (from its stored samples) " \
                                             "by the next watch"
            raise
        except (EvalgateError, OSError) as e:
            if not path.exists():
                cs.status, cs.message = "skipped", "deleted while it was being evaluated"
                self.say(f"{path} was deleted while it was being evaluated; skipping it")
            else:
                cs.status, cs.message = "failed", str(e)
                self.say(f"{path}: evaluation failed: {e}")
            return
        finally:
            self.evaluating = None
        value = (doc.get("metrics") or {}).get(self.opts.metric)
        cs.status, cs.run_id, cs.metric = "done", doc["run_id"], value
        cs.message = None
        if not cs.resumed:
            self.say(f"{path.name} ({rs.run_dir}): dev {self.opts.metric} = {value}")
        self._check_collapse(rs, cs)

    def _check_collapse(self, rs: RunState, cs: CheckpointState) -> None:
        drop = self.opts.collapse_drop
        prev = [c for c in rs.checkpoints.values() if c.status == "done" and c.step < cs.step and c.metric is not None]
        if drop is None or cs.metric is None or not prev:
            return
        p = max(prev, key=lambda c: c.step)
        assert p.metric is not None
        if p.metric - cs.metric > drop:
            self._stop(rs, f"dev {self.opts.metric} collapsed at step {cs.step}: {p.metric:.4f} (step {p.step}) -> "
                           f"{cs.metric:.4f}, a drop of more than {drop}", cs.step, "collapse")

    # -- the loop -----------------------------------------------------------------------------------------------
    def done(self) -> bool:
        """Every run's training ended (a complete checkpoint at ``max_steps``, or the callback's ``train_end``) and
        none of its checkpoints is left to evaluate."""
        return all(rs.finished and not any(c.status in ("settling", "ready", "evaluating")
                                           for c in rs.checkpoints.values()) for rs in self.runs)

    def _on_signal(self, signum: int, frame: Any) -> None:
        """SIGINT / SIGTERM: stop between steps. During an evaluation the run is cut short at once (``evaluate``
        marks it interrupted and keeps its stored generations); otherwise the loop stops at its next check."""
        self.signal = signum
        if self._interruptible:
            raise KeyboardInterrupt

    def run(self) -> int:
        """Watch until a signal (returns 128 + the signal number: 130 Ctrl-C, 143 SIGTERM), a STOP with
        ``exit_on_stop`` (returns ``EXIT_STOPPED``) or, with ``exit_when_done``, the end of training (returns 0)."""
        handlers = {}
        if _main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            with watch_locks([Path(r.run_dir) for r in self.runs]):
                self.say(f"watching {', '.join(r.run_dir for r in self.runs)} ({self.protocol.spec.name}@"
                         f"{self.protocol.spec.version} on {self.opts.split}, settle {self.opts.settle_s:g} s)")
                try:
                    return self._loop()
                except KeyboardInterrupt:
                    return self._stopped()
        finally:
            for sig, old in handlers.items():
                signal.signal(sig, old)

    def _stopped(self) -> int:
        signum = self.signal or signal.SIGINT
        self.write_status(state="stopped")
        self.say(f"stopped by {signal.Signals(signum).name}; nothing incomplete was marked complete")
        return 128 + signum

    def _loop(self) -> int:
        while True:
            self.scan()
            if self.signal:
                return self._stopped()
            if self.opts.exit_on_stop and any(r.stop for r in self.runs):
                self.write_status(state="stopped on STOP")
                return EXIT_STOPPED
            cs = self.next_ready()
            if cs is not None:
                self.evaluate_one(cs)
                self.write_status()
                continue
            self.write_status()
            if self.opts.exit_when_done and self.done():
                self.write_status(state="done")
                return 0
            time.sleep(self.opts.poll_s)

    # -- status ---------------------------------------------------------------------------------------------------
    def status(self, state: str = "watching") -> dict[str, Any]:
        """The JSON status document (what ``status.json`` holds)."""
        def ck(c: CheckpointState) -> dict[str, Any]:
            d = asdict(c)
            d.pop("signature")
            return d

        return {"state": state, "updated_at": datetime.now(UTC).isoformat(), "started_at": self.started,
                "pid": os.getpid(), "protocol": f"{self.protocol.spec.name}@{self.protocol.spec.version}",
                "split": self.opts.split, "metric": self.opts.metric, "settle_s": self.opts.settle_s,
                "evaluating": ck(self.evaluating) if self.evaluating else None,
                "runs": [{"run_dir": r.run_dir, "exists": Path(r.run_dir).is_dir(), "stop": r.stop,
                          "global_step": r.global_step, "max_steps": r.max_steps,
                          "checkpoints": [ck(c) for _, c in sorted(r.checkpoints.items())],
                          "diagnostics": r.diagnosis.as_dict() if r.diagnosis else None} for r in self.runs]}

    def write_status(self, state: str = "watching") -> None:
        """Write ``status.json`` and the self-refreshing ``status.html`` (atomically)."""
        doc = self.status(state)
        d = Path(self.opts.status_dir)
        atomic_write(d / "status.json", json.dumps(doc, indent=2, default=str) + "\n")
        atomic_write(d / "status.html", render_status(doc, [r.diagnosis for r in self.runs if r.diagnosis],
                                                      self._chart(doc)))

    _chart_key: Any = None
    _chart_svg: str = ""

    def _chart(self, doc: dict[str, Any]) -> str:
        pts = [(r["run_dir"], [(c["step"], c["metric"]) for c in r["checkpoints"] if c["metric"] is not None])
               for r in doc["runs"]]
        if pts != self._chart_key:
            self._chart_key, self._chart_svg = pts, metric_svg(pts, self.opts.metric)
        return self._chart_svg


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def metric_svg(series: list[tuple[str, list[tuple[int, float]]]], metric: str) -> str:
    """Dev metric per step, one line per run directory (seed), as inline SVG; "" when nothing is evaluated yet."""
    if not any(p for _, p in series):
        return ""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2, 2.6), dpi=72)
    ax = fig.add_subplot()
    for name, pts in series:
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=Path(name).name)
    ax.set_xlabel("step")
    ax.set_ylabel(f"dev {metric}")
    ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.14, right=0.97, bottom=0.2, top=0.95)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def render_status(doc: dict[str, Any], diags: list[Diagnosis], chart: str) -> str:
    """The live status page: refreshes itself every 5 s while watching; what is evaluated now, the dev metric per
    step per run, each run's checkpoints and STOP reason, and the diagnostics table."""
    e = html.escape
    refresh = "<meta http-equiv='refresh' content='5'>" if doc["state"] == "watching" else ""
    now = doc["evaluating"]
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>{refresh}<title>evalgate watch</title><style>"
             "body{font-family:sans-serif;max-width:70em;margin:1em auto}td,th{padding:.2em .6em;text-align:left}"
             ".stop{background:#fee;border:1px solid #b00;padding:.5em}.done{color:#060}.failed,.skipped{color:#b00}"
             "pre{background:#f6f6f6;padding:.5em;overflow:auto}</style></head><body>",
             f"<h1>evalgate watch: {e(doc['protocol'])} on {e(doc['split'])}</h1>",
             f"<p>state <b>{e(doc['state'])}</b>, updated {e(doc['updated_at'])} (pid {doc['pid']}); evaluating now: "
             f"<b>{e(now['path']) if now else 'nothing'}</b></p>", chart]
    for r in doc["runs"]:
        parts.append(f"<h2>{e(r['run_dir'])}</h2>")
        if not r["exists"]:
            parts.append("<p>does not exist yet; waiting for it</p>")
        if r["stop"]:
            parts.append(f"<p class='stop'>STOP: {e(r['stop']['reason'])}</p>")
        parts.append(f"<table><tr><th>step</th><th>status</th><th>dev {e(doc['metric'])}</th><th>run</th>"
                     "<th>note</th></tr>")
        for c in r["checkpoints"]:
            m = "" if c["metric"] is None or not math.isfinite(c["metric"]) else f"{c['metric']:.4f}"
            parts.append(f"<tr class='{e(c['status'])}'><td>{c['step']}</td><td>{e(c['status'])}</td><td>{m}</td>"
                         f"<td>{e(c['run_id'] or '')}</td><td>{e(c['message'] or '')}</td></tr>")
        parts.append("</table>")
    if diags:
        parts.append(f"<h2>diagnostics</h2><pre>{e(format_table(diags))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
