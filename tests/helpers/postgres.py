"""A real PostgreSQL server for the tests, from the machine's packages (Debian's ``postgresql``): ``initdb`` in a
temporary directory, listening on a Unix socket there only (no TCP port), stopped and removed at the end.

PostgreSQL refuses to run as root; where the tests run as root (CI), the server runs as the ``postgres`` user the
Debian package creates (``runuser``), in a directory given to that user. ``find_bin_dir`` says why not where the
binaries are missing (the tests that need a server skip with that reason).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalgate.store import Store
from evalgate.store.dialect import POSTGRESQL, dialect

SUPERUSER = "evalgate_admin"
"""The cluster's superuser (``initdb -U``): the tests create databases and roles as it."""


def find_bin_dir() -> tuple[Path | None, str]:
    """The directory holding ``initdb`` and ``pg_ctl`` (``pg_config --bindir``, Debian's
    ``/usr/lib/postgresql/N/bin``, or ``PATH``), and why none was found."""
    candidates = []
    if (pg_config := shutil.which("pg_config")) is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    if (initdb := shutil.which("initdb")) is not None:
        candidates.append(Path(initdb).resolve().parent)
    for d in candidates:
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file() and (d / "postgres").is_file():
            return d, ""
    return None, ("PostgreSQL's server binaries (initdb, pg_ctl, postgres) are not installed: apt-get install "
                  "postgresql (`make setup` and .ci/run install it where they run as root)")


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory (``start`` / ``stop``); ``url(dbname, user)`` names a
    database on it, ``create_database`` makes an empty one."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="evalgate-pg-"))
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # postgres refuses root: run it as the package's postgres user
            shutil.chown(self.root, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, text=True)

    def start(self) -> PostgresServer:
        """``initdb`` where the directory has no cluster yet (trust logins over the socket, superuser
        ``SUPERUSER``), then ``pg_ctl start`` listening on a Unix socket in the directory only; fsync off (a test
        server). Starting it again after ``halt`` serves the same databases."""
        if not (self.data / "PG_VERSION").exists():
            self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", SUPERUSER, "-E",
                      "UTF8", "--no-sync", "--locale=C")
        opts = f"-k {self.root} -c listen_addresses='' -c fsync=off -c full_page_writes=off -c max_connections=200"
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"),
                  "-w", "start")
        return self

    def halt(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: the server goes away (``fast``: open sessions are ended, as an administrator's
        restart ends them), its databases kept for ``start``."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def stop(self) -> None:
        """Stop the server (immediate) where it runs, and remove its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                self.halt("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        """A libpq URL of ``dbname`` as ``user`` over the server's socket."""
        return f"postgresql://{user}@/{dbname}?host={self.root}"

    def admin(self, sql: str, dbname: str = "postgres") -> None:
        """Run ``sql`` as the superuser (autocommit: ``CREATE DATABASE`` too)."""
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as con:
            con.execute(sql)  # type: ignore[arg-type]

    def create_database(self) -> str:
        """A new empty database (``template0``), its URL as the superuser (0.2-0.8 s here)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.url(name)

    def create_schema(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        """A new empty schema in ``dbname``, and the URL of ``dbname`` as ``user`` with that schema alone on its
        search path: an empty store for one test in about 10 ms, where a database takes 0.2-0.8 s."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.admin(f"CREATE SCHEMA {name}", dbname)
        return f"{self.url(dbname, user)}&options=-csearch_path%3D{name}"


@contextmanager
def admin_edit(store: Store) -> Iterator[Any]:
    """A transaction on ``store`` as the one who holds its file, or administers its server, can open it: on
    PostgreSQL with the server's triggers off for the transaction (``session_replication_role = replica``, a
    superuser's right; the tests' URLs log in as the superuser), as a tamperer with that right would."""
    with store.connect() as con:
        if dialect(con) == POSTGRESQL:
            con.execute("SET LOCAL session_replication_role = replica")
        yield con
