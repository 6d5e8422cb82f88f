"""Progress bars of the libraries evalgate drives (transformers, huggingface_hub), switched with evalgate's own.

``evalgate run --json`` (``RunOptions.progress=False``) must leave stderr free of progress bars, including those
drawn while a checkpoint is loaded ("Loading weights") or a GGUF file is converted. transformers and
huggingface_hub each have a process-wide switch; ``progress_bars`` sets both for the duration of a block and
restores them after, so a library caller's own setting survives. transformers' GGUF loader draws its bar with tqdm
directly, past that switch; ``gguf_conversion_bars`` makes it follow the switch.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Within the block, transformers' and huggingface_hub's progress bars are off unless ``enabled``.

    ``enabled=True`` changes nothing (a user who turned them off, e.g. ``HF_HUB_DISABLE_PROGRESS_BARS=1``, keeps
    them off). transformers is not imported here (a fully cached run never needs it): if it is imported within the
    block it starts with its bars off, as it reads huggingface_hub's switch at import.
    """
    if enabled:
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
