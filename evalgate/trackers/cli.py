"""The tracker options shared by ``evalgate run``, ``sweep``, ``watch`` and ``gate`` (``--report-to`` and the
tracker config), and the lines they print."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from evalgate.core.errors import BadInput
from evalgate.core.fileio import unwritable
from evalgate.trackers import TRACKERS, Tracker, TrackerConfig, open_trackers


def tracker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--report-to`` (repeatable), ``--tracker-dir``, ``--tracker-project``, ``--tracker-uri``; the command
    receives ``trackers``: the opened trackers (an empty list without ``--report-to``), opened before any work so
    a missing library is an install hint (exit 2) up front."""

    @click.option("--report-to", "report_to", multiple=True, type=click.Choice(list(TRACKERS)),
                  help="Also log the results to this tracker (repeatable): metrics at each checkpoint's training "
                       "step, one tracker run per training run + seed; a gate logs its verdict only.")
    @click.option("--tracker-dir", type=click.Path(path_type=Path), default=Path("evalgate-trackers"),
                  show_default=True, help="Where TensorBoard event files, W&B offline runs and the default MLflow "
                                          "store go.")
    @click.option("--tracker-project", default="evalgate", show_default=True,
                  help="W&B project / MLflow experiment.")
    @click.option("--tracker-uri", default=None, help="MLflow tracking URI (default sqlite:///DIR/mlflow.db).")
    @functools.wraps(fn)
    def wrapper(*args: Any, report_to: tuple[str, ...], tracker_dir: Path, tracker_project: str,
                tracker_uri: str | None, **kwargs: Any) -> Any:
        # a bad --tracker-dir is refused before any work, not after the run it was to record (a file inside it)
        if report_to and (why := unwritable(tracker_dir / "events")):
            raise BadInput(f"--tracker-dir {tracker_dir}: cannot write into it: {why}; pass a directory you can "
                           "write")
        config = TrackerConfig(dir=tracker_dir, project=tracker_project, tracking_uri=tracker_uri)
        return fn(*args, trackers=open_trackers(report_to, config) if report_to else [], **kwargs)

    return wrapper


def say_written(result: dict[str, Any], err: bool = True) -> None:
    """Print where the trackers wrote (stderr by default, so ``--json`` stdout stays one document)."""
    for line in result.get("written", []):
        click.echo(f"tracker: {line}", err=err)


def export_and_say(run_ids: list[str], trackers: list[Tracker], actor: str | None, store: Any) -> dict[str, Any] | None:
    """``export_runs`` (of ``store``, the command's workspace's) with its skipped runs and destinations on stderr; None
    without trackers."""
    if not trackers:
        return None
    from evalgate.trackers import export_runs

    result = export_runs(run_ids, trackers, store, actor=actor, say=lambda s: click.echo(f"tracker: {s}", err=True))
    say_written(result)
    return result
