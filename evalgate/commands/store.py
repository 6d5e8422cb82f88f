"""``evalgate store``: the store itself (``migrate``: a file store copied to a PostgreSQL server, or back)."""

from __future__ import annotations

import sys

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.commands.options import expect_head_option, parse_expect_head


@click.group("store")
def store_cmd() -> None:
    """The store itself: copy it to a PostgreSQL server, or a server's store to a local file (docs/STORE.md)."""


@store_cmd.command("migrate")
@click.option("--to", "target", required=True,
              help="The new store: postgresql://user@host:port/dbname (password from PGPASSWORD or ~/.pgpass), or "
                   "a file path for a local copy. It must hold no rows.")
@click.option("--accept-broken-chain", default=None, metavar="REASON",
              help="Copy a store whose access log does not hold (chain or signed head); the reason is logged in the "
                   "copy's access log, which stays marked broken.")
@expect_head_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def migrate_cmd(target: str, accept_broken_chain: str | None, expect_head: str | None, as_json: bool) -> None:
    """Copy every row of this store (EVALGATE_STORE, else $EVALGATE_HOME/evalgate.duckdb) into a new one.

    The access log is checked first without writing to it (hash chain, signed head with EVALGATE_LOG_KEY,
    --expect-head): one that does not hold is refused, exit 2, nothing written, unless --accept-broken-chain gives
    a reason. The copy is checked the same way. Exit 0: copied (and the copy verifies, or its broken chain was
    accepted); 1: the source held but the copy does not verify; 2: refused, nothing copied.
    """
    from evalgate.access.transfer import migrate_store

    ws = workspace()
    doc = migrate_store(ws.store, target, ws.actor, accept_broken_chain, parse_expect_head(expect_head))
    if doc["accepted_broken_chain"]:
        click.echo(f"warning: copied although the access log does not hold ({doc['problem']}); accepted: "
                   f"{doc['accepted_broken_chain']}; logged in the copy's access log", err=True)
    if as_json:
        dump(doc)
    else:
        n = sum(doc["rows"].values())
        state = "intact" if doc["after"]["ok"] else f"NOT intact (first bad row {doc['after']['first_bad_seq']})"
        click.echo(f"copied {n} rows of {len(doc['rows'])} tables from {doc['from']} to {doc['to']}; access log "
                   f"{doc['after']['rows']} rows, {state}")
    if not doc["after"]["ok"] and not doc["accepted_broken_chain"]:
        sys.exit(1)
