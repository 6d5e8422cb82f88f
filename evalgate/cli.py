"""The ``evalgate`` command line: the group, and one ``add_command`` per command area of ``evalgate/commands/``.

Each command parses flags, calls one library function and prints.

Exit codes (DESIGN.md): 0 success / gate PASS; 1 gate FAIL or protocol drift; 2 bad input or refused by policy;
3 internal or engine error; 130 on Ctrl-C, 143 on SIGTERM (a run in progress is marked interrupted); 141 when
the reader closed stdout early (``| head``), quietly.
``--json`` prints one JSON document on stdout; progress and logs go to stderr (and ``--json`` turns every progress
bar off).
User errors print one line without a traceback; ``EVALGATE_DEBUG=1`` re-raises them.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from evalgate.commands import (
    agent,
    audit,
    audit_web,
    daily,
    diagnose,
    gate,
    init,
    parity,
    preflight,
    protocol,
    report,
    run,
    runs,
    splits,
    store,
    sweep,
    watch,
)
from evalgate.commands import dump as _dump


class _Main(click.Group):
    """The ``evalgate`` group: a ``--json`` command whose flags do not parse (a usage error, exit 2) still prints
    the JSON error document ``handle_errors`` prints for its other failures."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or "--json" not in argv:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:
            e.show()
            _dump({"error": e.format_message(), "exit_code": e.exit_code})
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)  # click.exceptions.Exit comes back as its code


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: this project's installed version, looked up under its distribution name only."""
    if value and not ctx.resilient_parsing:
        from evalgate.core.version import DISTRIBUTION, installed_version

        click.echo(f"evalgate ({DISTRIBUTION}), version {installed_version() or 'unknown (not installed)'}")
        ctx.exit()


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and exit.")
def main() -> None:
    """evalgate: frozen evaluation protocols, audited split tiers and release gates for LLM checkpoints."""


# One line per command area (evalgate/commands/<area>.py), sorted by area name.
main.add_command(agent.trajectories)
main.add_command(audit.audit_cmd)
main.add_command(audit_web.serve_cmd)
main.add_command(daily.compare_cmd)
main.add_command(daily.samples_cmd)
main.add_command(diagnose.diagnose_cmd)
main.add_command(gate.gate_cmd)
main.add_command(init.init_cmd)
main.add_command(parity.parity_cmd)
main.add_command(preflight.preflight_cmd)
main.add_command(protocol.protocol)
main.add_command(report.report_cmd)
main.add_command(run.run_cmd)
main.add_command(runs.runs_cmd)
main.add_command(splits.splits)
main.add_command(store.store_cmd)
main.add_command(sweep.sweep_cmd)
main.add_command(watch.watch_cmd)


if __name__ == "__main__":
    main()
