"""Opening a store file: a second ``Database`` of a file this process opened and migrated does not open it again at
construction (bench/store_open.py); a transaction that finds the file as this process last left it skips the
migration check, and one that finds it written, replaced, rolled back or damaged since (by another process, or
another path to the same file) checks and migrates it, or refuses it, as before."""

from __future__ import annotations

import shutil
import subprocess
import sys
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


def _checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    seen: list[Path] = []
    real = db.Database._migrate

    def counting(self: db.Database, con: duckdb.DuckDBPyConnection) -> bool:
        seen.append(self.path)
        return real(self, con)

    monkeypatch.setattr(db.Database, "_migrate", counting)
    return seen


def _versions(d: db.Database) -> set[int]:
    with d.transaction() as con:
        return {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}


def test_a_file_left_as_this_process_closed_it_is_not_checked_again(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "s.duckdb"
    d = db.Database(path)
    checks, opens = _checks(monkeypatch), _opens(monkeypatch)
    with d.transaction() as con:  # a write: the file changes, as this process leaves it
        con.execute("INSERT INTO prompts VALUES ('h1', 'a prompt')")
    assert AccessLogRepo(db.Database(path)).access_log_last() is None  # another Database of the same file
    with d.session():
        pass
    assert len(opens) == 3 and checks == []


def test_a_migration_another_process_rolled_back_in_place_is_applied_again(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "s.duckdb"
    d = db.Database(path)
    assert _versions(d) == {v for v, _, _ in MIGRATIONS}  # known and left fully migrated
    last, name, _ = MIGRATIONS[-1]
    script = ("import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
              "con.execute('DELETE FROM schema_migrations WHERE version = ?', [int(sys.argv[2])]); con.close()")
    subprocess.run([sys.executable, "-c", script, str(path), str(last)], check=True, timeout=120)
    checks = _checks(monkeypatch)
    with d.transaction() as con:
        got = con.execute("SELECT name FROM schema_migrations WHERE version = ?", [last]).fetchall()
    assert got == [(name,)] and checks == [path]


def test_a_file_copied_over_with_its_old_times_kept_is_migrated(tmp_path: Path) -> None:
    """``shutil.copy2`` keeps the old file's modification time; its size and change time still differ."""
    path, old = tmp_path / "s.duckdb", tmp_path / "old.duckdb"
    d = db.Database(path)
    assert _versions(d) == {v for v, _, _ in MIGRATIONS}
    db.Database(old, MIGRATIONS[:5])
    shutil.copy2(old, path)
    assert _versions(d) == {v for v, _, _ in MIGRATIONS}


def test_a_database_with_fewer_migrations_does_not_vouch_for_one_with_all(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "s.duckdb"
    old = db.Database(path, MIGRATIONS[:5])
    with old.transaction():
        pass
    assert _versions(db.Database(path)) == {v for v, _, _ in MIGRATIONS}
