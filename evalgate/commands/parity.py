"""``evalgate parity``: the same prepared requests through two backends, and their drift
(``evalgate.runner.parity``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalgate.commands import dump as _dump
from evalgate.commands import handle_errors, workspace
from evalgate.commands.options import actor_option, seed_option


@click.command("parity")
@click.option("--protocol", "protocol_path", required=True, type=click.Path(path_type=Path))
@click.option("--checkpoint", required=True, type=click.Path(path_type=Path), help="HF directory or .gguf file.")
@click.option("--split", required=True)
@click.option("--a", "backend_a", default="hf", show_default=True, help="First backend.")
@click.option("--b", "backend_b", default="openai", show_default=True, help="Second backend.")
@click.option("--a-option", multiple=True, metavar="KEY=VALUE", help="Option of backend a, repeatable.")
@click.option("--b-option", multiple=True, metavar="KEY=VALUE", help="Option of backend b, repeatable.")
@seed_option()
@click.option("--limit", type=int, default=None, help="Compare only the first N items.")
@actor_option()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def parity_cmd(protocol_path: Path, checkpoint: Path, split: str, backend_a: str, backend_b: str,
               a_option: tuple[str, ...], b_option: tuple[str, ...], seed: int | None, limit: int | None,
               actor: str | None, as_json: bool) -> None:
    """Generate with two backends and report drift; exit 0 if every sample is identical, 1 otherwise."""
    from evalgate.backends.base import parse_backend_options
    from evalgate.runner.parity import parity

    ws = workspace(actor)
    doc = parity(protocol_path, checkpoint, split, backend_a, backend_b, parse_backend_options(a_option),
                 parse_backend_options(b_option), seed, limit, ws.actor, store=ws.store,
                 progress=not as_json)
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
