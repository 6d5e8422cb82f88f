"""Opening a store file: a second ``Database`` of a file this process opened and migrated does not open it again at
construction (bench/store_open.py), and every transaction still opens it and checks its migrations, so a file
replaced, rolled back or damaged after the first opening is migrated or refused as before."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from evalgate.core.errors import BadInput
from evalgate.store import db
from evalgate.store.access import AccessLogRepo
from evalgate.store.migrations import MIGRATIONS

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.file_only("opening a store file: its lock file, a file replaced or damaged on disk")]


def _opens(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = db.Database._open

    def counting(self: db.Database) -> duckdb.DuckDBPyConnection:
        seen.append(self.path)
        return real(self)

    monkeypatch.setattr(db.Database, "_open", counting)
    return seen


def test_a_known_file_is_opened_by_its_first_transaction_not_at_construction(tmp_path: Path,
                                                                               monkeypatch) -> None:
    path = tmp_path / "s.duckdb"
    opens = _opens(monkeypatch)
    db.Database(path)
    assert len(opens) == 2  # a new file at construction: created (a copy of the template), then opened and checked
    d = db.Database(path)
    assert len(opens) == 2  # known: nothing opened yet
    assert AccessLogRepo(d).access_log_last() is None and len(opens) == 3


def test_a_file_replaced_by_an_older_store_is_migrated_by_the_next_transaction(tmp_path: Path) -> None:
    path, old = tmp_path / "s.duckdb", tmp_path / "old.duckdb"
    db.Database(path)
    db.Database(old, MIGRATIONS[:5])  # a store from before migration 6
    shutil.copyfile(old, path)  # the same path (and here the same inode: copied over in place)
    d = db.Database(path)
    with d.transaction() as con:
        versions = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
    assert versions == {v for v, _, _ in MIGRATIONS}


def test_a_known_file_damaged_since_is_refused_at_its_first_transaction(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    db.Database(path)
    data = path.read_bytes()
    with open(path, "r+b") as f:  # damaged in place: the inode the process knows
        f.write(b"\0" * min(len(data), 8192))
    d = db.Database(path)
    with pytest.raises(BadInput, match="cannot open the store"):
        with d.transaction():
            pass
    assert path.stat().st_size == len(data)  # left as it was


def test_a_lock_file_unusable_after_construction_is_bad_input_at_the_next_transaction(tmp_path: Path) -> None:
    """The constructor turns an unusable lock file into BadInput (exit 2); a later transaction, on a store whose
    lock file became unusable since (here replaced by a directory: root ignores permissions), says the same."""
    from evalgate.store import Store

    path = tmp_path / "s.duckdb"
    store = Store(path)
    lock = Path(str(path) + ".lock")
    lock.unlink()
    lock.mkdir()
    for call in (lambda: store.protocol_hash("p", "1"), lambda: store.session().__enter__()):
        with pytest.raises(BadInput, match="cannot use the store .*set EVALGATE_HOME to a writable directory"):
            call()
