"""Commands for blind rating in the browser: ``evalgate audit add-rater``, ``evalgate audit batch create`` and
``evalgate serve`` (the library is ``evalgate.human.rating`` and ``evalgate.human.web``)."""

from __future__ import annotations

from pathlib import Path

import click

from evalgate.commands import dump, handle_errors, workspace

DEFAULT_PORT = 8765


@click.command("add-rater")
@click.argument("name")
@click.option("--admin", is_flag=True, help="May open the dashboard and the agreement page.")
@click.option("--url", "base_url", default=f"http://127.0.0.1:{DEFAULT_PORT}", show_default=True,
              help="Where 'evalgate serve' is reached, for the printed URL.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def add_rater_cmd(name: str, admin: bool, base_url: str, as_json: bool) -> None:
    """Add a rater (or give one a new token: the old one stops working) and print their login URL."""
    from evalgate.human.rating import add_rater

    ws = workspace()
    res = add_rater(name, admin=admin, base_url=base_url, store=ws.store, actor=ws.actor)
    if as_json:
        dump(res)
        return
    click.echo(f"{'new token for' if res['replaced'] else 'added'} {res['role']} {name}; send them this URL (it "
               "holds their token, shown only now):", err=True)
    click.echo(res["url"])


@click.group("batch")
def batch_cmd() -> None:
    """Rating batches: samples of a run for blind human scoring in 'evalgate serve'."""


@batch_cmd.command("create")
@click.option("--run", "run_id", required=True, help="A complete run on a human-audit split.")
@click.option("--samples", default=50, show_default=True, help="How many of the run's samples.")
@click.option("--stratify", type=click.Choice(["score"]), default=None,
              help="Draw the same share of each automatic-score value.")
@click.option("--rubric", "rubric_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Text or Markdown file shown to raters.")
@click.option("--scale", default="1-5", show_default=True, help="Integer score scale MIN-MAX within 0..9.")
@click.option("--seed", type=int, default=None, help="Selection seed (default: drawn and recorded).")
@click.option("--show-gold", is_flag=True,
              help="Raters see the item's gold answer (the fields the protocol's prompt does not render) below the "
                   "question; default: only what the model saw.")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def batch_create_cmd(run_id: str, samples: int, stratify: str | None, rubric_file: Path | None, scale: str,
                     seed: int | None, show_gold: bool, as_json: bool) -> None:
    """Make a rating batch from a run's samples."""
    from evalgate.human.rating import create_batch

    ws = workspace()
    res = create_batch(run_id, samples, stratify, rubric_file, scale, seed, store=ws.store, actor=ws.actor,
                       show_gold=show_gold)
    if as_json:
        dump(res)
    else:
        click.echo(f"batch {res['batch_id']}: {res['samples']} samples of run {run_id} on {res['split']}, scale "
                   f"{res['scale'][0]}..{res['scale'][1]}")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback unless you say).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(1, 65535))
@click.option("--url", default=None, help="The address raters open, e.g. https://rate.example:8765 behind a proxy "
              "(default http://HOST:PORT; needed with a wildcard --host): forms from any other origin are refused.")
@handle_errors
def serve_cmd(host: str, port: int, url: str | None) -> None:
    """Serve the rating queue, agreement page and read-only dashboard (tokens from 'evalgate audit add-rater')."""
    from evalgate.human.web import serve

    click.echo(f"evalgate serve on http://{host}:{port} (Ctrl-C stops)", err=True)
    serve(host, port, store=workspace().store, url=url)


@click.command("reward")
@click.option("--run", "run_id", required=True, help="The run whose samples are audited.")
@click.option("--rollouts", type=click.Path(path_type=Path), default=None,
              help="JSONL of training rollouts with 'reward' (default: the automatic score stands in).")
@click.option("--baseline-run", default=None, help="The baseline's run on the same split (for length inflation).")
@click.option("--policy", "policy_path", type=click.Path(path_type=Path), default=None,
              help="Gate policy whose reward_audit thresholds apply (default: the chapter's).")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def reward_cmd(run_id: str, rollouts: Path | None, baseline_run: str | None, policy_path: Path | None,
               as_json: bool) -> None:
    """Reward audit of a run: suspicious samples by the chapter's rule and reward-human agreement. Exit 1 when the
    policy's min_reward_human_spearman rule fails."""
    import sys

    from evalgate.rlhf.reward_audit import reward_audit

    rules = None
    if policy_path is not None:
        from evalgate.gate import load_policy

        rules = load_policy(policy_path, resolve_paths=False).reward_audit
    ws = workspace()
    res = reward_audit(ws.store, run_id, rules, rollouts, baseline_run, ws.actor)
    if as_json:
        dump(res)
    else:
        click.echo(f"run {run_id}: {res['checked']} samples, reward = {res['reward_source']}; suspicious "
                   f"{len(res['suspicious'])} (" + ", ".join(f"{k} {n}" for k, n in res["counts"].items()) + ")")
        for s in res["suspicious"]:
            click.echo(f"  {s['item_id']} #{s['sample_index']}: {', '.join(s['reasons'])}")
        for why in res["not_checkable"]:
            click.echo(f"  not checkable: {why}")
        click.echo(f"rule: {res['rule']['detail']}")
    sys.exit(1 if res["rule"]["passed"] is False else 0)
