"""``evalgate splits``: import, add, list and check splits; export and import human-audit scores."""

from __future__ import annotations

import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.commands.options import OUT_FILE, actor_option
from evalgate.core.enums import Tier
from evalgate.core.formatting import num, pct


@click.group()
def splits() -> None:
    """Import, add and list splits."""


@splits.command("import")
@click.argument("dataset")
@click.option("--from", "source", type=click.Path(path_type=Path),
              help="Data file (humaneval default: the installed wheel; gsm8k, math500: required).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the manifests written as a JSON list ('splits list --json' entries, with their path).")
@handle_errors
def splits_import(dataset: str, source: Path | None, as_json: bool) -> None:
    """Import a benchmark (humaneval, gsm8k, math500, ...: evalgate/datasets/) as tiered splits
    (smoke/dev/public/private)."""
    from evalgate.datasets import import_dataset
    from evalgate.splits.discovery import load_manifest

    ws = workspace()
    paths = import_dataset(dataset, source, ws.splits, store=ws.store)
    manifests = [(p, load_manifest(p.stem, p.parent)) for p in paths]
    if as_json:
        _dump([{**m.model_dump(mode="json"), "path": str(p)} for p, m in manifests])
        return
    for p, m in manifests:
        click.echo(f"{m.name:24s} tier {m.tier:8s} {m.count:4d} items  {p}{'  (encrypted)' if m.encrypted else ''}")


@splits.command("add")
@click.argument("name")
@click.option("--tier", required=True, type=click.Choice([t.value for t in Tier]))
@click.option("--file", "file", required=True, type=click.Path(path_type=Path),
              help="JSONL, CSV or Parquet file, or a datasets folder (Dataset.save_to_disk).")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "parquet", "datasets"]), default=None,
              help="Source format (default: from the suffix; a folder is a datasets folder).")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=COLUMN",
              help="Item field from a source column (repeatable); with --map only mapped fields (and id) are kept.")
@click.option("--row-ids", is_flag=True, help="Number items by row (0-based) where the data has no 'id'.")
@click.option("--gold", type=click.Choice(["gsm8k", "boxed"]), default=None,
              help="Take each gold answer out of a worked solution: gsm8k = the number after the final '####' of "
                   "'answer'; boxed = the last \\boxed{} of 'solution' (MATH). 'answer' gets it, 'solution' the "
                   "text.")
@click.option("--source", default=None, help="Provenance: where the data came from.")
@click.option("--purpose", "purposes", multiple=True, help="Policy: allow only these purposes (repeatable).")
@click.option("--max-reads", type=int, default=None, help="Policy: reads allowed per window.")
@click.option("--window-days", type=int, default=None, help="Policy: budget window, days.")
@click.option("--hard", is_flag=True, default=None, help="Policy: a hard budget (no override).")
@click.option("--replace", is_flag=True, help="Replace an existing split's data (same tier only; logged).")
@actor_option()
@click.option("--json", "as_json", is_flag=True,
              help="Print the manifest written as JSON (a 'splits list --json' entry, with its path).")
@handle_errors
def splits_add(name: str, tier: str, file: Path, fmt: str | None, mapping: tuple[str, ...], row_ids: bool,
               gold: str | None, source: str | None, purposes: tuple[str, ...], max_reads: int | None,
               window_days: int | None, hard: bool | None, replace: bool, actor: str | None, as_json: bool) -> None:
    """Add a split from a JSONL, CSV or Parquet file or a datasets folder, optionally mapping fields
    (--map question=problem); policy options may only tighten the tier's default."""
    from evalgate.splits.discovery import load_manifest
    from evalgate.splits.write import GoldNote, add_split

    given = {"purposes": list(purposes) or None, "max_reads": max_reads, "window_days": window_days, "hard": hard}
    policy = {k: v for k, v in given.items() if v is not None}
    ws = workspace(actor)
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", GoldNote)
        p = add_split(name, tier, file, source, policy or None, replace, store=ws.store, actor=ws.actor, fmt=fmt,
                      mapping=list(mapping), row_ids=row_ids, gold=gold)
    for n in notes:
        if issubclass(n.category, GoldNote):
            click.echo(f"note: {n.message}", err=True)
        else:
            warnings.warn_explicit(n.message, n.category, n.filename, n.lineno)
    m = load_manifest(name, ws.splits)
    if as_json:
        _dump({**m.model_dump(mode="json"), "path": str(p), "replaced": replace})
        return
    click.echo(f"{'replaced' if replace else 'added'} split {name} (tier {tier}, {m.count} items) -> {p}")


@splits.command("list")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_list(as_json: bool) -> None:
    """List splits with tier, item count and data hash. A manifest that does not load is reported on stderr after
    the others are listed, and the command then exits 2."""
    from evalgate.splits.discovery import scan_manifests

    ms, broken = scan_manifests(workspace().splits)
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
@actor_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_contamination(split: str, corpus: Path, ngram: int, threshold: float, fields: tuple[str, ...],
                         protocol: Path | None, near_dup: bool, jaccard: float | None, workers: int | None,
                         corpus_format: str, text_field: str | None, actor: str | None, as_json: bool) -> None:
    """Per item and field, the share of word n-grams found in a training corpus (and near duplicates); exit 1 if
    any item is flagged or any field could not be checked (never shown clean then). Any tier, the private one
    included; the output holds ids, field names and figures only."""
    from evalgate.splits.contamination import DEFAULT_JACCARD, check_contamination

    if near_dup and jaccard is None:
        jaccard = DEFAULT_JACCARD
    ws = workspace(actor)
    rep = check_contamination(split, corpus, ngram, threshold, list(fields) or None, protocol, jaccard,
                              corpus_format, text_field, ws.actor, store=ws.store, workers=workers)
    if as_json:
        _dump(rep.as_dict())
    else:
        _print_contamination(rep)
    sys.exit(0 if rep.clean else 1)


