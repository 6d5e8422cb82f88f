"""``evalgate run``: evaluate one checkpoint on one split under a frozen protocol (``evalgate.run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors
from evalgate.commands.options import backend_options_of, run_options
from evalgate.formatting import num, pct, pm
from evalgate.trackers.cli import export_and_say, tracker_options


@click.command("run")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@run_options()
@click.option("--train-run", default=None)
@click.option("--train-seed", type=int, default=None)
@click.option("--step", type=int, default=None)
@click.option("--purpose", default="evaluation", show_default=True)
@click.option("--override-reason", default=None, help="Exceed a soft read budget, with this logged reason.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
@tracker_options
def run_cmd(protocol_path: Path, checkpoint: Path, split: str, backend: str, seed: int | None,
            train_run: str | None, train_seed: int | None, step: int | None, purpose: str, actor: str | None,
            override_reason: str | None, device: str | None, backend_option: tuple[str, ...], as_json: bool,
            trackers: list[Any]) -> None:
    """Evaluate a checkpoint on a split under a frozen protocol."""
    from evalgate.run import RunOptions, evaluate

    opts = RunOptions(backend=backend, seed=seed, train_run=train_run, train_seed=train_seed, step=step,
                      purpose=purpose, actor=actor, override_reason=override_reason,
                      backend_options=backend_options_of(backend, backend_option, device),
                      progress=not as_json)
    doc = evaluate(protocol_path, checkpoint, split, opts)
    export_and_say([doc["run_id"]], trackers, actor)
    if as_json:
        _dump(doc)
        return
    m = doc["metrics"]
    ks = [k for k in m if k.startswith("pass@") and not k.endswith("_stderr")]
    click.echo(f"run {doc['run_id']}: {doc['protocol']['name']}@{doc['protocol']['version']} on "
               f"{doc['split']['name']} ({doc['split']['tier']}), {doc['counts']['samples']} samples "
               f"({doc['counts']['cached']} cached) in {doc['wall_s']:.1f} s")
    for k in ks:
        click.echo(f"  {k} = {pm(m[k], m.get(k + '_stderr'))} (± stderr, n {doc['counts']['items']} items)")
    click.echo(f"  mean completion tokens {num(m['mean_completion_tokens'], 1)}, "
               f"truncation rate {pct(m['truncation_rate'])}")
