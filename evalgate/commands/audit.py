"""``evalgate audit``: who read which split; the access log's rows, its hash chain and signed head."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING

import click

from evalgate.commands import audit_web, handle_errors, workspace
from evalgate.commands import dump as _dump
from evalgate.commands.options import expect_head_option, parse_expect_head
from evalgate.core.enums import Tier

if TYPE_CHECKING:
    from evalgate.views.audit import AuditSummary


def _since(since: str | None) -> datetime | None:
    from evalgate.core.errors import BadInput

    try:
        return datetime.fromisoformat(since).astimezone() if since else None
    except ValueError as e:
        raise BadInput(f"--since {since!r} is not an ISO date (e.g. 2026-11-01)") from e


@click.group("audit", invoke_without_command=True)
@click.option("--split", default=None)
@click.option("--tier", default=None, type=click.Choice([t.value for t in Tier]))
@click.option("--since", default=None, help="ISO date, e.g. 2026-11-01.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def audit_cmd(ctx: click.Context, split: str | None, tier: str | None, since: str | None, as_json: bool) -> None:
    """Who read which split, how often and for what; 'audit verify' checks the log's hash chain."""
    if ctx.invoked_subcommand:
        return

    doc = workspace().audit(split, _since(since), tier)
    if as_json:
        _dump(doc.as_dict())
    else:
        _print_audit(doc)
    for message in doc.broken_manifests:  # shown after the others, then exit 2 as 'splits list' does
        click.echo(f"error: {message}", err=True)
    if doc.broken_manifests:
        sys.exit(2)


def _print_audit(doc: AuditSummary) -> None:
    click.echo(f"{'split':20s} {'tier':11s} {'reads':>5s} {'cached':>6s} {'override':>8s} {'refused':>7s}  "
               "budget used/max (left)")
    for name, a in doc.splits.items():
        b = a.budget
        budget = (("-" if a.manifest else "? (no manifest)") if not b
                  else f"unknown: {b.unknown} (max {b.max_reads} per {b.window_days}d)" if b.unknown
                  else f"{b.used}/{b.max_reads} per {b.window_days}d ({b.left} left)")
        click.echo(f"{name:20s} {a.tier or '?':11s} {a.reads:5d} {a.cached_reads:6d} {a.overrides:8d} "
                   f"{a.refusals:7d}  {budget}")
        for label, counts in (("by actor", a.by_actor), ("by purpose", a.by_purpose), ("by day", a.by_day),
                              ("refused", a.refusals_by_actor)):
            if counts:
                click.echo(f"    {label + ':':12s} " + ", ".join(f"{k} {n}" for k, n in counts.items()))
        if a.ci_reads:
            click.echo(f"    {'in CI:':12s} {a.ci_reads} of the reads")
        if a.same_content_as:
            click.echo(f"    same content as split {a.same_content_as}: its reads, budget and rows are that "
                       "split's")
        elif len(a.content_names or ()) > 1:
            click.echo(f"    {'also named:':12s} {', '.join((a.content_names or [])[1:])} (same content; reads "
                       "counted here)")
        if a.contamination_budget:
            cb = a.contamination_budget
            click.echo(f"    {'contam.:':12s} {cb.used}/{cb.max_checks} contamination checks per "
                       f"{cb.window_days}d ({cb.left} left)")
        if len(a.tiers_seen) > 1:
            click.echo(f"    WARNING: logged under tiers {', '.join(a.tiers_seen)} (its manifest was changed)")
    unknown = [name for name, a in doc.splits.items() if not a.manifest]
    if unknown:
        click.echo(f"budget of {', '.join(unknown)} unknown: no manifest in {doc.splits_dir} (EVALGATE_SPLITS, "
                   "default ./splits); run from the project directory or set EVALGATE_SPLITS")
    c = doc.chain
    click.echo(f"access log: {c.rows} rows, chain "
               + (f"intact, head signed (head {c.head.seq}:{c.head.hash})" if c.ok
                  else f"BROKEN at row {c.first_bad_seq}: {c.reason}" if c.first_bad_seq
                  else f"NOT VERIFIED: signed head: {c.signature.reason}"))


