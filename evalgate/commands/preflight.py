"""``evalgate preflight``: the reward histogram of the base policy before training (``evalgate.training.preflight``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.commands.options import OUT_FILE, backend_options_of, run_options
from evalgate.core.formatting import pct


@click.command("preflight")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="The base policy (HF dir or .gguf).")
@click.option("--split", required=True, help="The training prompts' split (or a sample of them).")
@click.option("--samples", type=click.IntRange(1), default=None,
              help="Samples per prompt K (default: the protocol's n; more runs the protocol with further seeds).")
@click.option("--max-zero-variance", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Exit 1 when the share of prompts whose samples all score the same is above this.")
@run_options(seed=False)
@click.option("--report", "report_path", type=OUT_FILE, default=None,
              help="Write a self-contained HTML report with the histogram.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def preflight_cmd(protocol_path: Path, checkpoint: Path, split: str, samples: int | None, max_zero_variance: float,
                  backend: str, actor: str | None, device: str | None, backend_option: tuple[str, ...],
                  report_path: Path | None, as_json: bool) -> None:
    """Sample the base policy on the training prompts and report the reward histogram: per-prompt pass rates,
    zero-variance shares (all correct / all wrong: no GRPO gradient), mean and spread, trivial baselines under the
    same scorer, and the verdicts too sparse / too lenient / heavy tail / sign confusion. Exit 1 when the
    zero-variance share is above --max-zero-variance."""
    from evalgate.runner.evaluate import RunOptions
    from evalgate.training.preflight import format_summary, preflight, write_report

    opts = RunOptions(backend=backend, purpose="preflight", actor=actor, progress=not as_json,
                      backend_options=backend_options_of(backend, backend_option, device))
    res = preflight(protocol_path, checkpoint, split, samples, opts, store=workspace(actor).store)
    if report_path is not None:
        write_report(res, report_path)
    if as_json:
        dump({**res.as_dict(), "max_zero_variance": max_zero_variance,
              "exit_code": int(res.zero_variance > max_zero_variance)})
    else:
        click.echo(format_summary(res))
        if report_path is not None:
            click.echo(f"report: {report_path}")
    if res.zero_variance > max_zero_variance:
        click.echo(f"zero-variance share {pct(res.zero_variance)} > --max-zero-variance {pct(max_zero_variance)}",
                   err=True)
        sys.exit(1)
