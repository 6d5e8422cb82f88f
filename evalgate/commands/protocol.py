"""``evalgate protocol``: freeze, verify, show and diff protocol files; print the protocol file reference."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.core.errors import ProtocolDrift


@click.group()
def protocol() -> None:
    """Freeze, verify, show and diff protocol files; print the protocol file reference."""


@protocol.command("freeze")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the lock document as JSON.")
@handle_errors
def protocol_freeze(path: Path, as_json: bool) -> None:
    """Hash PATH and write PATH.lock; refuse changed content under a version already used."""
    lock = workspace().freeze(path)
    if as_json:
        _dump(lock.as_dict())
    else:
        click.echo(f"froze {lock.name}@{lock.version} sha256 {lock.sha256} -> {path}.lock")


@protocol.command("verify")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="Print the result as JSON: ok, ref and sha256, or on drift the changed fields.")
@handle_errors
def protocol_verify(path: Path, as_json: bool) -> None:
    """Exit 1 with a field-level diff if PATH no longer matches its lock; exit 2 for what 'freeze' and 'run' would
    refuse (no or an edited lock, name@version recorded in the store with other content)."""
    try:
        lp = workspace().verify(path)
    except ProtocolDrift as e:
        click.echo(e.message, err=True)
        if as_json:  # the error document every --json command prints, with the drift's fields
            _dump({"ok": False, "path": str(path), "error": e.message, "exit_code": 1,
                   "diff": [{"field": f, "locked": locked, "now": now} for f, locked, now in e.diff]})
        sys.exit(1)
    if as_json:
        _dump({"ok": True, "path": str(path), "ref": lp.ref, "sha256": lp.sha256})
    else:
        click.echo(f"ok: {lp.ref} matches its lock and the store's record (sha256 {lp.sha256})")


@protocol.command("show")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the resolved protocol and hash as JSON.")
@handle_errors
def protocol_show(path: Path, as_json: bool) -> None:
    """Print the resolved protocol (templates inlined) and its hash."""
    from evalgate.protocol.spec import load_protocol, read_lock

    lp = load_protocol(path)
    lock = read_lock(lp)
    doc = {"ref": lp.ref, "sha256": lp.sha256, "locked": bool(lock and lock["sha256"] == lp.sha256),
           "resolved": lp.resolved}
    if as_json:
        _dump(doc)
    else:
        import yaml

        click.echo(f"# {lp.ref} sha256 {lp.sha256} ({'locked' if doc['locked'] else 'NOT matching a lock'})")
        click.echo(yaml.safe_dump(lp.resolved, sort_keys=False, allow_unicode=True))


@protocol.command("diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def protocol_diff(a: Path, b: Path, as_json: bool) -> None:
    """Show the fields that differ between two protocol files; exit 0 when their content is identical, 1 when it
    differs (as diff(1) does), 2 when a file is not a valid protocol."""
    from evalgate.protocol.spec import diff_resolved, format_diff, load_protocol

    pa, pb = load_protocol(a), load_protocol(b)
    rows = diff_resolved(pa.resolved, pb.resolved)
    if as_json:
        _dump({"a": {"ref": pa.ref, "sha256": pa.sha256}, "b": {"ref": pb.ref, "sha256": pb.sha256},
               "diff": [{"field": f, "a": x, "b": y} for f, x, y in rows]})
    elif not rows:
        click.echo(f"identical content ({pa.sha256})")
    else:
        click.echo(f"{len(rows)} field(s) differ between {pa.ref} and {pb.ref}:")
        click.echo(format_diff(rows, "a", "b"))
    if rows:
        sys.exit(1)


@protocol.command("docs")
@click.option("--scorers", is_flag=True, help="Print the scorer options reference (docs/SCORERS.md) instead.")
@click.option("--gate", is_flag=True, help="Print the gate policy reference (docs/GATE.md) instead.")
@handle_errors
def protocol_docs(scorers: bool, gate: bool) -> None:
    """Print the protocol file reference (Markdown, docs/PROTOCOL.md), generated from the protocol models."""
    from evalgate.gate.docs import gate_reference
    from evalgate.protocol.docs import protocol_reference, scorers_reference

    click.echo(gate_reference() if gate else scorers_reference() if scorers else protocol_reference(), nl=False)
