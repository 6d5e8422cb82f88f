"""``StrictModel``: the one pydantic base of evalgate's models (user-written files, options, records, results)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base of every evalgate pydantic model: unknown keys are errors (``extra="forbid"``), values are immutable
    after load (``frozen``), a float must be finite (``allow_inf_nan=False``: YAML's ``.nan`` or ``.inf`` as a threshold
    is refused at load, with the file and field), and an attribute's docstring is its description (the generated
    docs read it).

    A subclass that must differ says only how, in its own ``model_config`` (pydantic merges it with this one): e.g.
    a run record is built up field by field (``frozen=False``), backend and scorer options refuse coercion
    (``strict=True``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)
