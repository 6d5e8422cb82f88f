"""One registry mechanism for every extension point: backends, scorers, datasets, extraction rules, training-log
readers and report writers (the shape of lm-evaluation-harness's ``lm_eval/api/registry.py``: named entries, lazy
``"module:attr"`` placeholders, entry points for plugins).

A ``Registry[T]`` maps a name to an entry of type ``T``. An entry is registered either as the object itself or as a
``"package.module:attribute"`` string, imported the first time the name is looked up, so that listing or validating
names imports nothing heavy. Third-party packages add entries through the registry's entry-point group (e.g.
``[project.entry-points."evalgate.scorers"] myscorer = "mypkg.scorer:ENTRY"``); the object an entry point names must
be of the registry's entry type. A built-in name wins over a plugin of the same name.

The registries themselves live beside what they register (``backends.base.BACKENDS``, ``scoring.base.SCORERS``,
``datasets.DATASETS``, ``scoring.extract.RULES``, ``diagnostics.log.LOG_READERS``, ``gate.report.writers.WRITERS``,
``scoring.metrics.METRICS``, ``tools.TOOLS``); this module imports nothing of evalgate but ``errors``. A registry
is also pydantic metadata: a field ``Annotated[str, RULES]`` accepts the registry's names only (a plugin's
included).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from evalgate.core.errors import BadInput

T = TypeVar("T")

ENTRY_POINT_GROUPS = ("evalgate.backends", "evalgate.scorers", "evalgate.datasets", "evalgate.extract_rules",
                      "evalgate.log_readers", "evalgate.report_writers", "evalgate.metrics", "evalgate.tools")
"""Every entry-point group evalgate reads, one per registry."""


def load_reference(ref: str) -> Any:
    """Import ``"package.module:attribute"`` (the attribute may be dotted) and return the attribute.

    Raises:
        BadInput: ``ref`` is not ``module:attribute``, or the module has no such attribute.
        ImportError: the module cannot be imported (left to the caller, which knows the pip extra to name).
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise BadInput(f"registry reference {ref!r} is not 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise BadInput(f"registry reference {ref!r}: {obj!r} has no attribute {part!r}") from e
    return obj


class Registry(Generic[T]):
    """Named entries of one kind, registered eagerly or as lazy ``"module:attr"`` references, plus the entries of
    the kind's entry-point group.

    Args:
        kind: the singular noun used in errors (``backend``, ``scorer``, ``report format``).
        entry_type: the class every entry must be an instance of (checked when a lazy entry or a plugin is
            loaded); None: anything.
        entry_point_group: the ``importlib.metadata`` entry-point group read for plugins; None: no plugins.
        plural: the plural used in errors; default ``kind + "s"``.
        alias: maps a name as used to the name registered, for families of names (``pass@10`` -> ``pass@k``);
            None: names are used as registered.
    """

    def __init__(self, kind: str, entry_type: type | None = None, entry_point_group: str | None = None,
                 plural: str | None = None, alias: Callable[[str], str] | None = None):
        self.kind = kind
        self.alias = alias
        self.plural = plural or f"{kind}s"
        self.entry_type = entry_type
        self.entry_point_group = entry_point_group
        self._entries: dict[str, T | str] = {}
        self._origin: dict[str, str] = {}
        self._plugins_read = False

    def register(self, name: str, entry: T | str) -> T | str:
        """Register ``entry`` (the object, or a ``"module:attr"`` string naming it) under ``name``; returns it.

        Raises:
            BadInput: ``name`` is already registered (two built-ins of one name are a bug, not a choice).
        """
        if name in self._entries and self._origin.get(name) != "plugin":
            raise BadInput(f"{self.kind} {name!r} is registered twice ({self._describe(name)}); pick another name")
        self._entries[name] = entry
        self._origin[name] = "built-in"
        return entry

    def decorator(self, name: str, make: Callable[[Any], T]) -> Callable[[Any], Any]:
        """A decorator registering ``make(decorated)`` under ``name`` and returning the decorated object."""

        def register(obj: Any) -> Any:
            self.register(name, make(obj))
            return obj

        return register

    def _read_plugins(self) -> None:
        if self._plugins_read or self.entry_point_group is None:
            return
        self._plugins_read = True
        for ep in importlib.metadata.entry_points(group=self.entry_point_group):
            if ep.name not in self._entries:  # a built-in name wins
                self._entries[ep.name] = ep.value
                self._origin[ep.name] = "plugin"

    def refresh(self) -> None:
        """Forget the plugins read so far and read the entry-point group again on next use (after ``sys.path``
        changed: a test installing a distribution)."""
        for name in [n for n, o in self._origin.items() if o == "plugin"]:
            del self._entries[name], self._origin[name]
        self._plugins_read = False

    def _describe(self, name: str) -> str:
        value = self._entries.get(name)
        return value if isinstance(value, str) else self._origin.get(name, "?")

    def names(self, sort: bool = True) -> list[str]:
        """Every registered name (built-ins and plugins), sorted (else in registration order, plugins last);
        imports nothing."""
        self._read_plugins()
        return sorted(self._entries) if sort else list(self._entries)

    def builtins(self) -> list[T]:
        """The built-in entries registered as objects, in registration order (reads no plugin, imports nothing)."""
        return [v for n, v in self._entries.items() if self._origin[n] == "built-in" and not isinstance(v, str)]

    def _key(self, name: str) -> str:
        return self.alias(name) if self.alias is not None else name

    def __contains__(self, name: object) -> bool:
        self._read_plugins()
        return isinstance(name, str) and self._key(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def unknown(self, name: str, where: str = "") -> BadInput:
        """The error for an unknown ``name``: the nearest known name and every known one. ``where``: text put after
        the name (`` in protocol p.yaml``)."""
        known = self.names()
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return BadInput(f"unknown {self.kind} {name!r}{where}; {hint}known {self.plural}: {', '.join(known)}")

    def require(self, name: str, where: str = "") -> T:
        """The entry registered as ``name``, importing a lazy one (once).

        Raises:
            BadInput: unknown name (``unknown``), a reference that does not resolve, or an entry of the wrong type
                (names the plugin's reference).
        """
        if name not in self:
            raise self.unknown(name, where)
        name = self._key(name)
        value = self._entries[name]
        if isinstance(value, str):
            try:
                loaded = load_reference(value)
            except ImportError as e:
                raise BadInput(f"{self.kind} {name!r} ({self._origin[name]} {value}) cannot be imported: {e}") from e
            if self.entry_type is not None and not isinstance(loaded, self.entry_type):
                raise BadInput(f"{self.kind} {name!r} ({self._origin[name]} {value}) is a {type(loaded).__name__}, "
                               f"not a {self.entry_type.__name__}; point the entry point at one")
            self._entries[name] = value = loaded
        return value  # type: ignore[return-value]

    def __getitem__(self, name: str) -> T:
        return self.require(name)

    def get(self, name: str, default: Any = None) -> Any:
        """The entry ``name`` (loaded), or ``default`` when no such name is registered (as ``dict.get``)."""
        return self.require(name) if name in self else default

    def __setitem__(self, name: str, entry: T | str) -> None:
        """Register or replace ``name`` (a test's ``monkeypatch.setitem``; ``register`` refuses a second one)."""
        self._entries[name] = entry
        self._origin[name] = "built-in"

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._origin.pop(name, None)

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) for every name, sorted, each loaded."""
        return [(name, self.require(name)) for name in self.names()]

    def builtin_names(self) -> list[str]:
        """The built-in names (lazy ones included), in registration order; reads no plugin, imports nothing."""
        return [n for n, o in self._origin.items() if o == "built-in"]

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        """The registry as pydantic metadata: a field ``Annotated[str, REGISTRY]`` holds a name of this registry,
        checked when the model is validated (plugins' names included, so a plugin's name validates; an unknown one
        fails with ``unknown``'s message), and ``protocol.docs`` lists the built-in names from the field's
        metadata."""
        from pydantic_core import core_schema

        def known(name: str) -> str:
            if name not in self:
                raise ValueError(self.unknown(name).message)
            return name

        return core_schema.no_info_after_validator_function(known, handler(source))

    def origin(self, name: str) -> str:
        """``built-in`` or ``plugin``.

        Raises:
            BadInput: unknown name.
        """
        if name not in self:
            raise self.unknown(name)
        return self._origin[self._key(name)]
