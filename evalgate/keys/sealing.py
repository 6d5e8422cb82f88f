"""Encryption at rest of what evalgate derives from private and human-audit items (the "sealed" tiers).

A run on a sealed tier stores its rendered prompts (``prompts.text``), completions (``generations.text``), extracted
answers and score details (``samples.extracted``, ``samples.detail``) and a failed run's error message
(``runs.error``, which may quote them) encrypted with the private-split key (``evalgate.splits.load_key``; Fernet:
AES-128-CBC with HMAC-SHA256, from ``cryptography``); so are the raters' notes in ``human_scores``. A sealed value
is text: ``SEALED_PREFIX`` followed by the Fernet token. The store seals on write, by the run's tier, and opens on
read (``open_rows``, ``open_or_mark``), so authorised readers see plain text and the file holds none.

A sealed run's prompt hash (``prompt_sha256`` in ``run_prompts``, ``generations`` and ``prompts``) is
HMAC-SHA256 keyed by a key derived from the split key (``Sealer.digest``), not a bare sha256: a bare hash lets
anyone holding a guess of a private prompt confirm it against the store, and it would share one ``prompts`` row
between a private run and a dev run that rendered the same text. Lookups still work: the same text under the same
key gives the same digest, so the generation cache hits as before.

What stays in clear: item ids, run records (metrics, counts, settings), scores and statuses, behaviour numbers
(token counts, truncation, repetition ratio, refusal flag), hashes and the access log.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
from pathlib import Path
from typing import Any

from evalgate.core.enums import Tier
from evalgate.core.environment import Environment, or_from_env
from evalgate.core.errors import BadInput, RefusedByPolicy

SEALED_TIERS: tuple[str, ...] = (Tier.PRIVATE.value, Tier.HUMAN_AUDIT.value)
SEALED_PREFIX = "evalgate-sealed:v1:"
_DIGEST_CONTEXT = b"evalgate prompt digest v1"
_PRINT_CONTEXT = b"evalgate private item fingerprint v1"


# -- the key (it also encrypts the private splits' data files, ``evalgate.splits``) ----------------------------
def key_file(*, env: Environment | None = None) -> Path:
    """``env``'s key file (``Environment.key_file``; default the process's, ``or_from_env``:
    ``$EVALGATE_PRIVATE_KEY_FILE``, else ``$XDG_CONFIG_HOME/evalgate/private.key``, outside any repo)."""
    return or_from_env(env).key_file


def load_key(create: bool = False, *, env: Environment | None = None) -> bytes:
    """``env``'s Fernet key (default the process's, ``or_from_env``): ``env.key`` (``$EVALGATE_PRIVATE_KEY``), else
    the key file ``env.key_file``; ``create`` makes a new key file (mode 600) and prints its path on stderr with a
    note to back it up and keep it secret: without the key the private splits cannot be read, and anyone who has it
    can read them.

    Raises:
        RefusedByPolicy: no key available (reading private data needs it).
    """
    from cryptography.fernet import Fernet

    env = or_from_env(env)
    if env.key:
        return env.key
    kf = env.key_file
    if kf.is_file():
        return kf.read_bytes().strip()
    if not create:
        raise RefusedByPolicy(
            f"private split data is encrypted and no key was found: set EVALGATE_PRIVATE_KEY or put the key in "
            f"{kf} (EVALGATE_PRIVATE_KEY_FILE overrides the path); ask whoever imported the split for it"
        )
    kf.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    fd = os.open(kf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key + b"\n")
    print(f"note: created the private-split encryption key {kf} (mode 600). Back it up somewhere safe and keep it "
          "secret: without it the private splits cannot be decrypted, and anyone who has it can read them. Others "
          "who read these splits need it too (EVALGATE_PRIVATE_KEY or EVALGATE_PRIVATE_KEY_FILE).", file=sys.stderr)
    return key


def is_sealed(value: Any) -> bool:
    """Whether ``value`` is a sealed string (``SEALED_PREFIX`` + Fernet token)."""
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


class Sealer:
    """Seals and opens store values with one Fernet key.

    Args:
        key: the urlsafe-base64 Fernet key (``load_key``).

    Raises:
        BadInput: ``key`` is not a valid Fernet key.
    """

    def __init__(self, key: bytes):
        from cryptography.fernet import Fernet

        try:
            self._fernet = Fernet(key)
        except ValueError as e:
            raise BadInput(f"the private split key is not a valid Fernet key ({e}); check EVALGATE_PRIVATE_KEY or "
                           "the key file") from e
        # Separate keys for digests, so the encryption key is never used for two purposes (and a prompt digest
        # never equals an item fingerprint).
        self._digest_key = hmac.new(key, _DIGEST_CONTEXT, hashlib.sha256).digest()
        self._print_key = hmac.new(key, _PRINT_CONTEXT, hashlib.sha256).digest()

    def seal(self, value: str | None) -> str | None:
        """``value`` encrypted (None stays None). Always encrypts, even a value that looks sealed: a completion
        may begin with ``SEALED_PREFIX``."""
        if value is None:
            return value
        return SEALED_PREFIX + self._fernet.encrypt(value.encode("utf-8")).decode("ascii")

    def open(self, value: Any) -> Any:
        """``value`` decrypted when sealed, else unchanged.

        Raises:
            RefusedByPolicy: the key does not decrypt it (another key sealed it).
        """
        if not is_sealed(value):
            return value
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(value[len(SEALED_PREFIX):].encode("ascii")).decode("utf-8")
        except InvalidToken as e:
            raise RefusedByPolicy("the private key does not decrypt the store's encrypted outputs of private and "
                                  "human-audit runs; use the key they were written with (EVALGATE_PRIVATE_KEY or "
                                  "EVALGATE_PRIVATE_KEY_FILE)") from e

    @property
    def fingerprint(self) -> str:
        """A hex fingerprint of the key (an HMAC of a fixed text; it reveals nothing of the key): the store records
        the one its sealed values use and refuses to seal with another."""
        return hmac.new(self._digest_key, b"evalgate key fingerprint v1", hashlib.sha256).hexdigest()

    def digest(self, text: str) -> str:
        """Hex HMAC-SHA256 of ``text`` under the derived digest key: a sealed run's prompt hash."""
        return hmac.new(self._digest_key, text.encode("utf-8"), hashlib.sha256).hexdigest()

    def item_print(self, kind: str, text: str) -> str:
        """Hex HMAC-SHA256 of ``kind`` and ``text`` under a second derived key: a private item's keyed fingerprint
        (``splits.twins``: its id, normalised text or a long field value). Without the key a guessed item cannot be
        confirmed against the store, where a bare sha256 would confirm it."""
        return hmac.digest(self._print_key, f"{kind}\x00{text}".encode(), "sha256").hex()


