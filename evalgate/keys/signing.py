"""The access log's signing key: signed heads that a rewritten store cannot forge.

The hash chain (``evalgate.access.log``) proves that rows were not edited *unless* the editor re-hashes every later
row and rewrites the stored head, which anyone who can write the store can do. So every append also signs the new
head (its ``seq`` and ``row_hash``) with an Ed25519 key (``cryptography``; Bernstein et al. 2012, RFC 8032) that
is kept outside the store, and ``evalgate audit verify`` and every gate check the newest signature against that
key: a store rewritten without the key has no valid signature over its head.

Where the key comes from, first found wins:

1. ``$EVALGATE_LOG_KEY``: the key itself (PEM, as written to the key file), e.g. a CI secret;
2. ``$EVALGATE_LOG_KEY_FILE``: a file holding it;
3. ``log-signing.key`` beside the private-split key file (``Environment.key_file``: by default
   ``$XDG_CONFIG_HOME/evalgate/``, outside any repository).

When none exists, a store's first append creates the file (mode 600; a later append on a store some key
already signs makes none, ``access.log._signer``), quietly: a note on stderr would land in every
first command's output; ``evalgate audit verify`` names the key it checked with.
Everyone who writes the same store needs the same key, as everyone who reads its private splits needs the private
key. The store keeps only the public key beside each signature, for the error message; verification always uses
the public key derived from the key found above, never the stored one.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput

KEY_NAME = "log-signing.key"
_CONTEXT = b"evalgate access-log head v1\n"


def log_key_file(env: Environment) -> Path:
    """``env``'s log key file (``env.log_key_file``, ``$EVALGATE_LOG_KEY_FILE``), else ``log-signing.key`` in the
    private-split key's directory (``env.key_file``)."""
    return env.log_key_file or env.key_file.parent / KEY_NAME


def message(seq: int, row_hash: str) -> bytes:
    """The bytes a head signature covers: a fixed context line, the row number and its ``row_hash``."""
    return _CONTEXT + f"{seq}:{row_hash}".encode("ascii")


@lru_cache(maxsize=8)
def _parse(pem: bytes, where: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        raise BadInput(f"the access-log signing key in {where} is not a PEM private key ({e}); restore the key "
                       "file or the secret (EVALGATE_LOG_KEY / EVALGATE_LOG_KEY_FILE)") from e
    if not isinstance(key, Ed25519PrivateKey):
        raise BadInput(f"the access-log signing key in {where} is not an Ed25519 key; restore the key evalgate "
                       "created (EVALGATE_LOG_KEY / EVALGATE_LOG_KEY_FILE)")
    return key


def _create(path: Path) -> None:
    """Write a new key to ``path`` atomically (a temporary file linked into place), so processes that race to
    create it all end up with the one that won."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process created it first: use that one
    finally:
        tmp.unlink()


def signing_key(env: Environment, create: bool = False) -> Any | None:
    """``env``'s Ed25519 private key (see the module docstring for where it is looked for).

    Args:
        env: the environment whose key (``log_key``, ``log_key_file``, ``key_file``) is used.
        create: make the key file when no key is found.

    Returns:
        A ``cryptography`` ``Ed25519PrivateKey``, or None when no key is found and ``create`` is false.

    Raises:
        BadInput: the key found is not a PEM Ed25519 private key.
    """
    pem = env.log_key
    if pem:
        return _parse(pem.strip().encode() + b"\n", "EVALGATE_LOG_KEY")
    path = log_key_file(env)
    if not path.is_file():
        if not create:
            return None
        _create(path)
    return _parse(path.read_bytes(), str(path))


def public_hex(key: Any) -> str:
    """The raw 32-byte public key of a private key, as hex (stored beside a signature, shown in messages)."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def sign(key: Any, seq: int, row_hash: str) -> str:
    """The hex Ed25519 signature of head ``(seq, row_hash)`` (``message``)."""
    return key.sign(message(seq, row_hash)).hex()


def valid(key: Any, seq: int, row_hash: str, signature: str) -> bool:
    """Whether ``signature`` (hex) is ``key``'s signature of head ``(seq, row_hash)``."""
    from cryptography.exceptions import InvalidSignature

    try:
        key.public_key().verify(bytes.fromhex(signature), message(seq, row_hash))
    except (InvalidSignature, ValueError):
        return False
    return True
