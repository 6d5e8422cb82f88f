"""The ``evalgate`` command line: each command parses flags, calls one library function and prints.

Exit codes (DESIGN.md): 0 success / gate PASS; 1 gate FAIL or protocol drift; 2 bad input or refused by policy;
3 internal or engine error; 130 on Ctrl-C; 141 when the reader closed stdout early (``| head``), quietly.
``--json`` prints one JSON document on stdout; progress and logs go to stderr (and ``--json`` turns every progress
bar off).
User errors print one line without a traceback; ``EVALGATE_DEBUG=1`` re-raises them.
"""

from __future__ import annotations

import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors
from evalgate.commands.report import report_cmd
from evalgate.errors import ProtocolDrift

# a file written (or read whole): a directory there is refused while the flags are parsed, before any work
OUT_FILE = click.Path(path_type=Path, dir_okay=False)


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
        from evalgate.version import DISTRIBUTION, installed_version

        click.echo(f"evalgate ({DISTRIBUTION}), version {installed_version() or 'unknown (not installed)'}")
        ctx.exit()


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and exit.")
def main() -> None:
    """evalgate: frozen evaluation protocols, audited split tiers and release gates for LLM checkpoints."""


# -- protocol ----------------------------------------------------------------------------------------------------
@main.group()
def protocol() -> None:
    """Freeze, verify, show and diff protocol files; print the protocol file reference."""


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
    """Exit 1 with a field-level diff if PATH no longer matches its lock; exit 2 for what 'freeze' and 'run' would
    refuse (no or an edited lock, name@version recorded in the store with other content)."""
    from evalgate.protocols_ops import verify_frozen

    try:
        lp = verify_frozen(path)
    except ProtocolDrift as e:
        click.echo(e.message, err=True)
        sys.exit(1)
    click.echo(f"ok: {lp.ref} matches its lock and the store's record (sha256 {lp.sha256})")


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
    """Show the fields that differ between two protocol files; exit 0 when their content is identical, 1 when it
    differs (as diff(1) does), 2 when a file is not a valid protocol."""
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
    if rows:
        sys.exit(1)


@protocol.command("docs")
@click.option("--scorers", is_flag=True, help="Print the scorer options reference (docs/SCORERS.md) instead.")
@click.option("--gate", is_flag=True, help="Print the gate policy reference (docs/GATE.md) instead.")
@handle_errors
def protocol_docs(scorers: bool, gate: bool) -> None:
    """Print the protocol file reference (Markdown, docs/PROTOCOL.md), generated from the protocol models."""
    from evalgate.protocol_docs import gate_reference, protocol_reference, scorers_reference

    click.echo(gate_reference() if gate else scorers_reference() if scorers else protocol_reference(), nl=False)


# -- splits ------------------------------------------------------------------------------------------------------
@main.group()
def splits() -> None:
    """Import, add and list splits."""


@splits.command("import")
@click.argument("dataset")
@click.option("--from", "source", type=click.Path(path_type=Path),
              help="Data file (humaneval default: the installed wheel; gsm8k, math500: required).")
@handle_errors
def splits_import(dataset: str, source: Path | None) -> None:
    """Import a benchmark (humaneval, gsm8k, math500, ...: evalgate/datasets/) as tiered splits
    (smoke/dev/public/private)."""
    from evalgate.datasets import import_dataset
    from evalgate.splits import load_manifest

    paths = import_dataset(dataset, source)
    for p in paths:
        m = load_manifest(p.stem, p.parent)
        click.echo(f"{m.name:24s} tier {m.tier:8s} {m.count:4d} items  {p}{'  (encrypted)' if m.encrypted else ''}")


