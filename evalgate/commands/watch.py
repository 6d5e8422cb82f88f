"""``evalgate watch``: evaluate checkpoints as a training run writes them (``evalgate.watch``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from evalgate.commands import handle_errors, workspace
from evalgate.commands.options import backend_options_of, run_options
from evalgate.trackers.cli import export_and_say, tracker_options


@click.command("watch")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--split", required=True, help="The dev split each checkpoint is evaluated on.")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), default=None,
              help="Gate policy: its metric, selection.collapse_drop (and guards) decide when to write STOP.")
@click.option("--settle", "settle_s", type=click.FloatRange(0), default=10.0, show_default=True,
              help="Seconds a checkpoint's files must stay unchanged before it is read.")
@click.option("--poll", "poll_s", type=click.FloatRange(0.05), default=1.0, show_default=True,
              help="Seconds between looks at the run directories.")
@click.option("--status-dir", type=click.Path(path_type=Path), default=Path("reports/watch"), show_default=True,
              help="Where status.json and the self-refreshing status.html are written.")
@click.option("--exit-on-stop", is_flag=True, help="Exit 1 after writing a STOP file instead of watching on.")
@click.option("--exit-when-done", is_flag=True,
              help="Exit 0 once every run's training ended and its checkpoints are evaluated.")
@run_options()
@handle_errors
@tracker_options
def watch_cmd(run_dirs: tuple[Path, ...], protocol_path: Path, split: str, policy_path: Path | None, settle_s: float,
              poll_s: float, status_dir: Path, exit_on_stop: bool, exit_when_done: bool, backend: str,
              seed: int | None, actor: str | None, device: str | None, backend_option: tuple[str, ...],
              trackers: list[Any]) -> None:
    """Watch training run directories: evaluate each new checkpoint-N on the dev split once it is completely
    written (oldest first, one at a time, same store and cache as `evalgate run`), re-run the diagnostics on the
    growing training log, keep status.json and status.html current, and write RUN_DIR/STOP when a fail signal
    fires or the dev metric collapses. A restarted watch evaluates nothing twice.

    Exit codes: 0 training done (--exit-when-done); 1 a STOP was written (--exit-on-stop); 2 bad input, or another
    watch holds a run directory; 130 / 143 stopped by Ctrl-C / SIGTERM (between steps; an evaluation cut short is
    marked interrupted and resumes from its stored samples)."""
    from evalgate.runner.evaluate import RunOptions
    from evalgate.watch.loop import Watcher, WatchOptions

    run = RunOptions(backend=backend, seed=seed, purpose="watch", actor=actor, progress=False,
                     backend_options=backend_options_of(backend, backend_option, device))
    kw: dict[str, Any] = {"protocol": protocol_path, "split": split, "settle_s": settle_s, "poll_s": poll_s,
          "status_dir": status_dir, "exit_on_stop": exit_on_stop, "exit_when_done": exit_when_done, "run": run}
    opts = WatchOptions.from_policy(policy_path, **kw) if policy_path else WatchOptions(**kw)
    ws = workspace(actor)
    watcher = Watcher(list(run_dirs), opts, ws.store)
    if trackers:
        def export(run_id: str) -> None:
            export_and_say([run_id], trackers, actor, ws.store)

        watcher.on_run = export
    sys.exit(watcher.run())
