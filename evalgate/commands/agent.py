"""``evalgate trajectories``: the turns, tool calls, results and violations of an agentic run."""

from __future__ import annotations

import click

from evalgate.commands import dump, handle_errors


@click.command("trajectories")
@click.argument("run_id")
@click.option("--item", default=None, help="Only this item's samples.")
@click.option("--json", "as_json", is_flag=True, help="Print the trajectories as one JSON document.")
@handle_errors
def trajectories(run_id: str, item: str | None, as_json: bool) -> None:
    """Show every turn of RUN_ID's samples: the model's text, each tool call with its result, violations and parse
    errors (exit 2: no such run, or it stored no trajectory)."""
    from evalgate.agent.view import format_trajectories, run_trajectories
    from evalgate.store import Store

    records = run_trajectories(Store(), run_id, item)
    if as_json:
        dump(records)
    else:
        click.echo(format_trajectories(records))