@splits.command("add")
@click.argument("name")
@click.option("--tier", required=True, type=click.Choice(["smoke", "dev", "public", "private", "human-audit"]))
@click.option("--file", "file", required=True, type=click.Path(path_type=Path), help="JSONL with an 'id' per line.")
@click.option("--source", default=None, help="Provenance: where the data came from.")
@click.option("--purpose", "purposes", multiple=True, help="Policy: allow only these purposes (repeatable).")
@click.option("--max-reads", type=int, default=None, help="Policy: reads allowed per window.")
@click.option("--window-days", type=int, default=None, help="Policy: budget window, days.")
@click.option("--hard", is_flag=True, default=None, help="Policy: a hard budget (no override).")
@click.option("--replace", is_flag=True, help="Replace an existing split's data (same tier only; logged).")
@click.option("--actor", default=None)
@handle_errors
def splits_add(name: str, tier: str, file: Path, source: str | None, purposes: tuple[str, ...],
               max_reads: int | None, window_days: int | None, hard: bool | None, replace: bool,
               actor: str | None) -> None:
    """Add a split from a JSONL file; policy options may only tighten the tier's default."""
    from evalgate.splits import add_split, load_manifest

    given = {"purposes": list(purposes) or None, "max_reads": max_reads, "window_days": window_days, "hard": hard}
    policy = {k: v for k, v in given.items() if v is not None}
    p = add_split(name, tier, file, source, policy or None, replace, actor=actor)
    m = load_manifest(name)
    click.echo(f"{'replaced' if replace else 'added'} split {name} (tier {tier}, {m.count} items) -> {p}")


@splits.command("list")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_list(as_json: bool) -> None:
    """List splits with tier, item count and data hash. A manifest that does not load is reported on stderr after
    the others are listed, and the command then exits 2."""
    from evalgate.splits import scan_manifests

    ms, broken = scan_manifests()
    if as_json:
        _dump([m.model_dump(mode="json") for m in ms])
    else:
        for m in ms:
            click.echo(f"{m.name:24s} {m.tier:11s} {m.count:5d} items  sha256 {m.content_sha256[:12]}"
                       f"{'  encrypted' if m.encrypted else ''}")
    if broken:
        for e in broken:
            click.echo(f"error: {e.message}", err=True)
        sys.exit(2)


@splits.command("contamination")
@click.option("--split", required=True)
@click.option("--corpus", required=True, type=click.Path(path_type=Path), help="Text or JSONL file (.gz allowed).")
@click.option("--ngram", type=int, default=13, show_default=True, help="n-gram length in words.")
@click.option("--threshold", type=float, default=0.7, show_default=True,
              help="Flag items with a field whose n-gram overlap is >= this.")
@click.option("--field", "fields", multiple=True,
              help="Item field to check (repeatable; default: those --protocol renders, else every text field).")
@click.option("--protocol", type=click.Path(path_type=Path), default=None,
              help="Check the item fields this protocol's prompt template renders.")
@click.option("--near-dup", is_flag=True, help="Also find edited copies (MinHash LSH over 5-byte shingles).")
@click.option("--jaccard", type=float, default=None,
              help="Near-duplicate Jaccard threshold (implies --near-dup; default 0.5).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes scanning the corpus (default: one per core for corpora of 4 MiB or more).")
@click.option("--corpus-format", type=click.Choice(["auto", "text", "jsonl"]), default="auto", show_default=True)
@click.option("--text-field", default=None, help="JSONL corpus field with the text (default: every string).")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_contamination(split: str, corpus: Path, ngram: int, threshold: float, fields: tuple[str, ...],
                         protocol: Path | None, near_dup: bool, jaccard: float | None, workers: int | None,
                         corpus_format: str, text_field: str | None, actor: str | None, as_json: bool) -> None:
    """Per item and field, the share of word n-grams found in a training corpus (and near duplicates); exit 1 if
    any item is flagged. Any tier, the private one included; the output holds ids, field names and figures only."""
    from evalgate.contamination import DEFAULT_JACCARD, check_contamination

    if near_dup and jaccard is None:
        jaccard = DEFAULT_JACCARD
    rep = check_contamination(split, corpus, ngram, threshold, list(fields) or None, protocol, jaccard,
                              corpus_format, text_field, actor, workers=workers)
    if as_json:
        _dump(rep.as_dict())
    else:
        _print_contamination(rep)
    sys.exit(1 if rep.flagged else 0)


