"""``evalgate diagnose``: which training curve broke first (``evalgate.diagnostics``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.commands.options import OUT_FILE


@click.command("diagnose")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--seed", "seeds", multiple=True, type=int, help="Training seed of each path, in order (default: "
              "from a seed-N directory name).")
@click.option("--thresholds", "thresholds_file", type=click.Path(path_type=Path), default=None,
              help="YAML file of Thresholds fields (docs/DIAGNOSTICS.md).")
@click.option("--kl-target", type=click.FloatRange(0, min_open=True), default=None,
              help="KL target (> 0): KL above 2x this fails.")
@click.option("--report", type=OUT_FILE, default=None, help="Write an HTML report with plots.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def diagnose_cmd(paths: tuple[Path, ...], seeds: tuple[int, ...], thresholds_file: Path | None,
                 kl_target: float | None, report: Path | None, as_json: bool) -> None:
    """Which curve broke first: signals over training logs (trainer_state.json, JSONL, TensorBoard, or run
    directories), one column per seed. Exit 1 when a fail signal fires, 2 on bad input."""
    from evalgate.diagnostics import format_table

    found = workspace().diagnose(paths, seeds, thresholds_file, kl_target, report)
    if as_json:
        _dump(found.as_dict())
    else:
        click.echo(format_table(found.seeds))
        if found.report:
            click.echo(f"report: {found.report}")
    sys.exit(1 if found.fail else 0)
