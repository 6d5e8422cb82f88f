"""The base of evalgate's typed results: what a library call returns and the CLI formats (``--json`` prints
``as_dict()``)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from evalgate.core.models import StrictModel


class Result(StrictModel):
    """A typed result: immutable, strict about its fields; a status or tier is checked against its enum and held
    (and dumped) as its plain string.

    ``as_dict()`` is the JSON document of the matching ``--json`` flag. A field with a default that the code left
    unset is left out of it (a part the document has only sometimes, e.g. a split's budget when it has one).
    """

    model_config = ConfigDict(use_enum_values=True)

    def as_dict(self) -> dict[str, Any]:
        """The result as plain dicts, lists and values (the ``--json`` document), without the unset fields."""
        return self.model_dump(exclude_unset=True)
