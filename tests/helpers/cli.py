"""The CLI in this process (click's ``CliRunner``), for tests of a command's behaviour: exit code, stdout, stderr.
A real subprocess only where the process is the point (a fresh interpreter's imports and plugins, signals, several
processes at once, what a shell or CI log sees)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner, Result


def cli(*args: str | Path, input: str | None = None, env: Mapping[str, str | None] | None = None,
        raise_escaped: bool = True) -> Result:
    """``evalgate ARGS`` run in this process: click's ``Result`` (``exit_code``; ``stdout`` and ``stderr`` apart;
    ``output`` both as written). ``env``: variables set (None: unset) for the call only. An exception the command
    did not turn into an exit code is raised here (``raise_escaped``), so that it cannot pass for one."""
    from evalgate.cli import main

    r = CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)
    if raise_escaped and r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r


def cli_out(*args: str | Path, **kw: object) -> tuple[int, str]:
    """``cli(ARGS)``'s exit code and its stdout followed by its stderr."""
    r = cli(*args, **kw)  # type: ignore[arg-type]
    return r.exit_code, r.stdout + r.stderr


def cli_parts(*args: str | Path, **kw: object) -> tuple[int, str, str]:
    """``cli(ARGS)``'s exit code, stdout and stderr."""
    r = cli(*args, **kw)  # type: ignore[arg-type]
    return r.exit_code, r.stdout, r.stderr