def _print_contamination(rep: Any) -> None:
    """The text report of ``splits contamination``: a line per item (on sealed tiers only the flagged ids), the
    fields that could not be checked, the summary and the sealed tiers' check budget."""
    from evalgate.splits.contamination import MIN_SEGMENT_WORDS, MIN_WHOLE_WORDS

    for w in rep.warnings:
        click.echo(f"warning: {w}", err=True)
    if rep.sealed:
        for it in rep.flagged:
            click.echo(f"FLAG {it.id}")
    for it in [] if rep.sealed else sorted(rep.items, key=lambda x: -1.0 if x.overlap is None else x.overlap,
                                           reverse=True):
        cells = []
        for name, f in it.fields.items():
            share = (f"not checked ({f.words} < {MIN_SEGMENT_WORDS} words)" if f.overlap is None
                     else f"{num(f.overlap)} (whole segment only, {f.words} < {MIN_WHOLE_WORDS} words)" if f.segment
                     else f"{num(f.overlap)} (whole field, {f.words} words)" if f.whole
                     else f"{num(f.overlap)} ({f.matched}/{f.ngrams})")
            near = "" if rep.jaccard is None or f.overlap is None else f" jaccard {num(f.jaccard, 2)}"
            cells.append(f"{name} {share}{near}{' [' + ','.join(f.flagged_by) + ']' if f.flagged_by else ''}")
        click.echo(f"{'FLAG' if it.flagged else '    '} {it.id:24s} " + "  ".join(cells))
    for name, count in rep.unchecked.items():
        click.echo(f"not checked: field {name} of {count} of {len(rep.items)} items has fewer than "
                   f"{MIN_SEGMENT_WORDS} words (a match would be chance; check the fields the model sees with "
                   "--protocol or --field)", err=True)
    for name, count in rep.segment_only.items():
        click.echo(f"note: field {name} of {count} of {len(rep.items)} items has fewer than {MIN_WHOLE_WORDS} words: "
                   "looked for only as a whole corpus line or JSONL string (inside longer text a match would be "
                   "chance)", err=True)
    near_txt = f" or a near duplicate (Jaccard >= {rep.jaccard})" if rep.jaccard is not None else ""
    click.echo(f"{len(rep.flagged)} of {len(rep.items)} items have a field at or above {rep.threshold} "
               f"{rep.ngram}-gram overlap (a field shorter than {rep.ngram} words: found whole){near_txt} with "
               f"{rep.corpus} (fields: {rep.fields_from}; {rep.corpus_tokens} tokens read, {rep.seconds:.1f} s, "
               f"{rep.workers} worker(s))")
    if not rep.flagged:
        click.echo(f"not shown clean: {sum(rep.unchecked.values())} field(s) could not be checked (see above; exit 1)"
                   if rep.unchecked else "clean: no item flagged")
    if rep.budget:
        b = rep.budget
        click.echo(f"sealed split: one flag per item shown; contamination checks {b['used']}/{b['max_checks']} per "
                   f"{b['window_days']}d ({b['left']} left)")


@splits.command("export-audit")
@click.argument("name")
@click.option("--out", required=True, type=OUT_FILE, help="JSONL file to write.")
@click.option("--run", "run_id", default=None, help="Export this run's samples instead of the bare items.")
@click.option("--show-gold", is_flag=True,
              help="With --run: also the item's gold answer (the fields the protocol's prompt does not render).")
@click.option("--scale", default="0-1", show_default=True,
              help="With --run: the rating scale MIN-MAX of the batch the export makes (whole numbers).")
@actor_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_export_audit(name: str, out: Path, run_id: str | None, show_gold: bool, scale: str, actor: str | None,
                        as_json: bool) -> None:
    """Write a human-audit split's items (or a run's samples, blind: a rating batch keyed by opaque sample keys, no
    run id or automatic score) for people to score (fill in human_score)."""
    from evalgate.human.audit_io import export_audit

    if show_gold and run_id is None:
        from evalgate.core.errors import BadInput

        raise BadInput("--show-gold needs --run (an item-level export holds every field already)")
    ws = workspace(actor)
    doc = export_audit(name, out, run_id, ws.actor, store=ws.store, show_gold=show_gold, scale=scale)
    if as_json:
        _dump(doc)
    else:
        batch = (f" (rating batch {doc['batch_id']}, scale {doc['scale'][0]}-{doc['scale'][1]})"
                 if doc["batch_id"] else "")
        click.echo(f"wrote {doc['records']} records of {name} to {out}{batch}; fill in human_score, then "
                   f"'evalgate splits import-audit {shlex.quote(str(out))}'")


@splits.command("import-audit")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--rater", default=None, help="Rater for records without one (default: the actor).")
@actor_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def splits_import_audit(file: Path, rater: str | None, actor: str | None, as_json: bool) -> None:
    """Store the human scores of a file written by export-audit."""
    from evalgate.human.audit_io import import_audit

    ws = workspace(actor)
    doc = import_audit(file, rater, ws.actor, store=ws.store)
    if as_json:
        _dump(doc)
        return
    a = doc["agreement"]
    click.echo(f"imported {doc['imported']} human scores ({doc['skipped_unscored']} unscored records skipped)"
               + "".join(f"; {n} as ratings of batch {b}" for b, n in doc["batches"].items()))
    if a["n"]:
        click.echo(f"  vs automatic scores on {a['n']} samples: mean human {num(a['mean_human'])}, mean auto "
                   f"{num(a['mean_auto'])}, mean |diff| {num(a['mean_abs_diff'])}, exact agreement "
                   f"{pct(a['exact_agreement'])}")
