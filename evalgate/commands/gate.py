"""``evalgate gate``: decide PASS or FAIL for a gate policy and write the reports (``evalgate.gate.report.outputs``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.commands.options import actor_option, expect_head_option, parse_expect_head
from evalgate.core.formatting import num
from evalgate.gate.report.writers import WRITERS, key_of, outputs_from, report_options
from evalgate.trackers.cli import say_written, tracker_options


@click.command("gate")
@click.option("--policy", "policy_path", required=True, type=click.Path(path_type=Path))
@report_options
@actor_option()
@click.option("--evaluate-missing", "missing", default=None, metavar="GLOB",
              help="First evaluate, on the selection split, the checkpoints matching GLOB that have no complete run "
                   "there (evalgate sweep, locally).")
@click.option("--accept-broken-chain", "accept_broken", default=None, metavar="REASON",
              help="Gate although the access log's hash chain is broken (refused otherwise, exit 2); the reason is "
                   "logged and shown in every report.")
@click.option("--train-run", "train_run", default=None, metavar="NAME",
              help="Gate this training run's checkpoints only (sets the policy's train_run); candidates of several "
                   "runs with no train_run are refused, exit 2.")
@expect_head_option("SEQ:HASH the access log must hold (pinned by the last run; default $EVALGATE_EXPECT_HEAD): "
                    "refused (exit 2) before any read when it does not.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
@tracker_options
def gate_cmd(policy_path: Path, actor: str | None, missing: str | None, accept_broken: str | None,
             train_run: str | None, expect_head: str | None, as_json: bool, trackers: list[Any],
             **outputs: Path | None) -> None:
    """Decide PASS (exit 0) or FAIL (exit 1) for a gate policy, and write the reports (exit 2: bad policy or
    refused; 1 also on protocol drift). The JSON and JUnit carry a machine-readable reason: pass, fail, drift,
    refused, invalid or error. A suite policy (members:, docs/GATING.md "Suite gates") passes only when every
    member passes: one report, one JUnit test case per member, the failing member(s) named on the ship line."""
    from evalgate.gate.report.outputs import clear_outputs, error_document, write_error_outputs

    ws, files = workspace(actor), outputs_from(outputs)
    clear_outputs(files)  # no earlier gate's report stays at these paths, even if this one is killed
    try:
        try:
            swept = ws.evaluate_missing(policy_path, missing, progress=not as_json) if missing else None
        except BaseException as e:  # the gate never ran: its reports say why, as a gate's own errors do
            write_error_outputs(error_document(policy_path, policy_path.stem, e), files)
            raise
        for why in swept.ignored if swept else ():  # e.g. a seed's checkpoint whose weights duplicate another's
            click.echo(f"--evaluate-missing: not evaluated: {why}", err=True)
        report = ws.gate_and_report(policy_path, files, accept_broken_chain=accept_broken,
                                    expect_head=parse_expect_head(expect_head), progress=not as_json, swept=swept,
                                    train_run=train_run)
    except Exception as e:
        if ws.env.debug:
            raise
        err = error_document(policy_path, policy_path.stem, e)
        if as_json:
            _dump(err)
        else:
            click.echo(f"{'error' if err['exit_code'] != 3 else 'internal error'}: {err['error']}", err=True)
            click.echo(f"ship: none ({err['reason']}: no verdict)")
        sys.exit(err["exit_code"])
    doc = report.as_dict()
    suite = "members" in doc
    if trackers:
        from evalgate.trackers import export_gate

        # a suite: one summary per member (its verdict and rules, at the suite's shipped checkpoint; no per-seed
        # private value, docs/TRACKERS.md)
        for member_doc in ([{**m["gate"], "ship": doc["ship"]} for m in doc["members"]] if suite else [doc]):
            say_written(export_gate(member_doc, trackers, store=ws.store, actor=actor))
    if as_json:
        _dump(doc)
    elif suite:
        _print_suite(doc)
    else:
        _print_gate(report.verdict, doc)
    sys.exit(0 if report.passed else 1)


def _print_suite(doc: dict[str, Any]) -> None:
    """A suite's text output: verdict and which member decided, one line per member (CI, threshold, outcome), each
    seed's shipped checkpoint, files, and the ship line naming the failing member(s)."""
    click.echo(f"{doc['verdict']}: suite {doc['suite']} ({len(doc['members'])} members; decided by "
               f"{doc['decided_by']})")
    for r in doc["table"]:
        ci = (f"{num(r['diff'])} [{num(r['ci'][0])}, {num(r['ci'][1])}]" if r["ci"] else "n/a")
        seeds = ", ".join(f"seed {k}: {num(v)}" for k, v in r["seeds"].items())
        mark = "pass" if r["passed"] else "FAIL" if r["failed_rules"] else "not read"
        click.echo(f"  [{mark}] {r['member']} ({r['role']}, {r['metric']}): "
                   f"candidate - baseline {ci}, lower end needs >= {r['threshold']:+g}"
                   + (f"; {seeds}" if seeds else "")
                   + (f"; failed: {', '.join(r['failed_rules'])}" if r["failed_rules"] else ""))
    if doc["holm"]:
        click.echo(f"  at least one target improved (Holm): {'yes' if doc['any_target_improved'] else 'no'}")
    why = next((m["gate"]["decision_not_read"] for m in doc["members"] if m["gate"].get("decision_not_read")), None)
    if why:
        click.echo(f"  {why}")
    for p in doc["picks"]:
        click.echo(f"  seed {p['train_seed']}: ships step {p['step']} {p['checkpoint']}" if p["checkpoint"] else
                   f"  seed {p['train_seed']}: no checkpoint qualified ({len(p['rejected'])} rejected)")
    for m in doc["members"]:
        click.echo(f"  member {m['member']}: stored as {m['gate']['gate_id']}")
    click.echo(f"  suite stored as {doc['gate_id']} (evalgate report {doc['gate_id']} renders it again)")
    _print_outputs(doc)
    from evalgate.gate.results import ship_line

    click.echo(ship_line(doc["ship"]))


