"""The ``evalgate`` command line: each command parses flags, calls one library function and prints.

Exit codes (DESIGN.md): 0 success / gate PASS; 1 gate FAIL or protocol drift; 2 bad input or refused by policy;
3 internal or engine error. ``--json`` prints one JSON document on stdout; progress and logs go to stderr.
User errors print one line without a traceback; ``EVALGATE_DEBUG=1`` re-raises them.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from evalgate.errors import EvalgateError, ProtocolDrift


def _dump(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, default=str))


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn EvalgateError into ``error: message`` on stderr and its exit code; anything else exits 3."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EvalgateError as e:
            if os.environ.get("EVALGATE_DEBUG") == "1":
                raise
            click.echo(f"error: {e.message}", err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Exit:
            raise
        except Exception as e:  # noqa: BLE001 - the documented exit code for internal errors
            if os.environ.get("EVALGATE_DEBUG") == "1":
                raise
            click.echo(f"internal error: {type(e).__name__}: {e} (set EVALGATE_DEBUG=1 for the traceback)", err=True)
            sys.exit(3)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="evalgate")
def main() -> None:
    """evalgate: frozen evaluation protocols, audited split tiers and release gates for LLM checkpoints."""


# -- protocol ----------------------------------------------------------------------------------------------------
@main.group()
def protocol() -> None:
    """Freeze, verify, show and diff protocol files."""


@protocol.command("freeze")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the lock document as JSON.")
@handle_errors
def protocol_freeze(path: Path, as_json: bool) -> None:
    """Hash PATH and write PATH.lock; refuse changed content under a version already used."""
    from evalgate.protocols_ops import freeze

    doc = freeze(path)
    if as_json:
        _dump(doc)
    else:
        click.echo(f"froze {doc['name']}@{doc['version']} sha256 {doc['sha256']} -> {path}.lock")


@protocol.command("verify")
@click.argument("path", type=click.Path(path_type=Path))
@handle_errors
def protocol_verify(path: Path) -> None:
    """Exit 1 with a field-level diff if PATH no longer matches its lock."""
    from evalgate.protocol import load_protocol, verify

    lp = load_protocol(path)
    try:
        verify(lp)
    except ProtocolDrift as e:
        click.echo(e.message, err=True)
        sys.exit(1)
    click.echo(f"ok: {lp.ref} matches its lock (sha256 {lp.sha256})")


@protocol.command("show")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the resolved protocol and hash as JSON.")
@handle_errors
def protocol_show(path: Path, as_json: bool) -> None:
    """Print the resolved protocol (templates inlined) and its hash."""
    from evalgate.protocol import load_protocol, read_lock

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
    """Show the fields that differ between two protocol files (exit 0 either way)."""
    from evalgate.protocol import diff_resolved, format_diff, load_protocol

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


# -- splits ------------------------------------------------------------------------------------------------------
@main.group()
def splits() -> None:
    """Import, add and list splits."""


@splits.command("import")
@click.argument("dataset", type=click.Choice(["humaneval"]))
@click.option("--from", "source", type=click.Path(path_type=Path), help="Data file (default: the installed wheel).")
@handle_errors
def splits_import(dataset: str, source: Path | None) -> None:
    """Import a dataset as tiered splits (smoke/dev/public/private)."""
    from evalgate.splits import import_humaneval, load_manifest

    paths = import_humaneval(source)
    for p in paths:
        m = load_manifest(p.stem, p.parent)
        click.echo(f"{m.name:24s} tier {m.tier:8s} {m.count:4d} items  {p}{'  (encrypted)' if m.encrypted else ''}")


@splits.command("add")
@click.argument("name")
@click.option("--tier", required=True, type=click.Choice(["smoke", "dev", "public", "private", "human-audit"]))
@click.option("--file", "file", required=True, type=click.Path(path_type=Path), help="JSONL with an 'id' per line.")
@click.option("--source", default=None, help="Provenance: where the data came from.")
@handle_errors
def splits_add(name: str, tier: str, file: Path, source: str | None) -> None:
    """Add a split from a JSONL file."""
    from evalgate.errors import BadInput
    from evalgate.splits import parse_jsonl, write_split

    if not file.is_file():
        raise BadInput(f"{file} not found; pass a JSONL file with --file")
    items = parse_jsonl(file.read_bytes(), str(file))
    p = write_split(name, tier, items, {"source": source or str(file)})
    click.echo(f"added split {name} (tier {tier}, {len(items)} items) -> {p}")


@splits.command("list")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_list(as_json: bool) -> None:
    """List splits with tier, item count and data hash."""
    from evalgate.splits import list_manifests

    ms = list_manifests()
    if as_json:
        _dump([m.model_dump(mode="json") for m in ms])
        return
    for m in ms:
        click.echo(f"{m.name:24s} {m.tier:11s} {m.count:5d} items  sha256 {m.content_sha256[:12]}"
                   f"{'  encrypted' if m.encrypted else ''}")


# -- run ---------------------------------------------------------------------------------------------------------
@main.command("run")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@click.option("--backend", default="hf", show_default=True)
@click.option("--seed", type=int, default=None, help="Sampling seed (default: the protocol's).")
@click.option("--train-run", default=None)
@click.option("--train-seed", type=int, default=None)
@click.option("--step", type=int, default=None)
@click.option("--purpose", default="evaluation", show_default=True)
@click.option("--actor", default=None)
@click.option("--override-reason", default=None, help="Exceed a soft read budget, with this logged reason.")
@click.option("--device", default="cpu", show_default=True, help="hf backend: cpu, cuda, cuda:N.")
@click.option("--backend-option", "backend_option", multiple=True, metavar="KEY=VALUE",
              help="Backend option, repeatable (e.g. base_url=http://127.0.0.1:8000/v1, tensor_parallel_size=2).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def run_cmd(protocol_path: Path, checkpoint: Path, split: str, backend: str, seed: int | None,
            train_run: str | None, train_seed: int | None, step: int | None, purpose: str, actor: str | None,
            override_reason: str | None, device: str, backend_option: tuple[str, ...], as_json: bool) -> None:
    """Evaluate a checkpoint on a split under a frozen protocol."""
    from evalgate.backends.base import parse_backend_options
    from evalgate.errors import BadInput
    from evalgate.run import RunOptions, evaluate
    from evalgate.splits import RELEASE_GATE

    if purpose == RELEASE_GATE:
        raise BadInput(f"purpose {RELEASE_GATE!r} is reserved for 'evalgate gate'; private splits are read there")
    opts = RunOptions(backend=backend, seed=seed, train_run=train_run, train_seed=train_seed, step=step,
                      purpose=purpose, actor=actor, override_reason=override_reason,
                      backend_options={**({"device": device} if backend == "hf" else {}),
                                       **parse_backend_options(backend_option)}, progress=not as_json)
    doc = evaluate(protocol_path, checkpoint, split, opts)
    if as_json:
        _dump(doc)
        return
    m = doc["metrics"]
    ks = [k for k in m if k.startswith("pass@") and not k.endswith("_stderr")]
    click.echo(f"run {doc['run_id']}: {doc['protocol']['name']}@{doc['protocol']['version']} on "
               f"{doc['split']['name']} ({doc['split']['tier']}), {doc['counts']['samples']} samples "
               f"({doc['counts']['cached']} cached) in {doc['wall_s']:.1f} s")
    for k in ks:
        click.echo(f"  {k} = {m[k]:.4f} ± {m[k + '_stderr']:.4f} (stderr)")
    click.echo(f"  mean completion tokens {m['mean_completion_tokens']:.1f}, truncation rate {m['truncation_rate']:.3f}")


# -- parity ------------------------------------------------------------------------------------------------------
@main.command("parity")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@click.option("--a", "backend_a", default="hf", show_default=True, help="First backend.")
@click.option("--b", "backend_b", default="openai", show_default=True, help="Second backend.")
@click.option("--a-option", multiple=True, metavar="KEY=VALUE", help="Option of backend a, repeatable.")
@click.option("--b-option", multiple=True, metavar="KEY=VALUE", help="Option of backend b, repeatable.")
@click.option("--seed", type=int, default=None, help="Sampling seed (default: the protocol's).")
@click.option("--limit", type=int, default=None, help="Compare only the first N items.")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def parity_cmd(protocol_path: Path, checkpoint: Path, split: str, backend_a: str, backend_b: str,
               a_option: tuple[str, ...], b_option: tuple[str, ...], seed: int | None, limit: int | None,
               actor: str | None, as_json: bool) -> None:
    """Generate with two backends and report drift; exit 0 if every sample is identical, 1 otherwise."""
    from evalgate.backends.base import parse_backend_options
    from evalgate.parity import parity

    doc = parity(protocol_path, checkpoint, split, backend_a, backend_b, parse_backend_options(a_option),
                 parse_backend_options(b_option), seed, limit, actor)
    if as_json:
        _dump(doc)
    else:
        click.echo(f"{backend_a} vs {backend_b} on {split}: {doc['identical']}/{doc['samples']} samples identical "
                   f"({doc['text_mismatches']} text, {doc['finish_reason_mismatches']} finish_reason, "
                   f"{doc['token_count_mismatches']} token-count mismatches)")
        for row in doc["drift"][:10]:
            click.echo(f"  {row['item_id']}#{row['sample_index']}: diverge at char {row['diverge_at']}: "
                       f"{row['a_text'][:60]!r} vs {row['b_text'][:60]!r}")
    sys.exit(0 if doc["identical"] == doc["samples"] else 1)


# -- gate --------------------------------------------------------------------------------------------------------
@main.command("gate")
@click.option("--policy", "policy_path", required=True, type=click.Path(path_type=Path))
@click.option("--report", type=click.Path(path_type=Path), default=None, help="Write the HTML report here.")
@click.option("--junit", type=click.Path(path_type=Path), default=None, help="Write JUnit XML here.")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def gate_cmd(policy_path: Path, report: Path | None, junit: Path | None, actor: str | None, as_json: bool) -> None:
    """Decide PASS (exit 0) or FAIL (exit 1) for a gate policy, and write the reports."""
    from evalgate.audit import audit_summary
    from evalgate.gate import load_policy, run_gate
    from evalgate.report import write_html, write_junit
    from evalgate.store import Store

    store = Store()
    verdict = run_gate(load_policy(policy_path), store, actor)
    doc = verdict.as_dict()
    if report:
        write_html(verdict, report, audit_summary(store, verdict.policy.split))
        doc["report"] = str(report)
    if junit:
        write_junit(verdict, junit)
        doc["junit"] = str(junit)
    if as_json:
        _dump(doc)
    else:
        click.echo(f"{doc['verdict']}: gate {doc['gate']} ({doc['protocol']} on {doc['split']})")
        for r in verdict.rules:
            click.echo(f"  [{'pass' if r.passed else 'FAIL'}] {r.rule}: {r.detail}")
        if report:
            click.echo(f"report: {report}")
    sys.exit(0 if verdict.passed else 1)


# -- audit -------------------------------------------------------------------------------------------------------
@main.group("audit", invoke_without_command=True)
@click.option("--split", default=None)
@click.option("--since", default=None, help="ISO date, e.g. 2026-11-01.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def audit_cmd(ctx: click.Context, split: str | None, since: str | None, as_json: bool) -> None:
    """Who read which split, how often and for what; 'audit verify' checks the log's hash chain."""
    if ctx.invoked_subcommand:
        return
    from evalgate.audit import audit_summary
    from evalgate.errors import BadInput
    from evalgate.store import Store

    try:
        since_dt = datetime.fromisoformat(since).astimezone() if since else None
    except ValueError as e:
        raise BadInput(f"--since {since!r} is not an ISO date (e.g. 2026-11-01)") from e
    doc = audit_summary(Store(), split, since_dt)
    if as_json:
        _dump(doc)
        return
    click.echo(f"{'split':24s} {'tier':11s} {'reads':>5s} {'cached':>6s} {'refused':>7s}  budget        purposes")
    for name, a in doc["splits"].items():
        b = a.get("budget")
        budget = f"{b['used']}/{b['max_reads']} per {b['window_days']}d" if b else "-"
        purposes = ", ".join(f"{p}:{n}" for p, n in a["by_purpose"].items())
        click.echo(f"{name:24s} {a['tier'] or '?':11s} {a['reads']:5d} {a['cached_reads']:6d} {a['refusals']:7d}  "
                   f"{budget:13s} {purposes}")
    c = doc["chain"]
    click.echo(f"access log: {c['rows']} rows, chain {'intact' if c['ok'] else 'BROKEN at row ' + str(c['first_bad_seq'])}")


@audit_cmd.command("verify")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_verify(as_json: bool) -> None:
    """Exit 1 and name the first bad row if the access log was edited, inserted into or truncated."""
    from evalgate.audit import verify_chain
    from evalgate.store import Store

    res = verify_chain(Store())
    if as_json:
        _dump(res)
    elif res["ok"]:
        click.echo(f"ok: access log chain intact ({res['rows']} rows)")
    else:
        click.echo(f"BROKEN: first bad row seq {res['first_bad_seq']}: {res['reason']}", err=True)
    sys.exit(0 if res["ok"] else 1)


if __name__ == "__main__":
    main()
