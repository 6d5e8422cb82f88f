"""``evalgate init``: write a starter protocol, gate policy, tiered splits and CI workflow
(``evalgate.scaffold.starter``)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.scaffold.starter import BENCHMARKS, DEFAULT_BASELINE, DEFAULT_CHECKPOINT_GLOB, InitOptions, InitResult


@click.command("init")
@click.option("--benchmark", required=True, type=click.Choice(BENCHMARKS),
              help="The benchmark's protocol and data, or custom: your data with 'question' and 'answer' fields.")
@click.option("--from", "source", type=click.Path(path_type=Path), default=None,
              help="The data: the benchmark's file (humaneval default: the installed wheel; the others: "
                   "required), or for custom a JSONL, CSV or Parquet file or a datasets folder.")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=COLUMN",
              help="custom: an item field from a source column (repeatable), e.g. --map question=problem.")
@click.option("--row-ids", is_flag=True, help="custom: number items by row (0-based) where the data has no 'id'.")
@click.option("--gold", type=click.Choice(["gsm8k", "boxed"]), default=None,
              help="custom: take each gold answer out of a worked solution, as 'splits add --gold' (gsm8k: the "
                   "number after the final '####' of 'answer'; boxed: the last \\boxed{} of 'solution').")
@click.option("--name", default=None,
              help="Name of the protocol, the gate and the splits' prefix (default: the benchmark's name).")
@click.option("--checkpoint-glob", default=DEFAULT_CHECKPOINT_GLOB, show_default=True,
              help="The checkpoints the CI workflow evaluates (relative to the repository root, or absolute).")
@click.option("--baseline", default=DEFAULT_BASELINE, show_default=True,
              help="The gate's baseline checkpoint: a path, or $VARIABLE (the workflow sets $EVALGATE_BASELINE "
                   "from the repository variable).")
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False), default=Path("."),
              show_default=True, help="The repository to write into.")
@click.option("--human-audit", "human_audit", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="N", help="Deal N items (after the smoke items) into NAME-human-audit, the split people rate "
                                "blind ('evalgate audit serve'); 0: none.")
@click.option("--train-run", "train_run", default=None, metavar="NAME",
              help="The training run the starter policy gates (train_run:; the default checkpoint glob becomes "
                   "runs/NAME/seed-*/checkpoint-*). Default: none named; the gate refuses candidates of several runs.")
@click.option("--force", is_flag=True,
              help="Replace an existing protocol, gate policy or workflow (never a protocol's lock or a split).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@handle_errors
def init_cmd(benchmark: str, source: Path | None, mapping: tuple[str, ...], row_ids: bool, gold: str | None,
             name: str | None, checkpoint_glob: str, baseline: str, directory: Path, human_audit: int,
             train_run: str | None, force: bool, as_json: bool) -> None:
    """Write a starter protocol, gate policy, splits (private data encrypted) and GitHub Actions workflow into a
    repository. Refuses (exit 2, writing nothing) when any of those files exists."""
    from evalgate.scaffold.starter import init_project

    ws = workspace()
    result = init_project(InitOptions(benchmark, name, source, mapping, row_ids, checkpoint_glob, baseline,
                                      directory, force, human_audit, train_run, gold), ws.env)
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    if as_json:
        dump(result.to_json())
        return
    _say(result, ws.splits)


def _say(r: InitResult, splits: Path) -> None:
    """What was written and what to do next (commands run in the repository's directory)."""
    for f in r.files:
        click.echo(f"wrote {f.kind:14s} {r.directory / f.path}")
    click.echo("splits: " + ", ".join(f"{r.splits[t]} ({n} items)" for t, n in r.counts.items()))
    click.echo("next:")
    if r.directory != Path("."):
        click.echo(f"  cd {shlex.quote(str(r.directory))}")
    if splits != Path("splits"):  # $EVALGATE_SPLITS points elsewhere: commands would not find these splits
        click.echo(f"  export EVALGATE_SPLITS=splits   # it is {splits}; init wrote the splits to splits/, which the "
                   "workflow reads")
    click.echo(f"  evalgate protocol freeze protocols/{r.name}.yaml   # writes the .lock; commit it with the files "
               "above")
    click.echo(f"  evalgate run --protocol protocols/{r.name}.yaml --checkpoint CKPT --split {r.splits['smoke']}")
    if r.key_file is not None:
        click.echo(f"  the private split is encrypted with the key in {r.key_file}: store it as the CI secret "
                   "EVALGATE_PRIVATE_KEY (docs/CI.md), never in the repository")
