"""``EvalgateCallback``: the diagnostics and the watch inside a ``transformers`` training loop (TRL's trainers take
it unchanged: they are ``Trainer`` subclasses and call the same ``TrainerCallback`` hooks).

- ``on_log``: the diagnostics run on ``state.log_history`` (``diagnostics.guards.guard_seed``); a finding whose
  severity is in the guards' ``fail_on`` sets ``control.should_training_stop``, with the reason printed on stderr and
  saved in ``<output_dir>/evalgate-stop.json``. A ``STOP`` file that ``evalgate watch`` wrote into the output
  directory stops training the same way. Each log record is also appended to ``<output_dir>/evalgate-log.jsonl``,
  so a watch re-diagnoses between checkpoints.
- ``on_save``: the new ``checkpoint-N`` is announced in ``<output_dir>/evalgate-queue.jsonl`` (a running watch reads
  it without waiting out its settle time) or, with ``evaluate=True``, evaluated in-process through ``evaluate()``;
  the run's metrics then go into the trainer's log at that step (``eval_<protocol>/<metric>``, through
  ``trainer.log`` when the callback holds the trainer, so its ``report_to`` trackers show ``eval/<protocol>/<metric>``
  beside ``train/loss``), and one line per checkpoint is printed on stderr.
- ``on_train_end``: a ``train_end`` line in the queue file, so ``evalgate watch --exit-when-done`` can finish.
- ``on_train_begin``: leftovers of an earlier run in the same ``output_dir`` are moved aside (renamed
  ``<name>.previous-<time>``), never obeyed or merged: the ``STOP`` file and
  ``evalgate-stop.json`` always (they were written before this training began); on a fresh start (global step 0)
  also ``evalgate-log.jsonl`` and ``evalgate-queue.jsonl``. A resumed run keeps its log (the steps it logs again
  make an abandoned segment that the diagnostics judge too) and drops the stale ``train_end`` lines of its queue.

Importing this module imports ``transformers`` (for ``TrainerCallback``), never vLLM.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from evalgate.core.fileio import atomic_write
from evalgate.diagnostics.diagnose import diagnose
from evalgate.diagnostics.guards import Guards, trips
from evalgate.diagnostics.log import from_records
from evalgate.watch.files import LOG_FILE, QUEUE_FILE, STOP_FILE

STOP_REASON_FILE = "evalgate-stop.json"

__all__ = ["EvalgateCallback"]


class EvalgateCallback(TrainerCallback):  # type: ignore[misc]
    """Stop training when the diagnostics fail; hand each checkpoint to ``evalgate watch`` or evaluate it.

    Args:
        guards: thresholds and ``fail_on`` severities (default ``Guards()``: stop on ``fail`` findings).
        policy: a gate policy file whose ``guards`` section (the diagnostics' ``Guards``) is used.
        protocol, split: what ``evaluate=True`` evaluates each checkpoint with (a frozen protocol, a dev split).
        evaluate: evaluate each saved checkpoint in-process (blocks training while it runs); default: hand it to
            a watch through the queue file.
        run_options: ``RunOptions`` for in-process evaluation (default purpose ``watch``, no progress bars).
        seed: training seed for the diagnosis's label (default: ``args.seed``).
        trainer: the ``Trainer`` (or TRL trainer) this callback is added to, as TRL's own evaluation callbacks take
            it (``trainer.add_callback(EvalgateCallback(..., trainer=trainer))``; or set ``callback.trainer`` after
            building the trainer). With it each evaluation is logged through ``trainer.log``: into
            ``state.log_history`` at the trainer's step and to every ``report_to`` tracker (TensorBoard, W&B, ...),
            which write the ``eval_`` prefix as ``eval/``. Without it the record goes into ``state.log_history`` only
            (hence ``trainer_state.json``), and no tracker sees it.
        store: the ``Store`` that ``evaluate=True``'s runs go to (a ``Workspace``'s ``ws.store``); default: the store of
            the ``EVALGATE_*`` variables, opened at the first evaluation, as ``evalgate run`` in that environment.

    Attributes:
        stop_reason: why training was stopped (None while it runs on).
        results: run documents of in-process evaluations, in save order.
    """

    def __init__(self, guards: Guards | None = None, policy: str | Path | None = None,
                 protocol: str | Path | None = None, split: str | None = None, evaluate: bool = False,
                 run_options: Any = None, seed: int | None = None, trainer: Any = None, store: Any = None):
        if evaluate and (protocol is None or split is None):
            from evalgate.core.errors import BadInput

            raise BadInput("EvalgateCallback(evaluate=True) needs protocol= and split= (a frozen protocol and a dev "
                           "split)")
        if guards is None and policy is not None:
            from evalgate.gate.policy import load_policy

            guards = load_policy(policy, resolve_paths=False).guards  # its paths (the baseline) are not used
        self.guards = guards or Guards()
        self.protocol, self.split, self.evaluate, self.run_options = protocol, split, evaluate, run_options
        self.seed = seed
        self.trainer = trainer
        self.store = store  # where evaluate=True's runs go; None: the EVALGATE_* variables' store, at the first one
        self.stop_reason: str | None = None
        self.results: list[dict[str, Any]] = []

    def _stop(self, args: Any, control: Any, reason: str, step: int, first_step: int | None = None) -> None:
        """Stop training at ``step`` (the global step now); ``first_step``: where the finding began."""
        control.should_training_stop = True
        if self.stop_reason is None:
            self.stop_reason = reason
            print(f"evalgate: stopping training at step {step}: {reason}", file=sys.stderr, flush=True)
            doc = {"reason": reason, "step": step, "first_step": first_step, "time": time.time()}
            atomic_write(Path(args.output_dir) / STOP_REASON_FILE, json.dumps(doc, indent=2) + "\n")

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not state.is_world_process_zero:
            return control
        out = Path(args.output_dir)
        fresh = not state.global_step
        names = [STOP_FILE, STOP_REASON_FILE] + ([LOG_FILE, QUEUE_FILE] if fresh else [])
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for name in names:
            f = out / name
            if f.is_file():
                dest = f.with_name(f"{name}.previous-{stamp}")
                f.replace(dest)
                print(f"evalgate: {f} is left from an earlier run; moved to {dest.name}", file=sys.stderr,
                      flush=True)
        q = out / QUEUE_FILE
        if not fresh and q.is_file():
            lines = [ln for ln in q.read_text().splitlines(keepends=True) if '"train_end"' not in ln]
            atomic_write(q, "".join(lines))
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> Any:
        out = Path(args.output_dir)
        if state.is_world_process_zero and state.log_history:
            out.mkdir(parents=True, exist_ok=True)
            with open(out / LOG_FILE, "a") as fh:
                fh.write(json.dumps(state.log_history[-1]) + "\n")
        stop = out / STOP_FILE
        if stop.is_file():
            try:
                reason = json.loads(stop.read_text()).get("reason", "STOP file")
            except ValueError:
                reason = stop.read_text().strip() or "STOP file"
            self._stop(args, control, f"{stop}: {reason}", state.global_step)
            return control
        log = from_records(list(state.log_history), f"{out} (log_history)", "trainer_state")
        d = diagnose(log, self.guards, seed=self.seed if self.seed is not None else args.seed)
        hits = trips(d, self.guards, live=True)
        if hits:
            f = hits[0]
            self._stop(args, control, f"{f.signal} ({f.status}) since step {f.step}: {f.message}", state.global_step,
                       f.step)
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if not state.is_world_process_zero:
            return control
        if self.evaluate:
            from evalgate.runner.evaluate import RunOptions, evaluate

            opts = self.run_options or RunOptions(purpose="watch", progress=False)
            assert self.protocol is not None and self.split is not None
            if self.store is None:  # a training script's entry point, as the CLI: the process's variables, once
                from evalgate.core.environment import Environment
                from evalgate.store import Store

                self.store = Store(env=Environment.from_env())
            record = evaluate(self.protocol, ckpt, self.split, opts, self.store)
            self.results.append(record)
            self._log_evaluation(state, ckpt, record)
        else:
            self._queue(args, {"step": state.global_step, "checkpoint": str(ckpt), "time": time.time()})
        return control

    def _log_evaluation(self, state: Any, ckpt: Path, record: Any) -> None:
        """Put one evaluation's metrics into the trainer's log at the current step and print its line."""
        doc = record.as_dict() if hasattr(record, "as_dict") else dict(record)
        logs = eval_logs(doc)
        if self.trainer is not None:
            self.trainer.log(dict(logs))  # appends {**logs, "step": global_step} and calls every on_log
        else:
            state.log_history.append({**logs, "step": state.global_step})  # what Trainer.log records
        print(f"evalgate: {eval_line(doc, ckpt.name, state.global_step)}", file=sys.stderr, flush=True)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.is_world_process_zero:
            self._queue(args, {"event": "train_end", "step": state.global_step, "time": time.time(),
                               "stop_reason": self.stop_reason})
        return control

    @staticmethod
    def _queue(args: Any, rec: dict[str, Any]) -> None:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / QUEUE_FILE, "a") as f:
            f.write(json.dumps(rec) + "\n")


def eval_logs(doc: dict[str, Any]) -> dict[str, float]:
    """A run document's numeric metrics as trainer log keys: ``eval_<protocol name>/<metric>`` (``pass@1``,
    ``pass@1_stderr``, ``mean_completion_tokens``, ``truncation_rate``, ...; nested or non-numeric ones left out).

    The ``eval_`` prefix is the one ``Trainer.evaluate`` gives its metrics (``metric_key_prefix="eval"``), and
    ``transformers.integrations.rewrite_logs`` turns it into ``eval/`` for TensorBoard, W&B and the other trackers,
    so the curve shows as ``eval/<protocol>/<metric>`` beside ``train/loss``.
    """
    name = doc["protocol"]["name"]
    return {f"eval_{name}/{k}": float(v) for k, v in (doc.get("metrics") or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}


def eval_line(doc: dict[str, Any], checkpoint: str, step: int) -> str:
    """One line per evaluated checkpoint: ``checkpoint-4 (step 4): addition@1 on addition-dev: pass@1 0.650 ±
    0.075, truncation 0.0% (run <id>)``."""
    from evalgate.core.formatting import pm

    m = doc.get("metrics") or {}
    p = doc["protocol"]
    parts = [f"{k} {pm(m[k], m.get(k + '_stderr'))}" for k in m if k.startswith("pass@") and not k.endswith("_stderr")]
    if "mean_score" in m and not parts:
        parts.append(f"mean score {pm(m['mean_score'], m.get('mean_score_stderr'))}")
    if "truncation_rate" in m:
        parts.append(f"truncated {m['truncation_rate']:.1%}")
    return (f"{checkpoint} (step {step}): {p['name']}@{p['version']} on {doc['split']['name']}: "
            f"{', '.join(parts) or 'no metric'} (run {doc['run_id']})")