def _print_contamination(rep: Any) -> None:
    """The text report of ``splits contamination``: a line per item (on sealed tiers only the flagged ids), the
    fields that could not be checked, the summary and the sealed tiers' check budget."""
    from evalgate.contamination import MIN_WHOLE_WORDS

    for w in rep.warnings:
        click.echo(f"warning: {w}", err=True)
    if rep.sealed:
        for it in rep.flagged:
            click.echo(f"FLAG {it.id}")
    for it in [] if rep.sealed else sorted(rep.items, key=lambda x: -1.0 if x.overlap is None else x.overlap,
                                           reverse=True):
        cells = []
        for name, f in it.fields.items():
            share = (f"not checked ({f.words} < {MIN_WHOLE_WORDS} words)" if f.overlap is None
                     else f"{f.overlap:.3f} (whole field, {f.words} words)" if f.whole
                     else f"{f.overlap:.3f} ({f.matched}/{f.ngrams})")
            near = "" if rep.jaccard is None or f.overlap is None else \
                f" jaccard {'-' if f.jaccard is None else f'{f.jaccard:.2f}'}"
            cells.append(f"{name} {share}{near}{' [' + ','.join(f.flagged_by) + ']' if f.flagged_by else ''}")
        click.echo(f"{'FLAG' if it.flagged else '    '} {it.id:24s} " + "  ".join(cells))
    for name, count in rep.unchecked.items():
        click.echo(f"not checked: field {name} of {count} of {len(rep.items)} items has fewer than {MIN_WHOLE_WORDS} "
                   "words (too short to judge alone; check it as part of a longer field with --field)", err=True)
    near_txt = f" or a near duplicate (Jaccard >= {rep.jaccard})" if rep.jaccard is not None else ""
    click.echo(f"{len(rep.flagged)} of {len(rep.items)} items have a field at or above {rep.threshold} "
               f"{rep.ngram}-gram overlap (a field shorter than {rep.ngram} words: found whole){near_txt} with "
               f"{rep.corpus} (fields: {rep.fields_from}; {rep.corpus_tokens} tokens read, {rep.seconds:.1f} s, "
               f"{rep.workers} worker(s))")
    if not rep.flagged:
        click.echo("not shown clean: some fields could not be checked (see above)" if rep.unchecked
                   else "clean: no item flagged")
    if rep.budget:
        b = rep.budget
        click.echo(f"sealed split: one flag per item shown; contamination checks {b['used']}/{b['max_checks']} per "
                   f"{b['window_days']}d ({b['left']} left)")


@splits.command("export-audit")
@click.argument("name")
@click.option("--out", required=True, type=OUT_FILE, help="JSONL file to write.")
@click.option("--run", "run_id", default=None, help="Export this run's samples instead of the bare items.")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_export_audit(name: str, out: Path, run_id: str | None, actor: str | None, as_json: bool) -> None:
    """Write a human-audit split's items (or a run's samples) for people to score (fill in human_score)."""
    from evalgate.human_audit import export_audit

    doc = export_audit(name, out, run_id, actor)
    if as_json:
        _dump(doc)
    else:
        click.echo(f"wrote {doc['records']} records of {name} to {out}; fill in human_score, then "
                   f"'evalgate splits import-audit {shlex.quote(str(out))}'")


@splits.command("import-audit")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--rater", default=None, help="Rater for records without one (default: the actor).")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_import_audit(file: Path, rater: str | None, actor: str | None, as_json: bool) -> None:
    """Store the human scores of a file written by export-audit."""
    from evalgate.human_audit import import_audit

    doc = import_audit(file, rater, actor)
    if as_json:
        _dump(doc)
        return
    a = doc["agreement"]
    click.echo(f"imported {doc['imported']} human scores ({doc['skipped_unscored']} unscored records skipped)")
    if a["n"]:
        click.echo(f"  vs automatic scores on {a['n']} samples: mean human {a['mean_human']:.3f}, mean auto "
                   f"{a['mean_auto']:.3f}, mean |diff| {a['mean_abs_diff']:.3f}, exact agreement "
                   f"{a['exact_agreement']:.3f}")


# -- run ---------------------------------------------------------------------------------------------------------
@main.command("run")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@click.option("--backend", default="hf", show_default=True)
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None,
              help="Sampling seed, 0 to 2**63-1 (default: the protocol's).")