def _print_gate(verdict: Any, doc: dict[str, Any]) -> None:
    """The gate's text output: verdict, rules, per seed best / last / failed with paths, set-aside runs, files,
    and a final line naming the checkpoint to ship (or why none)."""
    click.echo(f"{doc['verdict']}: gate {doc['gate']} ({doc['protocol']}, selection on {doc['selection_split']}, "
               f"decision on {doc['decision_split']}; stored as {doc['gate_id']})")
    if doc["reused_from"]:
        r = doc["reused_from"]
        click.echo(f"  reused decision of gate {r['gate_id']} from {r['created_at']}: inputs unchanged, nothing read")
    if doc.get("broken_chain"):
        b = doc["broken_chain"]
        click.echo(f"  WARNING: access log chain BROKEN at row {b['first_bad_seq']} ({b['reason']}); gated anyway: "
                   f"{b['accepted_because']}")
    if doc.get("rereads"):
        click.echo(f"  {len(doc['rereads'])} decision read(s) showed stored results again: logged, not charged")
    for r in verdict.rules:
        click.echo(f"  [{r.label}] {r.rule}: {r.detail}")
    if doc.get("decision_not_read"):
        click.echo(f"  decision split not read: {doc['decision_not_read']}")
    if doc.get("decision_split_size"):
        click.echo(f"  {doc['decision_split_size']['detail']}")
    for s in doc["seeds"]:
        click.echo(f"  seed {s['train_seed']} ({s['train_run']}):")
        for label, c in (("best", s["best"]), ("last", s["last"])):
            if c is None:
                click.echo(f"    {label}: none (every checkpoint failed)")
            else:
                click.echo(f"    {label}: step {c['step']} {doc['metric']} {num(c['value'])}  {c['path']}")
        for c in s["failed"]:
            click.echo(f"    failed: step {c['step']}  {c['path']}: {'; '.join(c['failed_reasons'])}")
    for key in ("stale", "ignored", "failures"):
        for a in doc[key]:
            click.echo(f"  {key}: run {a['run_id']} ({a['checkpoint_path']}): {a['reason']}")
    _print_outputs(doc)
    from evalgate.gate.results import ship_line

    click.echo(ship_line(doc["ship"]))


def _print_outputs(doc: dict[str, Any]) -> None:
    """One ``key: path`` line per report written (``report``, ``json_out``, ``junit``, ``markdown``, a plugin's)."""
    for k in (key_of(name) for name in WRITERS.names()):
        if doc.get(k):
            click.echo(f"{k}: {doc[k]}")
