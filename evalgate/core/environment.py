"""Where evalgate keeps things and who is acting: the one place the ``EVALGATE_*`` environment variables are read.

An ``Environment`` is a frozen value: home, splits directory, private key, actor, models cache, access-log key,
clock. ``Environment.from_env()`` reads it from the process environment (what the CLI does on every command);
``evalgate.Workspace`` builds one from explicit arguments (what a notebook or a Trainer callback does). There is no
active or current environment: a workspace hands its own down, as its ``Store``'s ``env`` or an ``env=`` argument,
and a public function called without one takes the process's (``or_from_env``). The variables are read in this
module only.

This module imports nothing of evalgate's, so every layer may use it without an import cycle.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VARIABLES: tuple[str, ...] = (
    "EVALGATE_HOME", "EVALGATE_SPLITS", "EVALGATE_PRIVATE_KEY", "EVALGATE_PRIVATE_KEY_FILE", "EVALGATE_ACTOR",
    "EVALGATE_MODELS", "EVALGATE_LOG_KEY", "EVALGATE_LOG_KEY_FILE", "EVALGATE_EXPECT_HEAD",
    "EVALGATE_OPENAI_BASE_URL", "EVALGATE_NO_DIGEST_CACHE", "EVALGATE_DEBUG", "EVALGATE_CACHE", "EVALGATE_STORE",
    "EVALGATE_LOCK_TIMEOUT",
)
"""Every environment variable evalgate reads (docs/API.md lists what each one sets)."""


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (the default clock)."""
    return datetime.now(UTC)


