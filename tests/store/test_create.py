"""A new store file is a copy of a memory database this process migrated once (``Database._create``): the same
schema and record of migrations as applying every migration to the file, its migrations stamped with the time of
creation, and nothing left behind when the copy fails."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from evalgate.core.environment import Environment
from evalgate.store import db, instance
from evalgate.store.migrations import MIGRATIONS
from tests.store.test_memory import _schema

pytestmark = [pytest.mark.usefixtures("store_backend"),  # the store suite (docs/STORE.md)
              pytest.mark.file_only("a new store file is a copy of a migrated memory database (Database._create)")]


def _migrations(d: db.Database) -> list[tuple]:
    with d.transaction() as con:
        return con.execute("SELECT version, name, applied_at FROM schema_migrations ORDER BY version").fetchall()


@pytest.mark.parametrize("migrations", [MIGRATIONS, MIGRATIONS[:5]], ids=["all", "first five"])
def test_a_created_file_equals_one_every_migration_was_applied_to(tmp_path: Path, migrations: list) -> None:
    applied = tmp_path / "applied.duckdb"
    duckdb.connect(str(applied)).close()  # an existing empty file: the migrations run on it one by one
    reference = db.Database(applied, migrations)
    created = db.Database(tmp_path / "created.duckdb", migrations)
    assert _schema(created) == _schema(reference)
    assert [r[:2] for r in _migrations(created)] == [r[:2] for r in _migrations(reference)]
    assert [r[:2] for r in _migrations(created)] == [(v, n) for v, n, _ in migrations]


def test_the_migrations_are_stamped_with_the_creation_time(tmp_path: Path) -> None:
    when = datetime(2031, 2, 3, 4, 5, 6, tzinfo=UTC)
    created = db.Database(tmp_path / "s.duckdb", env=Environment(clock=lambda: when))
    stamps = {r[2] for r in _migrations(created)}
    assert stamps == {when}


def test_an_older_created_store_is_migrated_onward(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    db.Database(path, MIGRATIONS[:5])
    assert [r[0] for r in _migrations(db.Database(path))] == [v for v, _, _ in MIGRATIONS]


def test_a_failed_copy_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instance, "template", lambda key, build: "no_such_database")
    path = tmp_path / "s.duckdb"
    with pytest.raises(duckdb.Error):
        db.Database(path)
    assert not path.exists() and not Path(str(path) + ".wal").exists()
    assert instance.attached() == set()
