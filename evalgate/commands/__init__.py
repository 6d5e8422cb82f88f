"""Shared pieces of the command line: the error handler every command wears and the JSON printer.

Each command area lives in its own module here (``evalgate/commands/<area>.py``) and is attached to the ``evalgate``
group in ``evalgate/cli.py`` with one ``main.add_command(...)`` line; exit codes are documented in ``evalgate.cli``.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from evalgate.errors import EvalgateError

__all__ = ["dump", "handle_errors"]


def dump(doc: Any) -> None:
    """Print ``doc`` as one indented JSON document on stdout (non-JSON values through ``str``)."""
    click.echo(json.dumps(doc, indent=2, default=str))


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn EvalgateError into ``error: message`` on stderr and its exit code; anything else exits 3. A reader
    that closes stdout early (``evalgate audit | head -1``) ends the command quietly with exit 141; Ctrl-C exits
    130. A ``--json`` command that fails also prints ``{"error": message, "exit_code": code}`` on stdout, so a
    caller parsing stdout always gets one JSON document."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return fn(*args, **kwargs)
            finally:
                sys.stdout.flush()  # so a closed pipe shows up here, not as a traceback at interpreter exit
        except BrokenPipeError:
            _stdout_closed()
        except KeyboardInterrupt:  # Ctrl-C: the shell convention 128 + SIGINT, not click's exit 1 (= gate FAIL)
            _fail("interrupted (Ctrl-C); a run stopped this way is marked interrupted and resumes from its stored "
                  "samples when run again", 128 + signal.SIGINT, kwargs.get("as_json", False))
        except EvalgateError as e:
            if os.environ.get("EVALGATE_DEBUG") == "1":
                raise
            _fail(f"error: {e.message}", e.exit_code, kwargs.get("as_json", False), e.message)
        except click.exceptions.Exit:
            raise
        except Exception as e:  # noqa: BLE001 - the documented exit code for internal errors
            if os.environ.get("EVALGATE_DEBUG") == "1":
                raise
            _fail(f"internal error: {type(e).__name__}: {e} (set EVALGATE_DEBUG=1 for the traceback)", 3,
                  kwargs.get("as_json", False), f"{type(e).__name__}: {e}")

    return wrapper


def _fail(line: str, code: int, as_json: bool, error: str | None = None) -> None:
    """Print ``line`` on stderr (and, for ``--json``, the error document on stdout), then exit ``code``."""
    click.echo(line, err=True)
    if as_json:
        dump({"error": error or line, "exit_code": code})
    sys.exit(code)


def _stdout_closed() -> None:
    """Exit quietly after the reader of stdout went away (Python docs, signal module, "Note on SIGPIPE"): point
    stdout at devnull so the flush at interpreter exit cannot fail again, and exit 141 (128 + SIGPIPE, what a shell
    reports for a command ended by a closed pipe; exit 1 would read as gate FAIL)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(128 + signal.SIGPIPE)