@audit_cmd.command("log")
@click.option("--split", default=None, help="Only rows of this split.")
@click.option("--since", default=None, help="Only rows from this ISO date or time on, e.g. 2026-11-01.")
@click.option("--refused", is_flag=True, help="Only refused attempts.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the last N rows.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_log(split: str | None, since: str | None, refused: bool, limit: int | None, as_json: bool) -> None:
    """List access-log rows, oldest first: who, when, split, purpose, outcome, run and why (for refusals)."""
    from evalgate.views.audit import log_rows

    rows = log_rows(workspace().store, split, _since(since), refused)[-limit if limit else None:]
    if as_json:
        _dump(rows)
        return
    if not rows:
        click.echo("no access-log rows" + (" matching the filters" if split or since or refused else ""))
        return
    for r in rows:
        run = f"run {r['run_id']}" if r["run_id"] else ""
        extra = f"  ({r['detail'][:160]})" if r["detail"] and r["outcome"] in ("refused", "override") else ""
        where = f"{r['split']} ({r['tier']})"
        click.echo(f"{r['seq']:>5} {r['ts']}  {r['actor']:<12} {where:<24} {r['purpose']:<20} "
                   f"{r['outcome']}{' cached' if r['cached'] else ''}{' ci' if r['ci'] else ''}  {run}".rstrip()
                   + extra)


@audit_cmd.command("verify")
@expect_head_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_verify(expect_head: str | None, as_json: bool) -> None:
    """Exit 1 and name the first bad row if the access log was edited, inserted into, truncated or re-hashed (its
    newest signed head no longer verifies with the signing key); exit 2 when no signing key is found to check it."""
    from evalgate.views.audit import verify_chain

    ws = workspace()
    res = verify_chain(ws.store, parse_expect_head(expect_head))
    sig = res["signature"]
    if as_json:
        _dump(res)
    elif res["ok"]:
        from evalgate.keys.signing import log_key_file

        where = "$EVALGATE_LOG_KEY" if ws.env.log_key else str(log_key_file(ws.env))
        click.echo(f"ok: access log chain intact ({res['rows']} rows), head signed (key "
                   f"{(sig['public_key'] or '-')[:16]} from {where}); head {res['head']['seq']}:{res['head']['hash']}")
    elif res["first_bad_seq"]:
        click.echo(f"BROKEN: first bad row seq {res['first_bad_seq']}: {res['reason']}", err=True)
    else:
        click.echo(f"{'BROKEN' if sig['checked'] else 'NOT VERIFIED'}: signed head: {sig['reason']}", err=True)
    sys.exit(0 if res["ok"] else 1 if res["first_bad_seq"] or sig["checked"] else 2)


@audit_cmd.command("sign")
@expect_head_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_sign(expect_head: str | None, as_json: bool) -> None:
    """Sign the head of an intact log that has no valid signed head (a store from before signed heads): this vouches
    for the log as it is now, so check it against a head pinned earlier first. Never for a log that lost its
    signature: that one was tampered with."""
    from evalgate.access.log import sign_head

    res = sign_head(workspace().store, parse_expect_head(expect_head))
    if as_json:
        _dump(res)
    else:
        click.echo(f"signed: head {res['head']['seq']}:{res['head']['hash']} ({res['rows']} rows) with key "
                   f"{(res['signature']['public_key'] or '')[:16]}")
    sys.exit(0 if res["ok"] else 1)


# the rating and reward-audit subcommands live beside the web app's commands (audit_web.py)
audit_cmd.add_command(audit_web.add_rater_cmd)
audit_cmd.add_command(audit_web.batch_cmd)
audit_cmd.add_command(audit_web.reward_cmd)
