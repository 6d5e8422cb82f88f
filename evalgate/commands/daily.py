"""Daily-use commands: ``evalgate samples`` (what the model wrote in a run) and ``evalgate compare`` (what changed
between two runs), through ``Workspace.samples`` and ``Workspace.compare`` (``evalgate.views.samples``)."""

from __future__ import annotations

import click

from evalgate.commands import dump, handle_errors, workspace
from evalgate.core.formatting import num


def _short(text: str | None, width: int, tail: bool = False) -> str:
    """``text`` on one line, cut to ``width`` characters at its end (or, with ``tail``, keeping its end)."""
    if text is None:
        return "(not stored)"
    one = text.replace("\n", "\\n")
    if len(one) <= width:
        return one
    return "..." + one[3 - width:] if tail else one[:width - 3] + "..."


@click.command("samples")
@click.argument("run_id")
@click.option("--item", default=None, help="Only this item id.")
@click.option("--status", default=None,
              help="Only samples with this status: correct, wrong, truncated, no_answer, timeout, error, judged, "
              "judge_unparseable, scored (a reward model's), tie (a judge on preference pairs) or "
              "tool_violation.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most N samples.")
@click.option("--full", is_flag=True, help="Print prompts and completions whole (default: cut to one line).")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def samples_cmd(run_id: str, item: str | None, status: str | None, limit: int | None, full: bool,
                actor: str | None, as_json: bool) -> None:
    """Show a run's samples: rendered prompt, completion, extracted answer, score and status. A logged read of the
    run's split; refused (exit 2, logged) for private and human-audit splits."""

    doc = workspace(actor).samples(run_id, item, status, limit)
    if as_json:
        dump(doc.as_dict())
        return
    counts = ", ".join(f"{k} {n}" for k, n in sorted(doc.counts.items()))
    click.echo(f"run {run_id}: {doc.protocol} on {doc.split} ({doc.tier}), {doc.checkpoint_path}")
    click.echo(f"  statuses: {counts}; showing {doc.shown} of {doc.total}")
    for s in doc.samples:
        tokens = "" if s.completion_tokens is None else f", {s.completion_tokens} tokens"
        click.echo(f"\n{s.item_id}#{s.sample_index}  {s.status}  score {num(s.score)}  "
                   f"extracted {s.extracted!r}  (finish {s.finish_reason}{tokens})")
        if s.detail:
            click.echo(f"  detail:     {s.detail}")
        if full:
            click.echo(f"  prompt:\n{s.prompt}\n  completion:\n{s.completion}")
        else:
            click.echo(f"  prompt:     {_short(s.prompt, 100, tail=True)}")  # its end holds the item
            click.echo(f"  completion: {_short(s.completion, 100)}")


@click.command("compare")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--limit", type=click.IntRange(0), default=50, show_default=True,
              help="Print at most N changed samples (the counts cover all).")
@click.option("--actor", default=None)
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def compare_cmd(run_a: str, run_b: str, limit: int, actor: str | None, as_json: bool) -> None:
    """Samples whose status changed between two runs of one protocol on one split (paired by item id and sample
    index), with counts and an exact McNemar test on correct / not correct."""

    ws = workspace(actor)
    doc = ws.compare(run_a, run_b)
    if as_json:
        dump(doc.as_dict())
        return
    from evalgate.views.runs import results_table, runs_by_id

    for key, r in (("a", doc.a), ("b", doc.b)):
        where = "" if r.step is None else f" [{r.train_run} seed {r.train_seed} step {r.step}]"
        click.echo(f"{key}: run {r.run_id}  {r.checkpoint_path}{where}")
    click.echo(results_table(runs_by_id([doc.a.run_id, doc.b.run_id], ws.store), labels=["a", "b"]))
    click.echo(f"{doc.protocol} on {doc.split}: {doc.pairs} paired samples"
               + (f" ({doc.unpaired} without a partner, left out)" if doc.unpaired else ""))
    click.echo(f"  both correct {doc.both_correct}, both not correct {doc.both_not_correct}, "
               f"only a correct {doc.a_only_correct}, only b correct {doc.b_only_correct}")
    click.echo(f"  exact McNemar test (two-sided) on the {doc.a_only_correct + doc.b_only_correct} "
               f"discordant pairs: p = {doc.mcnemar_p:.4g}")
    click.echo(f"  {doc.changed} changed status"
               + (": " + ", ".join(f"{k} {n}" for k, n in doc.transitions.items()) if doc.transitions else ""))
    for c in doc.rows[:limit]:
        click.echo(f"    {c.item_id}#{c.sample_index}: {c.a_status} -> {c.b_status}")
    if len(doc.rows) > limit:
        click.echo(f"    ... {len(doc.rows) - limit} more (--limit, or --json for all)")
