"""The base of evalgate's typed results: what a library call returns and the CLI formats (``--json`` prints
``as_dict()``); ``Metrics``, a run's metrics by name and typed."""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from pydantic import ConfigDict, GetCoreSchemaHandler
from pydantic_core import core_schema

from evalgate.core.models import StrictModel


class Result(StrictModel):
    """A typed result: immutable, strict about its fields; a status or tier is checked against its enum and held
    (and dumped) as its plain string.

    ``as_dict()`` is the JSON document of the matching ``--json`` flag. A field with a default that the code left
    unset is left out of it (a part the document has only sometimes, e.g. a split's budget when it has one).
    """

    model_config = ConfigDict(use_enum_values=True, allow_inf_nan=True)  # computed: a ratio may be inf

    def as_dict(self) -> dict[str, Any]:
        """The result as plain dicts, lists and values (the ``--json`` document), without the unset fields."""
        return self.model_dump(exclude_unset=True)


def dict_read(what: str, instead: str) -> None:
    """Warn (``DeprecationWarning``, at the caller's caller) that ``what`` reads a typed result as the dict it was
    before it was typed: it still works for one release; ``instead`` says what to read."""
    warnings.warn(f"{what} is deprecated: it is a typed result now; read {instead} (reading it as a dict goes in the "
                  "next release)", DeprecationWarning, stacklevel=3)


class ReadByKey:
    """A typed row (a dataclass or a ``Result``) that still reads by key as the dict it was (``row["rho"]``,
    ``row.get("rho")``) for one release, with a ``DeprecationWarning`` (read the attribute, ``row.rho``): the key of
    its ``as_dict()``, or of ``dataclasses.asdict`` without one; a nested row comes back as its dict."""

    def __getitem__(self, key: str) -> Any:
        dict_read(f"{type(self).__name__}[{key!r}]", f".{key}")
        return self._doc()[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``row.get(key, default)`` as on the dict it was (deprecated: read the attribute)."""
        dict_read(f"{type(self).__name__}.get({key!r})", f".{key}")
        return self._doc().get(key, default)

    def _doc(self) -> dict[str, Any]:
        as_dict = getattr(self, "as_dict", None)
        return as_dict() if as_dict is not None else dataclasses.asdict(self)  # type: ignore[call-overload]


class Estimate(NamedTuple):
    """A metric's value and its standard error (None where the run reports none)."""

    value: Any
    stderr: float | None


_PASS_AT = re.compile(r"pass@(\d+)")


class Metrics(Mapping[str, Any]):
    """A run's metrics (``RunRecord.metrics``): read by name as a mapping, as the stored JSON has them
    (``metrics["pass@1"]``, ``metrics["pass@1_stderr"]``, ``"mean_score"``, the behaviour metrics, a scorer's own
    such as ``"judge"``), or typed: ``pass_at[k]`` and ``mean_score`` as ``Estimate(value, stderr)``.

    Immutable; equal to a dict with the same items; dumped (``model_dump``, ``as_dict()``, the store) as a plain
    dict, so the stored and printed documents are unchanged.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = dict(values or {})

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Metrics({self._values!r})"

    def estimate(self, name: str) -> Estimate:
        """``name``'s value with ``name_stderr`` (None where absent).

        Raises:
            KeyError: the run reports no metric ``name``.
        """
        return Estimate(self._values[name], self._values.get(f"{name}_stderr"))

    @property
    def pass_at(self) -> dict[int, Estimate]:
        """``k -> Estimate`` for each ``pass@k`` the run reports (pass@1 only for a greedy protocol)."""
        return {int(m.group(1)): self.estimate(name) for name in self._values
                if (m := _PASS_AT.fullmatch(name)) is not None}

    @property
    def mean_score(self) -> Estimate | None:
        """The mean score over items with its standard error (None in a record without it)."""
        return self.estimate("mean_score") if "mean_score" in self._values else None

    def as_dict(self) -> dict[str, Any]:
        """The metrics as the plain dict the store and ``--json`` hold (a copy)."""
        return dict(self._values)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """Validated from a mapping of names to values, dumped as a plain dict."""
        return core_schema.no_info_after_validator_function(
            cls, core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda m: dict(m._values)))
