"""How long a store waits for its lock, and who holds it when the wait runs out.

Every transaction and session of a store takes one lock: a file's ``<db>.lock`` (``filelock``), a server's advisory
lock (``evalgate.store.pg.LOCK_KEY``). Whoever can take that lock can stall every evalgate client of the store, so a
client waits at most ``lock_timeout`` seconds (``EVALGATE_LOCK_TIMEOUT``) and then stops with ``StoreLocked``
(exit 2) naming the holder: its process id, user or role, program, and since when. docs/STORE.md says how the
default was sized.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput, StoreLocked

MAX_LOCK_TIMEOUT = 2_147_483.0
"""The longest limit a client may be given, in seconds (about 24.8 days): PostgreSQL's ``lock_timeout`` is a
32-bit count of milliseconds. Longer is refused (``0`` waits without limit)."""

DEFAULT_LOCK_TIMEOUT = 300.0
"""Seconds a client waits for the store's lock unless ``EVALGATE_LOCK_TIMEOUT`` says otherwise: room for more than a
hundred of the longest holds measured (``bench/store_gate_1m.py``: 1.8 s, storing a run of 5,428 samples on a
server under load; docs/STORE.md)."""


def lock_timeout(env: Environment | None) -> float | None:
    """The seconds a store of ``env`` waits for its lock: ``env.lock_timeout`` (``EVALGATE_LOCK_TIMEOUT``), else
    ``DEFAULT_LOCK_TIMEOUT``; None (from ``0``) waits without limit.

    Raises:
        BadInput: the value is not a number of seconds from 0 to ``MAX_LOCK_TIMEOUT``.
    """
    value = env.lock_timeout if env is not None else None
    if value is None or value == "":
        return DEFAULT_LOCK_TIMEOUT
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):  # also NaN
        raise BadInput(f"EVALGATE_LOCK_TIMEOUT={value!r} is not a number of seconds: give how long a command waits "
                       f"for the store's lock (e.g. 300; 0 waits without limit), or unset it for "
                       f"{DEFAULT_LOCK_TIMEOUT:g} s")
    if seconds > MAX_LOCK_TIMEOUT:
        raise BadInput(f"EVALGATE_LOCK_TIMEOUT={value!r} is longer than a client can wait for the store's lock "
                       f"(at most {MAX_LOCK_TIMEOUT:.0f} s, about 24.8 days: PostgreSQL counts it in 32-bit "
                       "milliseconds); give fewer seconds, or 0 to wait without limit")
    return seconds or None


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _process(pid: int) -> dict[str, Any]:
    """What this machine's /proc says of process ``pid``: its user, command line and start time (UTC)."""
    out: dict[str, Any] = {"pid": pid}
    proc = Path(f"/proc/{pid}")
    try:
        out["user"] = _user(proc.stat().st_uid)
        words = proc.joinpath("cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split()
        out["program"] = " ".join(words)[:120] or None
        ticks = int(proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        out["since"] = datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"), UTC)
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    return out


def file_lock_holders(lock: Path, proc_locks: Path = Path("/proc/locks"),
                      kinds: tuple[str, ...] = ("FLOCK",)) -> list[dict[str, Any]]:
    """The processes holding ``lock`` (a file locked with ``flock``, as ``filelock`` locks ``<db>.lock``; with
    ``kinds=("POSIX",)`` the ``fcntl`` locks DuckDB takes on its database file), from Linux's ``/proc/locks`` matched
    by device and inode: ``[{"pid", "user", "program", "since"}]``, ``since`` the process's start (UTC). Empty where
    the system has no ``/proc/locks`` or the holder is not visible here (another machine on a network file system,
    another PID namespace)."""
    try:
        st = os.stat(lock)
        text = proc_locks.read_text()
    except OSError:
        return []
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids: list[int] = []
    for line in text.splitlines():
        fields = line.split()
        if "->" in fields:  # a waiter ("1: -> FLOCK ..."), not a holder
            continue
        if len(fields) >= 6 and fields[1] in kinds and fields[5] == wanted and fields[4].isdigit():
            pid = int(fields[4])
            if pid > 0 and pid != os.getpid() and pid not in pids:
                pids.append(pid)
    return [_process(pid) for pid in pids]


def describe(holder: Mapping[str, Any]) -> str:
    """One holder as a phrase: ``pid 123 (role alice, program 'psql', since 2026-12-06 13:20:05 UTC)``."""
    parts = []
    for key, label in (("role", "role"), ("user", "user"), ("program", "program"), ("client", "client")):
        if holder.get(key):
            parts.append(f"{label} {holder[key]!r}" if key == "program" else f"{label} {holder[key]}")
    since = holder.get("since")
    if isinstance(since, datetime):
        parts.append(f"{holder.get('since_what', 'since')} {since.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC")
    elif holder.get("since_hidden"):
        parts.append("since when is not shown to this role (pg_read_all_stats shows it)")
    return f"pid {holder['pid']}" + (f" ({', '.join(parts)})" if parts else "")


def locked(location: str, waited: float, holders: Sequence[Mapping[str, Any]], what: str, todo: str) -> StoreLocked:
    """The error for a client that waited ``waited`` seconds for the store's lock at ``location``: names each
    holder (``describe``), or says none is visible, and what to do (``todo``)."""
    who = "; ".join(describe(h) for h in holders) if holders else \
        "a holder this client cannot see (it may have let go since, or runs on another machine)"
    return StoreLocked(f"the store {location} is locked: this command waited {waited:g} s for {what} "
                       f"(EVALGATE_LOCK_TIMEOUT), held by {who}. {todo}", location=location, waited=waited,
                       holders=[dict(h) for h in holders])