@click.option("--train-run", default=None)
@click.option("--train-seed", type=int, default=None)
@click.option("--step", type=int, default=None)
@click.option("--purpose", default="evaluation", show_default=True)
@click.option("--actor", default=None)
@click.option("--override-reason", default=None, help="Exceed a soft read budget, with this logged reason.")
@click.option("--device", default=None,
              help="Device option of backends that have one (hf: cpu, cuda, cuda:N; default cpu); refused for others.")
@click.option("--backend-option", "backend_option", multiple=True, metavar="KEY=VALUE",
              help="Backend option, repeatable (e.g. base_url=http://127.0.0.1:8000/v1, tensor_parallel_size=2).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def run_cmd(protocol_path: Path, checkpoint: Path, split: str, backend: str, seed: int | None,
            train_run: str | None, train_seed: int | None, step: int | None, purpose: str, actor: str | None,
            override_reason: str | None, device: str | None, backend_option: tuple[str, ...], as_json: bool) -> None:
    """Evaluate a checkpoint on a split under a frozen protocol."""
    from evalgate.backends.base import parse_backend_options, with_flags
    from evalgate.run import RunOptions, evaluate

    opts = RunOptions(backend=backend, seed=seed, train_run=train_run, train_seed=train_seed, step=step,
                      purpose=purpose, actor=actor, override_reason=override_reason,
                      backend_options=with_flags(backend, parse_backend_options(backend_option), device=device),
                      progress=not as_json)
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
    click.echo(f"  mean completion tokens {m['mean_completion_tokens']:.1f}, "
               f"truncation rate {m['truncation_rate']:.3f}")


# -- runs --------------------------------------------------------------------------------------------------------
@main.command("runs")
@click.option("--status", type=click.Choice(["complete", "running", "interrupted", "failed"]), default=None,
              help="Only runs with this status.")
@click.option("--split", default=None, help="Only runs on this split.")
@click.option("--protocol", "protocol_name", default=None,
              help="Only runs under this protocol: a name (any version) or name@version.")
@click.option("--train-run", default=None, help="Only runs of this training run.")
@click.option("--train-seed", type=int, default=None, help="Only runs of checkpoints of this training seed.")
@click.option("--checkpoint", default=None,
              help="Only runs of this checkpoint: its path, a path suffix (seed-1/checkpoint-9) or a digest prefix.")
@click.option("--by-step", is_flag=True,
              help="One table per training run: rows steps, columns training seeds, cells the metric ± stderr.")
@click.option("--metric", default="pass@1", show_default=True, help="The metric of --by-step tables.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True,
              help="The newest N runs (not applied to --by-step).")
@click.option("--json", "as_json", is_flag=True, help="Print the runs (all stored fields) as a JSON list.")
@handle_errors
def runs_cmd(status: str | None, split: str | None, protocol_name: str | None, train_run: str | None,
             train_seed: int | None, checkpoint: str | None, by_step: bool, metric: str, limit: int,
             as_json: bool) -> None:
    """List runs in the store, newest last: status (complete / running / interrupted / failed), protocol, split,
    checkpoint with its training run, training seed and step, sampling seed, pass@1 (or mean score) and how many
    samples came from the cache."""
    from evalgate.runs_view import by_step as step_tables
    from evalgate.runs_view import select_runs

    where = " ".join(f"{flag} {shlex.quote(str(v))}" for flag, v in (
        ("--status", status), ("--split", split), ("--protocol", protocol_name), ("--train-run", train_run),
        ("--train-seed", train_seed), ("--checkpoint", checkpoint)) if v is not None)
    rows = select_runs(status=status, split=split, protocol_name=protocol_name, train_run=train_run,
                       train_seed=train_seed, checkpoint=checkpoint)
    if split is not None and not rows:
        from evalgate.errors import BadInput
        from evalgate.splits import list_manifests

        known = [m.name for m in list_manifests()]
        if split not in known:  # a name no split has and no run was made on is a typo, as in 'audit --split'
            raise BadInput(f"--split {split!r}: no split of that name and no run on it; known splits: "
                           f"{', '.join(known) or 'none'} ('evalgate splits list')")
    if by_step:
        tables = step_tables(rows, metric)
        if as_json:
            _dump([t.as_dict() for t in tables])
        elif not tables:
            click.echo("no complete runs with a training run, seed and step" + (f" matching {where}" if where else ""))
        else:
            click.echo("\n\n".join(t.render() for t in tables))
        return
    rows = rows[-limit:]
    if as_json:
        _dump(rows)
        return
    if not rows:
        click.echo("no runs" + (f" matching {where}" if where else ""))
        return
    for r in rows:
        m, c = r["metrics"] or {}, r["counts"] or {}
        score = next((f"{k} {m[k]:.4f}" for k in ("pass@1", "mean_score") if k in m), "-")
        train = "" if r["train_run"] is None and r["train_seed"] is None else \
            f" [{r['train_run'] or '?'} seed {'?' if r['train_seed'] is None else r['train_seed']}]"
        ckpt = Path(r["checkpoint_path"]).name + (f" (step {r['step']})" if r["step"] is not None else "") + train
        cached = f"{c['cached']}/{c['samples']} cached" if c and "cached" in c else ""
        click.echo(f"{r['run_id']}  {r['status']:<11} {r['protocol_name']}@{r['protocol_version']}  "
                   f"{r['split']} ({r['tier']})  {ckpt}  seed {r['sampling_seed']}  {score}  {cached}".rstrip())
        if r["status"] in ("failed", "interrupted") and r["error"]:
            click.echo(f"    {r['error'][:200]}")


