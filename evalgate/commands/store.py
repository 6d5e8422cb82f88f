"""``evalgate store``: the store itself (``migrate``: a file store copied to a PostgreSQL server, or back)."""

from __future__ import annotations

import sys

import click

from evalgate.commands import dump, handle_errors, workspace


@click.group("store")
def store_cmd() -> None:
    """The store itself: copy it to a PostgreSQL server, or a server's store to a local file (docs/STORE.md)."""


@store_cmd.command("migrate")
@click.option("--to", "target", required=True,
              help="The new store: postgresql://user@host:port/dbname (password from PGPASSWORD or ~/.pgpass), or "
                   "a file path for a local copy. It must hold no rows.")
@click.option("--allow-broken", is_flag=True,
              help="Copy a store whose access log does not verify (the copy fails the same check).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def migrate_cmd(target: str, allow_broken: bool, as_json: bool) -> None:
    """Copy every row of this store (EVALGATE_STORE, else $EVALGATE_HOME/evalgate.duckdb) into a new one, after
    checking its access log (chain and signed head; a broken one is refused, exit 2, unless --allow-broken), and
    check the copy. Exit 0: copied and the copy verifies; 1: copied, the copy does not verify."""
    from evalgate.access.transfer import migrate_store

    doc = migrate_store(workspace().store, target, allow_broken)
    if as_json:
        dump(doc)
    else:
        n = sum(doc["rows"].values())
        state = "intact" if doc["after"]["ok"] else f"NOT intact (first bad row {doc['after']['first_bad_seq']})"
        click.echo(f"copied {n} rows of {len(doc['rows'])} tables from {doc['from']} to {doc['to']}; access log "
                   f"{doc['after']['rows']} rows, {state}")
    if not doc["after"]["ok"]:
        sys.exit(1)
