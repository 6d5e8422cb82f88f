"""``evalgate run``: evaluate one checkpoint on one split under a frozen protocol (``evalgate.runner.evaluate``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.commands.options import backend_options_of, run_options
from evalgate.core.formatting import num, pct, pm
from evalgate.trackers.cli import export_and_say, tracker_options

if TYPE_CHECKING:
    from evalgate.runner.record import RunRecord


@click.command("run")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@run_options()
@click.option("--train-run", default=None)
@click.option("--train-seed", type=int, default=None)
@click.option("--step", type=click.IntRange(min=0), default=None,
              help="Training step of the checkpoint (default: from its checkpoint-N folder).")
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
    from evalgate.runner.evaluate import RunOptions

    opts = RunOptions(backend=backend, seed=seed, train_run=train_run, train_seed=train_seed, step=step,
                      purpose=purpose, actor=actor, override_reason=override_reason,
                      backend_options=backend_options_of(backend, backend_option, device),
                      progress=not as_json)
    ws = workspace(actor)
    run = ws.evaluate(protocol_path, checkpoint, split, opts)
    export_and_say([run.run_id], trackers, actor, ws.store)
    if as_json:
        _dump(run.as_dict())
    else:
        _print_run(run)


def _print_run(run: RunRecord) -> None:
    """The run's text output: what was read and how long it took, then pass@k +- stderr (mean_score +- stderr for
    a scorer without pass@k: a judge, a reward model), a judge's own summary, and the behaviour metrics."""
    from evalgate.core.results import Metrics
    from evalgate.runner.record import RunCounts

    m, counts, seconds = run.metrics or Metrics(), run.counts or RunCounts(), run.wall_s
    click.echo(f"run {run.run_id}: {run.protocol.name}@{run.protocol.version} on {run.split.name} ({run.split.tier}), "
               f"{counts['samples']} samples ({counts['cached']} cached) in {seconds:.1f} s")
    for k, est in m.pass_at.items():
        click.echo(f"  pass@{k} = {pm(est.value, est.stderr)} (± stderr, n {counts['items']} items)")
    if not m.pass_at and (score := m.mean_score) is not None:
        click.echo(f"  mean_score = {pm(score.value, score.stderr)} (± stderr, n {counts['items']} items)")
    if isinstance(judge := m.get("judge"), dict):
        click.echo(f"  judge: {_judge_line(judge)}")
    click.echo(f"  mean completion tokens {num(m['mean_completion_tokens'], 1)}, "
               f"truncation rate {pct(m['truncation_rate'])}")


def _judge_line(judge: dict[str, Any]) -> str:
    """A judge run's summary (``metrics["judge"]``, ``rlhf.judge.judge_metrics``): pointwise the mean rating on
    its scale, pairwise the win rate with its CI and the length-controlled win rate; the unparseable count."""
    bad = f"{judge.get('unparseable', 0)} of {judge.get('judged', 0)} unparseable"
    if judge.get("mode") == "pointwise":
        low, high = judge.get("scale") or (None, None)
        return (f"mean rating {num(judge.get('mean_rating'), 2)} on [{low}, {high}] ({bad}, counted as the scale "
                "minimum)")
    w = judge.get("pairwise") or {}
    return (f"win rate {num(w.get('win_rate'))} [{num(w.get('low'))}, {num(w.get('high'))}], LC win rate "
            f"{pm(w.get('lc_win_rate'), w.get('lc_standard_error'))}, position flip rate "
            f"{num(w.get('position_flip_rate'))} ({w.get('unparseable_items', 0)} of {w.get('items', 0)} items "
            "unparseable, counted as losses)")