# -- parity ------------------------------------------------------------------------------------------------------
@main.command("parity")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@click.option("--a", "backend_a", default="hf", show_default=True, help="First backend.")
@click.option("--b", "backend_b", default="openai", show_default=True, help="Second backend.")
@click.option("--a-option", multiple=True, metavar="KEY=VALUE", help="Option of backend a, repeatable.")
@click.option("--b-option", multiple=True, metavar="KEY=VALUE", help="Option of backend b, repeatable.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None,
              help="Sampling seed, 0 to 2**63-1 (default: the protocol's).")
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
                 parse_backend_options(b_option), seed, limit, actor, progress=not as_json)
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
@click.option("--report", type=OUT_FILE, default=None, help="Write the HTML report here.")
@click.option("--junit", type=OUT_FILE, default=None, help="Write JUnit XML here.")
@click.option("--json-out", type=OUT_FILE, default=None, help="Write the verdict JSON here.")
@click.option("--markdown", type=OUT_FILE, default=None,
              help="Write the Markdown summary here (it is also appended to $GITHUB_STEP_SUMMARY when set).")
@click.option("--actor", default=None)
@click.option("--evaluate-missing", "missing", default=None, metavar="GLOB",
              help="First evaluate, on the selection split, the checkpoints matching GLOB that have no complete run "
                   "there (evalgate sweep, locally).")
@click.option("--accept-broken-chain", "accept_broken", default=None, metavar="REASON",
              help="Gate although the access log's hash chain is broken (refused otherwise, exit 2); the reason is "
                   "logged and shown in every report.")