def default_key_file(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/evalgate/private.key`` (default ``~/.config/evalgate/private.key``): outside any repo."""
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "evalgate" / "private.key"


@dataclass(frozen=True)
class Environment:
    """Where evalgate keeps things, and who is acting.

    Attributes:
        home: the store's directory (``evalgate.duckdb``, the digest cache, converted models by default).
        splits: the directory of split manifests and data files.
        key: the private splits' Fernet key itself (None: read it from ``key_file``).
        key_file: the file holding that key (created on the first private import).
        actor: who reads splits (None: the OS user).
        models: where converted GGUF checkpoints are cached (None: ``home/models``).
        log_key: the access-log signing key, PEM text (None: read it from ``log_key_file``).
        log_key_file: the file holding it (None: ``log-signing.key`` beside ``key_file``).
        expect_head: ``SEQ:HASH`` the access log must hold at a gate (None: no pin).
        openai_base_url: the default ``base_url`` of the openai backend.
        digest_cache: remember file digests by stat (False: hash every time).
        debug: show tracebacks of user errors.
        cache: the demo's once-per-machine cache (trained demo checkpoints).
        clock: the time source of the store's timestamps (timezone-aware UTC).
        database: an open ``evalgate.store.Database`` that stores use instead of ``home/evalgate.duckdb`` (e.g.
            ``Database(":memory:")`` for tests); it does not travel to child processes (``variables``).
        store: a PostgreSQL server's URL (``postgresql://user@host:port/dbname``) whose database stores use instead
            of ``home/evalgate.duckdb`` (None: the file); it travels to child processes. The password belongs in
            libpq's ``PGPASSWORD`` or ``~/.pgpass``, not here.
        lock_timeout: seconds a store waits for its lock before it stops naming the holder (None: the default,
            ``evalgate.store.waiting.DEFAULT_LOCK_TIMEOUT``; 0: no limit); ``EVALGATE_LOCK_TIMEOUT``'s text is kept
            as given and checked where a store uses it (``evalgate.store.waiting.lock_timeout``).
    """

    home: Path = Path(".evalgate")
    splits: Path = Path("splits")
    key: bytes | None = None
    key_file: Path = field(default_factory=default_key_file)
    actor: str | None = None
    models: Path | None = None
    log_key: str | None = None
    log_key_file: Path | None = None
    expect_head: str | None = None
    openai_base_url: str | None = None
    digest_cache: bool = True
    debug: bool = False
    cache: Path = Path("~/.cache/evalgate").expanduser()
    clock: Callable[[], datetime] = utc_now
    database: Any = None
    store: str | None = None
    lock_timeout: float | str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """The environment the ``EVALGATE_*`` variables describe (``environ``: default ``os.environ``); an unset or
        empty variable keeps the default."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(name) or None

        key, key_file, log_file = get("EVALGATE_PRIVATE_KEY"), get("EVALGATE_PRIVATE_KEY_FILE"), \
            get("EVALGATE_LOG_KEY_FILE")
        models = get("EVALGATE_MODELS")
        return cls(
            home=Path(env.get("EVALGATE_HOME", ".evalgate")), splits=Path(env.get("EVALGATE_SPLITS", "splits")),
            key=key.encode() if key else None,
            key_file=Path(key_file) if key_file else default_key_file(env), actor=get("EVALGATE_ACTOR"),
            models=Path(models) if models else None, log_key=get("EVALGATE_LOG_KEY"),
            log_key_file=Path(log_file) if log_file else None,
            expect_head=env.get("EVALGATE_EXPECT_HEAD", "").strip() or None,
            openai_base_url=get("EVALGATE_OPENAI_BASE_URL"),
            digest_cache=env.get("EVALGATE_NO_DIGEST_CACHE", "") in ("", "0"), debug=env.get("EVALGATE_DEBUG") == "1",
            cache=Path(env.get("EVALGATE_CACHE", "~/.cache/evalgate")).expanduser(), store=get("EVALGATE_STORE"),
            lock_timeout=get("EVALGATE_LOCK_TIMEOUT"))

    @property
    def models_dir(self) -> Path:
        """Where converted GGUF checkpoints are cached: ``models``, else ``home/models``."""
        return self.models if self.models is not None else self.home / "models"

    @property
    def actor_name(self) -> str:
        """``actor``, else the OS user (``uid-N`` where the user has no name)."""
        if self.actor:
            return self.actor
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return f"uid-{os.getuid()}"

    def replace(self, **changes: object) -> Environment:
        """A copy with ``changes`` (field name -> value)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def variables(self) -> dict[str, str]:
        """The ``EVALGATE_*`` variables that describe this environment (for a child process: ``evalgate sweep``'s
        workers, the demo's subprocesses). The clock does not travel, nor does a memory database (``database``, or
        a ``memory:`` store name: another process cannot reach it)."""
        out = {"EVALGATE_HOME": str(self.home), "EVALGATE_SPLITS": str(self.splits),
               "EVALGATE_PRIVATE_KEY_FILE": str(self.key_file), "EVALGATE_MODELS": str(self.models_dir),
               "EVALGATE_CACHE": str(self.cache)}
        optional = {"EVALGATE_PRIVATE_KEY": self.key.decode() if self.key else None, "EVALGATE_ACTOR": self.actor,
                    "EVALGATE_LOG_KEY": self.log_key, "EVALGATE_EXPECT_HEAD": self.expect_head,
                    "EVALGATE_LOG_KEY_FILE": str(self.log_key_file) if self.log_key_file else None,
                    "EVALGATE_OPENAI_BASE_URL": self.openai_base_url,
                    "EVALGATE_NO_DIGEST_CACHE": None if self.digest_cache else "1",
                    "EVALGATE_DEBUG": "1" if self.debug else None,
                    "EVALGATE_STORE": None if (self.store or "").startswith("memory:") else self.store,
                    "EVALGATE_LOCK_TIMEOUT": None if self.lock_timeout is None else str(self.lock_timeout)}
        return {**out, **{k: v for k, v in optional.items() if v is not None}}


def or_from_env(env: Environment | None) -> Environment:
    """``env``, else the process's (``Environment.from_env()``): the default of a public function called without
    one (a script, a test). ``Workspace`` and the layers below it always hand theirs down (``env=``; the store's
    ``Store.env``), which ``tests/test_one_environment.py`` checks."""
    return env if env is not None else Environment.from_env()

