"""Click options that several commands share, declared once: the run options (backend, sampling seed, device, actor,
backend options), the output-file path type and ``--expect-head``.

A command wears the decorator instead of repeating the ``@click.option`` lines, so a flag's name, type, default and
help are the same wherever it appears::

    @click.command("run")
    @run_options()
    @handle_errors
    def run_cmd(..., backend: str, seed: int | None, device: str | None, actor: str | None,
                backend_option: tuple[str, ...]) -> None:
        opts = RunOptions(..., backend_options=backend_options_of(backend, backend_option, device))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from evalgate.core.outfile import OutFile

__all__ = ["OUT_FILE", "actor_option", "backend_options_of", "expect_head_option", "parse_expect_head",
           "run_options", "seed_option"]

F = TypeVar("F", bound=Callable[..., Any])

# a file written: a directory there, or a folder on its way that is a file, is refused while the flags are parsed
OUT_FILE = OutFile()

SEED_HELP = "Sampling seed, 0 to 2**63-1 (default: the protocol's)."
DEVICE_HELP = "Device option of backends that have one (hf: cpu, cuda, cuda:N; default cpu); refused for others."
BACKEND_OPTION_HELP = "Backend option, repeatable (e.g. base_url=http://127.0.0.1:8000/v1, tensor_parallel_size=2)."
EXPECT_HEAD_HELP = ("SEQ:HASH printed by an earlier 'audit verify' or 'audit' (default $EVALGATE_EXPECT_HEAD); "
                    "also detects deleted final rows and a store rolled back to an older copy.")


def _stack(fn: F, decorators: list[Callable[[F], F]]) -> F:
    """Apply ``decorators`` so that they appear in ``--help`` in list order."""
    for d in reversed(decorators):
        fn = d(fn)
    return fn


def seed_option() -> Callable[[F], F]:
    """``--seed``: the sampling seed (an int 0 to 2**63-1, or None for the protocol's); parameter ``seed``."""
    return click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None, help=SEED_HELP)


def actor_option() -> Callable[[F], F]:
    """``--actor``: who the access log names for this command's reads (default: ``$EVALGATE_ACTOR``, else the OS
    user); parameter ``actor``."""
    return click.option("--actor", default=None)


def run_options(*, seed: bool = True) -> Callable[[F], F]:
    """The options of a command that evaluates through a backend (run, sweep, watch, preflight): ``--backend``
    (default hf), ``--seed`` (unless ``seed=False``), ``--actor``, ``--device`` and ``--backend-option KEY=VALUE``
    (repeatable). The command's parameters are ``backend``, ``seed``, ``actor``, ``device`` and ``backend_option``;
    ``backend_options_of`` turns the last three into the backend's options."""
    decorators: list[Callable[[F], F]] = [click.option("--backend", default="hf", show_default=True)]
    if seed:
        decorators.append(seed_option())
    decorators += [actor_option(),
                   click.option("--device", default=None, help=DEVICE_HELP),
                   click.option("--backend-option", "backend_option", multiple=True, metavar="KEY=VALUE",
                                help=BACKEND_OPTION_HELP)]
    return lambda fn: _stack(fn, decorators)


def backend_options_of(backend: str, backend_option: tuple[str, ...], device: str | None) -> dict[str, Any]:
    """The backend options a ``run_options`` command was given: ``--backend-option`` pairs parsed, ``--device``
    added where the backend has a device option.

    Raises:
        BadInput: a pair that is not KEY=VALUE, or ``--device`` for a backend without a device option.
    """
    from evalgate.backends.base import parse_backend_options, with_flags

    return with_flags(backend, parse_backend_options(backend_option), device=device)


def expect_head_option(help: str = EXPECT_HEAD_HELP) -> Callable[[F], F]:  # noqa: A002 - click's name
    """``--expect-head SEQ:HASH``: the access-log head the caller pinned earlier; parameter ``expect_head``."""
    return click.option("--expect-head", default=None, help=help)


def parse_expect_head(text: str | None) -> tuple[int, str] | None:
    """``--expect-head``, else ``$EVALGATE_EXPECT_HEAD``, parsed (``access.log.parse_head``); None when neither is set.

    Raises:
        BadInput: the text is not SEQ:HASH.
    """
    from evalgate.access.log import parse_head
    from evalgate.commands import workspace

    if text:
        return parse_head(text)
    env = workspace().env.expect_head
    return parse_head(env, "$EVALGATE_EXPECT_HEAD") if env else None
