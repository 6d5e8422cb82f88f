"""``watch``'s loop: evaluate a training run's checkpoints as they land, re-read its log, and stop it when it breaks.

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
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from evalgate.checkpoints.resolve import resolve_checkpoint
from evalgate.core.errors import EvalgateError, RefusedByPolicy
from evalgate.core.fileio import atomic_write
from evalgate.core.formatting import num, pm
from evalgate.diagnostics.diagnose import diagnose, seed_from_path
from evalgate.diagnostics.guards import Guards, trips
from evalgate.diagnostics.log import TrainLog, find_train_log, read_jsonl
from evalgate.protocol.spec import load_protocol, verify
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits.guard import SplitManager
from evalgate.splits.manifest import actor_name
from evalgate.store import Store
from evalgate.watch.detect import CheckpointState, RunState, checkpoint_dirs, log_source, progress, settle
from evalgate.watch.files import LOG_FILE, STOP_FILE, read_queue, write_stop
from evalgate.watch.status import metric_svg, render_status

EXIT_STOPPED = 1
"""``--exit-on-stop``: the exit code after a STOP file was written (a failed run, like a gate FAIL)."""


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
        gate policy file; ``kw`` as the constructor. Only those are read: the policy's paths (its baseline
        checkpoint, often ``$EVALGATE_BASELINE``) are neither resolved nor required.

        Raises:
            BadInput: the policy file is missing or invalid (``load_policy``)."""
        from evalgate.gate.policy import load_policy

        pol = load_policy(policy_path, resolve_paths=False)
        extra: dict[str, Any] = {"metric": pol.metric, "collapse_drop": pol.selection.collapse_drop,
                                 "guards": pol.guards}
        return cls(**{**extra, **kw})


@contextlib.contextmanager
def watch_locks(run_dirs: list[Path], home: Path) -> Iterator[None]:
    """Hold one lock per run directory for the watch's lifetime (the locks in ``home/watch-locks``: the store's
    directory, ``Environment.home``).

    Raises:
        RefusedByPolicy: another watch holds one of them (exit 2).
    """
    locks: list[FileLock] = []
    d = home / "watch-locks"
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

    def __init__(self, run_dirs: list[str | Path], opts: WatchOptions, store: Store,
                 say: Callable[[str], None] | None = None):
        self.opts = opts
        self.store = store
        self.protocol = load_protocol(opts.protocol)
        verify(self.protocol)
        # a split the tier never lets 'watch' read (private) is refused here, before a stored run of it is reused
        SplitManager(self.store).check_purpose(opts.split, opts.run.purpose,
                                               actor_name(opts.run.actor, env=self.store.env))
        self.seed = self.protocol.spec.sampling.seed if opts.run.seed is None else opts.run.seed
        self.runs = [RunState(str(Path(d))) for d in run_dirs]
        self._say = say or (lambda s: print(s, file=sys.stderr, flush=True))
        self._said: set[str] = set()
        self.evaluating: CheckpointState | None = None
        self.started = datetime.now(UTC).isoformat()
        self.evaluated = 0
        self.signal: int | None = None
        self._interruptible = False
        self.on_run: Callable[[str], None] | None = None
        """Called with each new run's id once it is complete (``--report-to``: its metrics go to the trackers)."""

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
            present = checkpoint_dirs(rd)
            for step, path in present.items():
                cs = rs.checkpoints.setdefault(step, CheckpointState(str(rd), str(path), step))
                if cs.status == "settling":
                    line = settle(cs, path, step in queued, now, self.opts.settle_s)
                    if line:
                        self.say(line, once=True)
                    if cs.status == "ready":
                        progress(rs, path)
            for step, cs in rs.checkpoints.items():
                if step not in present and cs.status in ("settling", "ready"):
                    cs.status, cs.message = "skipped", "deleted before it was evaluated"
                    self.say(f"{cs.path} was deleted before it was evaluated; skipping it")
            self._diagnose(rs)

    def _diagnose(self, rs: RunState) -> None:
        rd = Path(rs.run_dir)
        src = log_source(rd)
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
            ckpt = resolve_checkpoint(path, recorded=self.store.recorded_checkpoint, env=self.store.env)
            done = self.store.runs(checkpoint_digest=ckpt.digest, protocol_hash=self.protocol.sha256,
                                   split=self.opts.split, backend=self.opts.run.backend, sampling_seed=self.seed,
                                   status="complete")
            if done:
                doc, cs.resumed = done[-1].as_dict(), True  # the runs row as the run document has its fields
                self.say(f"{path.name} ({rs.run_dir}): already evaluated (run {doc['run_id']}); not evaluated "
                         "again")
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
            stderr = (doc.get("metrics") or {}).get(self.opts.metric + "_stderr")
            items = (doc.get("counts") or {}).get("items", "?")
            self.say(f"{path.name} ({rs.run_dir}): dev {self.opts.metric} {pm(value, stderr)} (± stderr, n {items} "
                     "items)")
            if self.on_run is not None:
                self.on_run(doc["run_id"])
        self._check_collapse(rs, cs)

    def _check_collapse(self, rs: RunState, cs: CheckpointState) -> None:
        drop = self.opts.collapse_drop
        prev = [c for c in rs.checkpoints.values() if c.status == "done" and c.step < cs.step and c.metric is not None]
        if drop is None or cs.metric is None or not prev:
            return
        p = max(prev, key=lambda c: c.step)
        assert p.metric is not None
        if p.metric - cs.metric > drop:
            self._stop(rs, f"dev {self.opts.metric} collapsed at step {cs.step}: {num(p.metric)} (step {p.step}) -> "
                           f"{num(cs.metric)}, a drop of more than {drop:g}", cs.step, "collapse")

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
            with watch_locks([Path(r.run_dir) for r in self.runs], self.store.env.home):
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