@click.option("--expect-head", default=None, help="SEQ:HASH the access log must hold (pinned by the last run; default "
              "$EVALGATE_EXPECT_HEAD): refused (exit 2) before any read when it does not.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def gate_cmd(policy_path: Path, report: Path | None, junit: Path | None, json_out: Path | None,
             markdown: Path | None, actor: str | None, missing: str | None, accept_broken: str | None,
             expect_head: str | None,
             as_json: bool) -> None:
    """Decide PASS (exit 0) or FAIL (exit 1) for a gate policy, and write the reports (exit 2: bad policy or
    refused; 1 also on protocol drift). The JSON and JUnit carry a machine-readable reason: pass, fail, drift,
    refused, invalid or error."""
    import os

    from evalgate.report import error_document, gate_and_report
    swept = None
    try:
        if missing:
            from evalgate.sweep import evaluate_missing

            swept = evaluate_missing(policy_path, missing, actor, progress=not as_json)
            for why in swept["ignored"]:  # e.g. a seed's checkpoint whose weights duplicate another's: not its own run
                click.echo(f"--evaluate-missing: not evaluated: {why}", err=True)
        head = _expect_head(expect_head)
        verdict, doc = gate_and_report(policy_path, report=report, junit=junit, json_out=json_out,
                                       markdown=markdown, actor=actor, accept_broken_chain=accept_broken,
                                       expect_head=head)
    except Exception as e:
        if os.environ.get("EVALGATE_DEBUG") == "1":
            raise
        err = error_document(policy_path, policy_path.stem, e)
        if as_json:
            _dump(err)
        else:
            click.echo(f"{'error' if err['exit_code'] != 3 else 'internal error'}: {err['error']}", err=True)
            click.echo(f"ship: none ({err['reason']}: no verdict)")
        sys.exit(err["exit_code"])
    if as_json:
        _dump({**doc, "evaluate_missing": {"counts": swept["counts"], "ignored": swept["ignored"]}} if swept else doc)
    else:
        _print_gate(verdict, doc)
    sys.exit(0 if verdict.passed else 1)


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
        click.echo(f"  [{'pass' if r.passed else 'FAIL'}] {r.rule}: {r.detail}")
    for s in doc["seeds"]:
        click.echo(f"  seed {s['train_seed']} ({s['train_run']}):")
        for label, c in (("best", s["best"]), ("last", s["last"])):
            if c is None:
                click.echo(f"    {label}: none (every checkpoint failed)")
            else:
                click.echo(f"    {label}: step {c['step']} {doc['metric']} {_num(c['value'])}  {c['path']}")
        for c in s["failed"]:
            click.echo(f"    failed: step {c['step']}  {c['path']}: {'; '.join(c['failed_reasons'])}")
    for key in ("stale", "ignored", "failures"):
        for a in doc[key]:
            click.echo(f"  {key}: run {a['run_id']} ({a['checkpoint_path']}): {a['reason']}")
    for k in ("report", "junit", "json_out", "markdown"):
        if doc.get(k):
            click.echo(f"{k}: {doc[k]}")
    ship = doc["ship"]
    click.echo(f"ship: {ship['checkpoint']} ({ship['why']})" if ship["checkpoint"] else f"ship: none ({ship['why']})")


