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


@store_cmd.command("grant-roles")
@click.option("--auditor", "auditors", multiple=True, metavar="LOGIN",
              help="A login role to make a member of evalgate_auditor (reads everything, changes nothing); repeat.")
@click.option("--evaluator", "evaluators", multiple=True, metavar="LOGIN",
              help="A login role to make a member of evalgate_evaluator (runs, caches, appends reads); repeat.")
@click.option("--gate", "gates", multiple=True, metavar="LOGIN",
              help="A login role to make a member of evalgate_gate (an evaluator that also logs release-gate reads); "
                   "repeat.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def grant_roles_cmd(auditors: tuple[str, ...], evaluators: tuple[str, ...], gates: tuple[str, ...],
                    as_json: bool) -> None:
    """Create (or bring up to date) the roles of the PostgreSQL store in EVALGATE_STORE: evalgate_auditor,
    evalgate_evaluator and evalgate_gate, with their rights on the store's tables, and make existing login roles
    members of them.

    Run as the tables' owner (the administrator who applied the migrations), again after an upgrade adds a table.
    The password comes from libpq (PGPASSWORD, ~/.pgpass, PGSERVICE) and is never printed. What each role may do:
    docs/SECURITY.md. Exit 2: not a server store, the server cannot be reached, a login role does not exist, or
    this role may not grant (nothing changed).
    """
    from evalgate.core.errors import BadInput
    from evalgate.store.pg import grant_roles

    url = workspace().env.store
    if not url:
        raise BadInput("evalgate store grant-roles sets up the roles of a PostgreSQL store: set EVALGATE_STORE="
                       "postgresql://owner@host/dbname (the tables' owner); a store file has no roles (whoever can "
                       "write the file can rewrite it: docs/SECURITY.md)")
    doc = grant_roles(url, {k: v for k, v in (("auditor", auditors), ("evaluator", evaluators), ("gate", gates))
                            if v})
    if as_json:
        dump(doc)
        return
    made = f"created {', '.join(doc['created'])}" if doc["created"] else "roles already there"
    click.echo(f"{doc['server']} (schema {doc['schema']}): {made}; rights granted")
    for role, logins in doc["members"].items():
        click.echo(f"  {role}: {', '.join(logins) if logins else '(no login roles yet)'}")
