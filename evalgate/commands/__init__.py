"""Shared pieces of the command line: the error handler every command wears, the JSON printer and the workspace
every command acts in.

Each command area lives in its own module here (``evalgate/commands/<area>.py``) and is attached to the ``evalgate``
group in ``evalgate/cli.py`` with one ``main.add_command(...)`` line; exit codes are documented in ``evalgate.cli``.
"""

from __future__ import annotations

import functools
import io
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

from evalgate.core.errors import EvalgateError, Terminated
from evalgate.workspace import Workspace

__all__ = ["dump", "handle_errors", "json_stdout", "workspace"]

_JSON_OUT: list[TextIO] = []  # the real stdout while a --json command runs (json_stdout), innermost last


def workspace(actor: str | None = None) -> Workspace:
    """The workspace a command acts in (``Workspace.from_env``: the ``EVALGATE_*`` variables'), with ``actor`` (a
    command's ``--actor``) as who acts where given. Every command takes its store, actor and directories from it
    and hands them down; none opens a ``Store()`` of its own."""
    return Workspace.from_env(actor)


def _json_value(value: Any) -> Any:
    """A value ``json`` cannot write: a typed result or row (anything with ``as_dict()``: a store row, ``Metrics``, a
    ``Result``) as its document, anything else (a datetime, a path) as its ``str``."""
    as_dict = getattr(value, "as_dict", None)
    return as_dict() if callable(as_dict) else str(value)


def dump(doc: Any) -> None:
    """Print ``doc`` as one indented JSON document on stdout (a typed row or result as its ``as_dict()``, other
    non-JSON values through ``str``); inside ``json_stdout``, on the real stdout saved there."""
    click.echo(json.dumps(doc, indent=2, default=_json_value), file=_JSON_OUT[-1] if _JSON_OUT else None)


@contextmanager
def json_stdout(enabled: bool) -> Iterator[None]:
    """While a ``--json`` command runs, send everything else written to stdout to stderr, so stdout carries only the
    JSON document ``dump`` prints.

    "Everything" includes what Python code and libraries' loggers print (``sys.stdout`` points at ``sys.stderr``)
    and what child processes write: vLLM's engine core runs in a child process that inherits file descriptor 1 and
    logs there, so descriptor 1 itself is pointed at descriptor 2 (``os.dup2``) and ``dump`` writes to a duplicate
    of the original. Both are restored when the block ends. Where ``sys.stdout`` has no descriptor (click's
    ``CliRunner``, pytest's capture) only the Python-level redirection applies.
    """
    if not enabled:
        yield
        return
    real = sys.stdout
    real.flush()
    try:
        fd: int | None = real.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = None
    saved = os.dup(fd) if fd is not None else None
    out = real if saved is None else open(saved, "w", encoding=getattr(real, "encoding", None) or "utf-8")
    if fd is not None:
        os.dup2(sys.stderr.fileno(), fd)
    _JSON_OUT.append(out)
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = real
        _JSON_OUT.pop()
        if fd is not None and saved is not None:
            try:
                out.flush()
            finally:
                os.dup2(saved, fd)
                out.close()


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn EvalgateError into ``error: message`` on stderr and its exit code; anything else exits 3. A reader that
    closes stdout early (``evalgate audit | head -1``) ends the command quietly with exit 141; Ctrl-C exits 130, SIGTERM
    143 (both mark a run in progress interrupted: ``_sigterm_as_interrupt``). A ``--json`` command that fails also
    prints ``{"error": message, "exit_code": code}`` on stdout, so a caller parsing stdout always gets one JSON
    document, and nothing else is written to stdout while it runs (``json_stdout``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                with json_stdout(kwargs.get("as_json", False)), _sigterm_as_interrupt():
                    return fn(*args, **kwargs)
            finally:
                sys.stdout.flush()  # so a closed pipe shows up here, not as a traceback at interpreter exit
        except BrokenPipeError:
            _stdout_closed()
        except KeyboardInterrupt as e:  # the shell convention 128 + signal, not click's exit 1 (= gate FAIL)
            what, sig = ("terminated (SIGTERM)", signal.SIGTERM) if isinstance(e, Terminated) else \
                ("interrupted (Ctrl-C)", signal.SIGINT)
            _fail(f"{what}; a run stopped this way is marked interrupted and resumes from its stored samples when "
                  "run again", 128 + sig, kwargs.get("as_json", False))
        except EvalgateError as e:
            if workspace().env.debug:
                raise
            _fail(f"error: {e.message}", e.exit_code, kwargs.get("as_json", False), e.message)
        except click.exceptions.Exit:
            raise
        except Exception as e:  # noqa: BLE001 - the documented exit code for internal errors
            if workspace().env.debug:
                raise
            _fail(f"internal error: {type(e).__name__}: {e} (set EVALGATE_DEBUG=1 for the traceback)", 3,
                  kwargs.get("as_json", False), f"{type(e).__name__}: {e}")

    return wrapper


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (a ``KeyboardInterrupt``) in the main thread, as Ctrl-C raises
    ``KeyboardInterrupt``: a preempted job (Slurm, Kubernetes) marks its run interrupted at once and resumes later,
    where Python's default action ended the process and left the run ``running``. Only where SIGTERM has its
    default action (a command that handles it itself, such as ``watch``, sets its own handler inside), and only in
    the main thread (where signal handlers can be set)."""
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


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
