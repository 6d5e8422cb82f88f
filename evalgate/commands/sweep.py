"""``evalgate sweep``: many checkpoints x splits, locally or on Ray (``evalgate.sweep``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.commands.options import backend_options_of, run_options
from evalgate.trackers.cli import export_and_say, tracker_options

if TYPE_CHECKING:
    from evalgate.store import RunRow
    from evalgate.sweep import SweepSummary


@click.command("sweep")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoints", required=True, metavar="GLOB",
              help="Checkpoints to evaluate, quoted: HF/TRL directories and .gguf files, e.g. 'runs/*/checkpoint-*'.")
@click.option("--split", "splits", required=True, multiple=True, help="Split to evaluate on; repeatable.")
@run_options()
@click.option("--purpose", default="evaluation", show_default=True)
@click.option("--ray", "ray_address", default=None, metavar="auto|ADDRESS",
              help="Run the units on a Ray cluster: 'auto' (the one started on this machine) or its address. "
                   "Default: locally, one after another.")
@click.option("--ray-chunk", "chunk", type=click.IntRange(1), default=4, show_default=True,
              help="With --ray: requests per actor call; completions come back, and are stored, a chunk at a time.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep summary as JSON.")
@handle_errors
@tracker_options
def sweep_cmd(protocol_path: Path, checkpoints: str, splits: tuple[str, ...], backend: str, seed: int | None,
              purpose: str, actor: str | None, device: str | None, backend_option: tuple[str, ...],
              ray_address: str | None, chunk: int, as_json: bool, trackers: list[Any]) -> None:
    """Evaluate every checkpoint matching GLOB on every --split, skipping units already complete in the store.
    Exit 0 when every unit is done or skipped; 1 when the protocol no longer matches its lock (nothing run);
    else 2 (a refused read, bad input) or 3 (engine error)."""
    from evalgate.runner.evaluate import RunOptions
    from evalgate.views.runs import runs_by_id

    run = RunOptions(backend=backend, seed=seed, purpose=purpose, actor=actor,
                     backend_options=backend_options_of(backend, backend_option, device),
                     progress=not as_json)
    ws = workspace(actor)
    summary = ws.sweep(protocol_path, checkpoints, splits, run, ray=ray_address, chunk=chunk)
    run_ids = [u.run_id for u in summary.units if u.run_id]
    export_and_say(run_ids, trackers, actor, ws.store)
    if as_json:
        dump(summary.as_dict())
    else:
        _print_sweep(summary, runs_by_id(run_ids, ws.store))
    sys.exit(summary.exit_code)


def _print_sweep(summary: SweepSummary, runs: list[RunRow]) -> None:
    """The sweep's text output: units by status, tokens and time; a line per unit; the paths ignored; then the
    scores of its runs (made now or found complete in the store) as a table."""
    from evalgate.views.runs import results_table

    counts, seconds = ", ".join(f"{n} {s}" for s, n in summary.counts.items()), summary.wall_s
    click.echo(f"sweep of {len(summary.units)} units ({summary.where}): {counts}; {summary.tokens} tokens in "
               f"{seconds:.1f} s")
    for u in summary.units:
        line = f"  [{u.status}] {u.checkpoint} x {u.split}"
        click.echo(line + (f": run {u.run_id}" if u.run_id else "") + (f" ({u.error})" if u.error else ""))
    for path in summary.ignored:
        click.echo(f"  ignored: {path}")
    if runs:
        click.echo("\nresults:\n" + results_table(runs))
