"""The base of every scorer's options model (its own module, so an options model can live beside its scorer's
other light pieces, ``judge_options``, and ``base`` can register it without importing the scorer)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from evalgate.core.models import StrictModel


class ScorerOptions(StrictModel):
    """Base of every scorer's options (``scorer.options`` in a protocol file): unknown keys are errors (with the
    nearest known key), values are strict (``"no"`` is not a boolean) and immutable. Validated when the protocol is
    loaded, so ``protocol freeze`` refuses a typo."""

    model_config = ConfigDict(strict=True)

    def hashed(self, raw: dict[str, Any]) -> dict[str, Any]:
        """``scorer.options`` as the protocol's hash covers them (``raw``: the options as written). Every option is
        hashed, except where a scorer says otherwise: a location (a local path, a server URL) is dropped when an
        identity next to it (a digest) pins what is found there, as the protocol drops template file paths."""
        return raw
