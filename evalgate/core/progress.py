"""Progress: evalgate's own bars and stage lines (``bar``, ``stage``), and the bars of the libraries it drives
(transformers, huggingface_hub), switched with evalgate's own.

Every bar evalgate draws is a tqdm bar on stderr made by ``bar``. On a terminal it is a live bar. Anywhere else (a
CI log, a pipe, a file) it writes whole lines instead, with no carriage return: one when it starts, at most one
every ``LOG_INTERVAL_S`` seconds, and one when it ends, so a log shows what ran and how far it got without a line
per sample. ``stage`` says, on stderr, what a long step is about to do.

``evalgate run --json`` (``RunOptions.progress=False``) must leave stderr free of progress bars, including those
drawn while a checkpoint is loaded ("Loading weights") or a GGUF file is converted. transformers and
huggingface_hub each have a process-wide switch; ``progress_bars`` sets both for the duration of a block and
restores them after, so a library caller's own setting survives. transformers' GGUF loader draws its bar with tqdm
directly, past that switch; ``gguf_conversion_bars`` makes it follow the switch.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

LOG_INTERVAL_S = 30.0
"""Seconds between two lines of a bar that is not on a terminal."""


def _on_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class _Lines(io.TextIOBase):
    """A text stream for tqdm off a terminal: each status tqdm draws (after a carriage return, padded with blanks)
    becomes one line of its own; blank ones are dropped."""

    def __init__(self, out: Any):
        self.out = out

    @property
    def encoding(self) -> str:  # type: ignore[override]  # tqdm reads it to choose unicode or ascii bars
        return getattr(self.out, "encoding", None) or "utf-8"

    def write(self, s: str) -> int:
        for part in s.replace("\r", "\n").split("\n"):
            if part.strip():
                self.out.write(part.rstrip() + "\n")
        return len(s)

    def flush(self) -> None:
        self.out.flush()


@functools.cache
def _log_bar() -> type[tqdm]:
    """tqdm for a bar off a terminal: a new postfix waits for the next line instead of drawing one at once.
    (tqdm is imported when a bar is made: a fully cached run draws none.)"""
    from tqdm import tqdm

    class LogBar(tqdm):  # type: ignore[type-arg]
        def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
            super().set_postfix_str(s, refresh=False)

    return LogBar


def bar(total: int | None, desc: str, unit: str = "it", enabled: bool = True, leave: bool = False) -> tqdm:
    """A progress bar on stderr (tqdm; use it as a context manager or ``close`` it).

    Args:
        total: how many ``unit`` the work has (None: unknown, a counter).
        desc: what is counted, shown first (``generate``, ``sweep``, ``training seed 1``).
        unit: the unit counted (``sample``, ``unit``, ``step``).
        enabled: False draws nothing (``--json``, ``RunOptions.progress=False``).
        leave: on a terminal, keep the finished bar on screen (off a terminal its last line always stays).

    Returns:
        A ``tqdm`` bar: a live one on a terminal, else one that writes a line at the start, at most one every
        ``LOG_INTERVAL_S`` seconds, and one at the end (``set_postfix_str`` then waits for the next line). Either
        redraws on ``update(0)`` once its interval has passed (a postfix that changed without the count).
    """
    from tqdm import tqdm

    err = sys.stderr
    if not enabled:
        return tqdm(total=total, desc=desc, unit=unit, file=err, disable=True)
    # miniters=0: a bar redraws by time alone. tqdm's default learns a count step from past updates and then skips
    # every redraw until the count moves that far, so a new postfix with no new count (the hf backend's "batch 1/2
    # at token 57/256" during a long batch, ``update(0)``) would never show.
    if _on_terminal(err):
        return tqdm(total=total, desc=desc, unit=unit, file=err, leave=leave, dynamic_ncols=True, miniters=0)
    return _log_bar()(total=total, desc=desc, unit=unit, file=_Lines(err), leave=True, mininterval=LOG_INTERVAL_S,
                       ascii=True, ncols=100, miniters=0)


def stage(line: str, enabled: bool = True) -> None:
    """Say on stderr, as one line, what a long step is about to do (nothing when not ``enabled``)."""
    if enabled:
        print(line, file=sys.stderr, flush=True)


_STAGES: ContextVar[bool] = ContextVar("evalgate_stages", default=False)


def stages_on() -> bool:
    """Whether the innermost ``progress_bars`` block has progress on: a long step deep in the library (a GGUF
    file's conversion) then says what it does with ``stage``. False outside any block (a library call says
    nothing) and under ``--json``."""
    return _STAGES.get()


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Within the block, transformers' and huggingface_hub's progress bars are off unless ``enabled`` and stderr is
    a terminal. Off a terminal (a CI log, a pipe) they would write a carriage-return redraw per step into the log
    (transformers' "Loading weights", the GGUF conversion's); evalgate's own bars (``bar``) write lines there, and
    ``stages_on()`` is ``enabled``, so a step whose library bar is off still says what it does.

    ``enabled=True`` on a terminal changes nothing (a user who turned them off, e.g.
    ``HF_HUB_DISABLE_PROGRESS_BARS=1``, keeps them off). transformers is not imported here (a fully cached run never
    needs it): if it is imported within the block it starts with its bars off, as it reads huggingface_hub's switch
    at import.
    """
    token = _STAGES.set(enabled)
    try:
        with _library_bars(enabled):
            yield
    finally:
        _STAGES.reset(token)


@contextmanager
def _library_bars(enabled: bool) -> Iterator[None]:
    """``progress_bars``' switch of the libraries' bars."""
    if enabled and _on_terminal(sys.stderr):
        yield
        return
    try:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:  # no huggingface_hub, so no transformers either: no library bars to silence
        yield
        return
    tf = sys.modules.get("transformers.utils.logging")
    tf_was_on = tf.is_progress_bar_enabled() if tf is not None else None
    hub_was_on = not are_progress_bars_disabled()
    if tf is not None:
        tf.disable_progress_bar()
    disable_progress_bars()
    try:
        yield
    finally:
        tf = sys.modules.get("transformers.utils.logging")
        if tf is not None and (hub_was_on if tf_was_on is None else tf_was_on):
            tf.enable_progress_bar()  # what it was, or what an import outside the block would have started with
        if hub_was_on:
            enable_progress_bars()
        else:
            disable_progress_bars()


@contextmanager
def gguf_conversion_bars() -> Iterator[None]:
    """Within the block, the "Converting and de-quantizing GGUF tensors" bar of transformers' GGUF loader is shown
    only when transformers' progress bars are on (``progress_bars``). The loader calls ``tqdm`` from its module
    namespace, which this replaces by a disabled one for the block; requires transformers (the caller converts
    with it)."""
    from transformers import modeling_gguf_pytorch_utils as gguf_loader
    from transformers.utils import logging as tf_logging

    original = getattr(gguf_loader, "tqdm", None)
    if tf_logging.is_progress_bar_enabled() or original is None:
        yield
        return
    gguf_loader.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        gguf_loader.tqdm = original