def _num(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


# -- audit -------------------------------------------------------------------------------------------------------
def _since(since: str | None) -> datetime | None:
    from evalgate.errors import BadInput

    try:
        return datetime.fromisoformat(since).astimezone() if since else None
    except ValueError as e:
        raise BadInput(f"--since {since!r} is not an ISO date (e.g. 2026-11-01)") from e


@main.group("audit", invoke_without_command=True)
@click.option("--split", default=None)
@click.option("--tier", default=None, type=click.Choice(["smoke", "dev", "public", "private", "human-audit"]))
@click.option("--since", default=None, help="ISO date, e.g. 2026-11-01.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def audit_cmd(ctx: click.Context, split: str | None, tier: str | None, since: str | None, as_json: bool) -> None:
    """Who read which split, how often and for what; 'audit verify' checks the log's hash chain."""
    if ctx.invoked_subcommand:
        return
    from evalgate.audit import audit_summary
    from evalgate.store import Store

    doc = audit_summary(Store(), split, _since(since), tier)
    if as_json:
        _dump(doc)
    else:
        _print_audit(doc)
    for message in doc["broken_manifests"]:  # shown after the others, then exit 2 as 'splits list' does
        click.echo(f"error: {message}", err=True)
    if doc["broken_manifests"]:
        sys.exit(2)


def _print_audit(doc: dict[str, Any]) -> None:
    click.echo(f"{'split':20s} {'tier':11s} {'reads':>5s} {'cached':>6s} {'override':>8s} {'refused':>7s}  "
               "budget used/max (left)")
    for name, a in doc["splits"].items():
        b = a.get("budget")
        budget = (("-" if a["manifest"] else "? (no manifest)") if not b
                  else f"unknown: {b['unknown']} (max {b['max_reads']} per {b['window_days']}d)" if b.get("unknown")
                  else f"{b['used']}/{b['max_reads']} per {b['window_days']}d ({b['left']} left)")
        click.echo(f"{name:20s} {a['tier'] or '?':11s} {a['reads']:5d} {a['cached_reads']:6d} {a['overrides']:8d} "
                   f"{a['refusals']:7d}  {budget}")
        for label, key in (("by actor", "by_actor"), ("by purpose", "by_purpose"), ("by day", "by_day"),
                           ("refused", "refusals_by_actor")):
            if a[key]:
                click.echo(f"    {label + ':':12s} " + ", ".join(f"{k} {n}" for k, n in a[key].items()))
        if a["ci_reads"]:
            click.echo(f"    {'in CI:':12s} {a['ci_reads']} of the reads")
        if a.get("same_content_as"):
            click.echo(f"    same content as split {a['same_content_as']}: its reads, budget and rows are that "
                       "split's")
        elif len(a.get("content_names", ())) > 1:
            click.echo(f"    {'also named:':12s} {', '.join(a['content_names'][1:])} (same content; reads counted "
                       "here)")
        if a.get("contamination_budget"):
            cb = a["contamination_budget"]
            click.echo(f"    {'contam.:':12s} {cb['used']}/{cb['max_checks']} contamination checks per "
                       f"{cb['window_days']}d ({cb['left']} left)")
        if len(a["tiers_seen"]) > 1:
            click.echo(f"    WARNING: logged under tiers {', '.join(a['tiers_seen'])} (its manifest was changed)")
    unknown = [name for name, a in doc["splits"].items() if not a["manifest"]]
    if unknown:
        click.echo(f"budget of {', '.join(unknown)} unknown: no manifest in {doc['splits_dir']} (EVALGATE_SPLITS, "
                   "default ./splits); run from the project directory or set EVALGATE_SPLITS")
    c = doc["chain"]
    sig = c["signature"]
    click.echo(f"access log: {c['rows']} rows, chain "
               + (f"intact, head signed (head {c['head']['seq']}:{c['head']['hash']})" if c["ok"]
                  else f"BROKEN at row {c['first_bad_seq']}: {c['reason']}" if c["first_bad_seq"]
                  else f"NOT VERIFIED: signed head: {sig['reason']}"))


@audit_cmd.command("log")
@click.option("--split", default=None, help="Only rows of this split.")
@click.option("--since", default=None, help="Only rows from this ISO date or time on, e.g. 2026-11-01.")
@click.option("--refused", is_flag=True, help="Only refused attempts.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the last N rows.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_log(split: str | None, since: str | None, refused: bool, limit: int | None, as_json: bool) -> None:
    """List access-log rows, oldest first: who, when, split, purpose, outcome, run and why (for refusals)."""
    from evalgate.audit import log_rows
    from evalgate.store import Store

    rows = log_rows(Store(), split, _since(since), refused)[-limit if limit else None:]
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


_EXPECT_HEAD_HELP = ("SEQ:HASH printed by an earlier 'audit verify' or 'audit' (default $EVALGATE_EXPECT_HEAD); "
                     "also detects deleted final rows and a store rolled back to an older copy.")


def _expect_head(text: str | None) -> tuple[int, str] | None:
    """``--expect-head``, else ``$EVALGATE_EXPECT_HEAD``, parsed (``accesslog.parse_head``)."""
    import os

    from evalgate.accesslog import parse_head

    if text:
        return parse_head(text)
    env = os.environ.get("EVALGATE_EXPECT_HEAD", "").strip()
    return parse_head(env, "$EVALGATE_EXPECT_HEAD") if env else None


@audit_cmd.command("verify")
@click.option("--expect-head", default=None, help=_EXPECT_HEAD_HELP)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_verify(expect_head: str | None, as_json: bool) -> None:
    """Exit 1 and name the first bad row if the access log was edited, inserted into, truncated or re-hashed (its
    newest signed head no longer verifies with the signing key); exit 2 when no signing key is found to check it."""
    import os

    from evalgate.audit import verify_chain
    from evalgate.store import Store

    res = verify_chain(Store(), _expect_head(expect_head))
    sig = res["signature"]
    if as_json:
        _dump(res)
    elif res["ok"]:
        from evalgate.logsign import log_key_file

        where = "$EVALGATE_LOG_KEY" if os.environ.get("EVALGATE_LOG_KEY") else str(log_key_file())
        click.echo(f"ok: access log chain intact ({res['rows']} rows), head signed (key "
                   f"{(sig['public_key'] or '-')[:16]} from {where}); head {res['head']['seq']}:{res['head']['hash']}")
    elif res["first_bad_seq"]:
        click.echo(f"BROKEN: first bad row seq {res['first_bad_seq']}: {res['reason']}", err=True)
    else:
        click.echo(f"{'BROKEN' if sig['checked'] else 'NOT VERIFIED'}: signed head: {sig['reason']}", err=True)
    sys.exit(0 if res["ok"] else 1 if res["first_bad_seq"] or sig["checked"] else 2)


@audit_cmd.command("sign")
@click.option("--expect-head", default=None, help=_EXPECT_HEAD_HELP)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def audit_sign(expect_head: str | None, as_json: bool) -> None:
    """Sign the head of an intact log that has no valid signed head (a store from before signed heads): this vouches
    for the log as it is now, so check it against a head pinned earlier first. Never for a log that lost its
    signature: that one was tampered with."""
    from evalgate.accesslog import sign_head
    from evalgate.store import Store

    res = sign_head(Store(), _expect_head(expect_head))
    if as_json:
        _dump(res)
    else:
        click.echo(f"signed: head {res['head']['seq']}:{res['head']['hash']} ({res['rows']} rows) with key "
                   f"{(res['signature']['public_key'] or '')[:16]}")
    sys.exit(0 if res["ok"] else 1)


@main.command("diagnose")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--seed", "seeds", multiple=True, type=int, help="Training seed of each path, in order (default: "
              "from a seed-N directory name).")
@click.option("--thresholds", "thresholds_file", type=click.Path(path_type=Path), default=None,
              help="YAML file of Thresholds fields (docs/DIAGNOSTICS.md).")
@click.option("--kl-target", type=click.FloatRange(0, min_open=True), default=None,
              help="KL target (> 0): KL above 2x this fails.")
@click.option("--report", type=OUT_FILE, default=None, help="Write an HTML report with plots.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def diagnose_cmd(paths: tuple[Path, ...], seeds: tuple[int, ...], thresholds_file: Path | None,
                 kl_target: float | None, report: Path | None, as_json: bool) -> None:
    """Which curve broke first: signals over training logs (trainer_state.json, JSONL, TensorBoard, or run
    directories), one column per seed. Exit 1 when a fail signal fires, 2 on bad input."""
    from evalgate.diagnostics import Thresholds, diagnose_paths, format_table
    from evalgate.diagnostics.thresholds import load_thresholds

    th = load_thresholds(thresholds_file) if thresholds_file else Thresholds()
    if kl_target is not None:
        th = th.model_copy(update={"kl_target": kl_target})
    diags = diagnose_paths(list(paths), list(seeds) or None, th)
    doc = {"seeds": [d.as_dict() for d in diags], "fail": any(d.worst == "fail" for d in diags)}
    if report:
        from evalgate.diagnostics.report import write_report

        doc["report"] = str(write_report(diags, report))
    if as_json:
        _dump(doc)
    else:
        click.echo(format_table(diags))
        if report:
            click.echo(f"report: {report}")
    sys.exit(1 if doc["fail"] else 0)


# Command areas in evalgate/commands/ attach here, one line each (keep this block sorted by area name).
from evalgate.commands import audit_web  # noqa: E402
from evalgate.commands import daily as _daily  # noqa: E402
from evalgate.commands.agent import trajectories as _trajectories  # noqa: E402
from evalgate.commands.preflight import preflight_cmd  # noqa: E402
from evalgate.commands.sweep import sweep_cmd  # noqa: E402
from evalgate.commands.watch import watch_cmd  # noqa: E402

audit_cmd.add_command(audit_web.add_rater_cmd)
audit_cmd.add_command(audit_web.batch_cmd)
audit_cmd.add_command(audit_web.reward_cmd)
main.add_command(audit_web.serve_cmd)
main.add_command(_daily.samples_cmd)
main.add_command(_daily.compare_cmd)
main.add_command(preflight_cmd)
main.add_command(report_cmd)
main.add_command(sweep_cmd)
main.add_command(_trajectories)
main.add_command(watch_cmd)


if __name__ == "__main__":
    main()
