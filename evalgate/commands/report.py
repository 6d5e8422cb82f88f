"""``evalgate report GATE_ID``: write a stored gate's (or suite's) outputs again from its stored verdict, reading no
split."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.gate.report.writers import outputs_from, report_options


@click.command("report")
@click.argument("gate_id")
# The output options are evalgate gate's (report_writers.report_options: --report/--html, --json-out, --junit,
# --markdown, a plugin's), and --json is the flag it is in every command (print the document), so a gate's command
# line re-renders by changing its verb.
@report_options
@click.option("--json", "as_json", is_flag=True, help="Print the verdict's JSON document on stdout.")
@handle_errors
def report_cmd(gate_id: str, as_json: bool, **outputs: Path | None) -> None:
    """Re-render the stored verdict of gate GATE_ID (printed by 'evalgate gate'; a suite's id renders the whole
    suite from its members' stored gates) without reading any split or spending budget; exits like the gate did (0
    PASS, 1 FAIL), or 2 when the access log (its chain and signed head) does not hold or does not record this
    verdict (the store was edited), or cannot be checked here (no signing key, needed as for a gate)."""
    from evalgate.commands.gate import _print_outputs
    from evalgate.gate.results import ship_line

    report = workspace().report(gate_id, outputs_from(outputs))
    doc = report.as_dict()
    if as_json:
        dump(doc)
    else:
        what = f"suite {doc['suite']}" if "members" in doc else f"gate {doc['gate']}"
        click.echo(f"{doc['verdict']} ({doc['reason']}): {what}, stored as {gate_id}")
        _print_outputs(doc)
        click.echo(ship_line(doc["ship"]))
    sys.exit(0 if report.passed else 1)
