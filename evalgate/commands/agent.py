"""``evalgate trajectories``: the turns, tool calls, results and violations of an agentic run."""

from __future__ import annotations

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.commands.options import actor_option


@click.command("trajectories")
@click.argument("run_id")
@click.option("--item", default=None, help="Only this item's samples.")
@actor_option()
@click.option("--json", "as_json", is_flag=True, help="Print the trajectories as one JSON document.")
@handle_errors
def trajectories(run_id: str, item: str | None, actor: str | None, as_json: bool) -> None:
    """Show every turn of RUN_ID's samples: the model's text, each tool call with its result, violations and parse
    errors. A logged read of the run's split; refused (exit 2, logged) for private and human-audit splits, as
    'evalgate samples' is (exit 2 too: no such run, or it stored no trajectory)."""
    from evalgate.views.trajectories import format_trajectories, run_trajectories

    ws = workspace(actor)
    records = run_trajectories(ws.store, run_id, item, ws.actor)
    if as_json:
        dump(records)
    else:
        click.echo(format_trajectories(records))
