"""``evalgate report GATE_ID``: write a stored gate's outputs again from its stored verdict, reading no split."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalgate.commands import dump, handle_errors


@click.command("report")
@click.argument("gate_id")
# The output options are named as 'evalgate gate' names them (--report, --json-out, --junit, --markdown), and --json
# is the flag it is in every command (print the document), so a gate's command line re-renders by changing its verb.
@click.option("--report", "--html", "html", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the HTML release report here.")
@click.option("--json-out", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the verdict JSON here.")
@click.option("--junit", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Write JUnit XML here.")
@click.option("--markdown", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the Markdown summary here (it is also appended to $GITHUB_STEP_SUMMARY when set).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict's JSON document on stdout.")
@handle_errors
def report_cmd(gate_id: str, html: Path | None, json_out: Path | None, junit: Path | None, markdown: Path | None,
               as_json: bool) -> None:
    """Re-render the stored verdict of gate GATE_ID (printed by 'evalgate gate') without reading any split or
    spending budget; exits like the gate did (0 PASS, 1 FAIL)."""
    from evalgate.report import report_stored

    verdict, doc = report_stored(gate_id, report=html, junit=junit, json_out=json_out, markdown=markdown)
    if as_json:
        dump(doc)
    else:
        click.echo(f"{doc['verdict']} ({doc['reason']}): gate {doc['gate']}, stored as {gate_id}")
        for k in ("report", "junit", "json_out", "markdown"):
            if doc.get(k):
                click.echo(f"{k}: {doc[k]}")
        ship = doc["ship"]
        click.echo(f"ship: {ship['checkpoint']} ({ship['why']})" if ship["checkpoint"] else
                   f"ship: none ({ship['why']})")
    sys.exit(0 if verdict.passed else 1)
