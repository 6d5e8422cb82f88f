"""Write docs/CLI.md, the command reference, from the click commands themselves.

Usage: ``python tools/cli_docs.py > docs/CLI.md`` (``tests/test_docs.py`` fails while the checked-in page differs).

The group is the one ``pyproject.toml`` declares as the ``evalgate`` script, walked recursively, so the page
follows the commands wherever their modules live. Each command gets a heading and its ``--help`` text exactly as
``evalgate ... --help`` prints it, at a fixed width of 100 columns (so the page does not depend on the terminal that
generated it). Hidden commands are left out, as ``--help`` leaves them out.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 100
REGENERATE = "python tools/cli_docs.py > docs/CLI.md"


def entry_point_group(pyproject: Path = ROOT / "pyproject.toml") -> click.Command:
    """The click object behind the ``evalgate`` console script.

    Args:
        pyproject: the project file whose ``[project.scripts]`` names it (``module:attribute``).

    Returns:
        The click group (or command) that ``evalgate`` runs.

    Raises:
        KeyError: when ``pyproject.toml`` declares no ``evalgate`` script.
    """
    target = tomllib.loads(pyproject.read_text())["project"]["scripts"]["evalgate"]
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def _context(cmd: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """A context for ``cmd`` as click makes one (its ``context_settings`` applied), at the page's fixed width."""
    settings = {**cmd.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    return click.Context(cmd, info_name=name, parent=parent, **settings)


def walk(cmd: click.Command, ctx: click.Context) -> Iterator[tuple[click.Command, click.Context]]:
    """Yield ``cmd`` and every visible subcommand below it, depth first, subcommands in name order.

    Args:
        cmd: a click command or group.
        ctx: the context ``cmd`` runs in (its parents give the full command path).
    """
    yield cmd, ctx
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from walk(sub, _context(sub, name, ctx))


def render(group: click.Command | None = None) -> str:
    """The whole of docs/CLI.md as text.

    Args:
        group: the root command; default: the ``evalgate`` console script's group.

    Returns:
        Markdown: a short preamble, then per command a heading and its ``--help`` in a text block.
    """
    group = group or entry_point_group()
    root = _context(group, "evalgate", None)
    lines = ["# Command reference", "",
             f"<!-- Generated from the click commands by `{REGENERATE}`; do not edit (tests/test_docs.py checks "
             "it). -->", "",
             "Every `evalgate` command with its `--help`. Exit codes, `--json` and where things live, which every "
             "command shares: [CONFIG.md](CONFIG.md).", ""]
    for cmd, ctx in walk(group, root):
        path = ctx.command_path
        lines += [f"{'#' * min(path.count(' ') + 2, 4)} `{path}`", "", "```text", cmd.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