def sealer(*, env: Environment | None = None) -> Sealer:
    """The Sealer of ``env``'s private-split key (``load_key``; default the process's).

    Raises:
        RefusedByPolicy: no key is available.
        BadInput: the key is not a valid Fernet key.
    """
    try:
        return Sealer(load_key(env=env))
    except RefusedByPolicy as e:
        raise RefusedByPolicy(f"outputs of private and human-audit runs are encrypted at rest with the private "
                              f"split key: {e.message}") from e


def sealer_for(tier: str | None, env: Environment) -> Sealer | None:
    """The Sealer (``env``'s key) for a run on ``tier``: None for a tier whose outputs stay in clear.

    Raises:
        RefusedByPolicy, BadInput: as ``sealer``.
    """
    return sealer(env=env) if tier in SEALED_TIERS else None


def open_rows(rows: list[dict[str, Any]], columns: tuple[str, ...], env: Environment) -> list[dict[str, Any]]:
    """Decrypt the sealed values of ``columns`` in ``rows`` in place with ``env``'s key (loaded only when one is
    sealed).

    Raises:
        RefusedByPolicy: a sealed value and no key, or the wrong key.
    """
    s: Sealer | None = None
    for r in rows:
        for c in columns:
            if is_sealed(r.get(c)):
                s = s or sealer(env=env)
                r[c] = s.open(r[c])
    return rows


UNREADABLE = "(encrypted with the private split key, which is not available here)"


def open_or_mark(rows: list[dict[str, Any]], column: str, env: Environment) -> list[dict[str, Any]]:
    """Like ``open_rows`` for one column, for listings that must work without the key (a run's error message):
    a sealed value that cannot be opened becomes ``UNREADABLE`` instead of refusing the whole listing."""
    for r in rows:
        if is_sealed(r.get(column)):
            try:
                r[column] = sealer(env=env).open(r[column])
            except (RefusedByPolicy, BadInput):
                r[column] = UNREADABLE
    return rows
