"""``evalgate runs``: list the stored runs, or one table per training run by step (``evalgate.views.runs``)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.core.formatting import pm


@click.command("runs")
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
    from evalgate.views.runs import by_step as step_tables
    from evalgate.views.runs import select_runs

    where = " ".join(f"{flag} {shlex.quote(str(v))}" for flag, v in (
        ("--status", status), ("--split", split), ("--protocol", protocol_name), ("--train-run", train_run),
        ("--train-seed", train_seed), ("--checkpoint", checkpoint)) if v is not None)
    ws = workspace()
    rows = select_runs(ws.store, status=status, split=split, protocol_name=protocol_name, train_run=train_run,
                       train_seed=train_seed, checkpoint=checkpoint)
    if split is not None and not rows:
        from evalgate.core.errors import BadInput
        from evalgate.splits.discovery import list_manifests

        known = [m.name for m in list_manifests(ws.splits)]
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
        _dump([r.as_dict() for r in rows])
        return
    if not rows:
        click.echo("no runs" + (f" matching {where}" if where else ""))
        return
    for r in rows:
        m: Mapping[str, Any] = r.metrics or {}
        c = r.counts or {}
        score = next((f"{k} {pm(m[k], m.get(k + '_stderr'))}" for k in ("pass@1", "mean_score") if k in m), "-")
        train = "" if r.train_run is None and r.train_seed is None else \
            f" [{r.train_run or '?'} seed {'?' if r.train_seed is None else r.train_seed}]"
        ckpt = Path(r.checkpoint_path).name + (f" (step {r.step})" if r.step is not None else "") + train
        cached = f"{c['cached']}/{c['samples']} cached" if c and "cached" in c else ""
        click.echo(f"{r.run_id}  {r.status:<11} {r.protocol_name}@{r.protocol_version}  "
                   f"{r.split} ({r.tier})  {ckpt}  seed {r.sampling_seed}  {score}  {cached}".rstrip())
        if r.status in ("failed", "interrupted") and r.error:
            click.echo(f"    {r.error[:200]}")
