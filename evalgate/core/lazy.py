"""Lazy package namespaces: a package's ``__init__`` names what its submodules define and imports one only when a
name of it is first used (PEP 562 ``__getattr__``), so importing any module of a package never loads its siblings."""

from __future__ import annotations

import importlib
from typing import Any


def load(package: str, where: dict[str, str], name: str, namespace: dict[str, Any]) -> Any:
    """``name`` from ``package``'s submodule ``where[name]`` (or the module of that full name), imported now and kept
    in the package's ``namespace``.

    Raises:
        AttributeError: ``name`` is not one of ``where`` (the package's ``__getattr__`` contract).
    """
    if name not in where:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module = where[name] if where[name].startswith("evalgate.") else f"{package}.{where[name]}"
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
