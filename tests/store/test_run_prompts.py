"""Migration 4: the run_prompts table records every item's rendered prompt (text stored once, by hash); migration 5:
the rendered prompt's hash is part of the generation cache key."""

import pytest

from evalgate.store import RunPrompt, Store
from evalgate.store.db import open_database
from tests.helpers.store_suite import StoreBackend

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server


def test_migration_4_adds_run_prompts_and_texts_are_stored_once(store_backend: StoreBackend) -> None:
    store = store_backend.store()
    rows = [{"item_id": "b", "prompt_sha256": "h1", "prompt_tokens": 12, "bos_count": 1, "bos_added": True,
             "system_merged": False},
            {"item_id": "a", "prompt_sha256": "h1", "prompt_tokens": 12, "bos_count": 1, "bos_added": True,
             "system_merged": True}]
    store.put_run_prompts("r1", rows, {"h1": "same prompt"})
    store.put_run_prompts("r2", rows[:1], {"h1": "same prompt"})
    got = store.run_prompts("r1")
    assert got == [RunPrompt("r1", "a", "h1", 12, 1, True, True, "same prompt"),
                   RunPrompt("r1", "b", "h1", 12, 1, True, False, "same prompt")]
    with store.connect() as con:
        assert con.execute("SELECT name FROM schema_migrations WHERE version=4").fetchone() == ("run_prompts",)
        cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE "
                                          "table_catalog=current_database() AND table_schema=current_schema() AND "
                                          "table_name='run_prompts' "
                                          "ORDER BY ordinal_position").fetchall()]
        assert cols == ["run_id", "item_id", "prompt_sha256", "prompt_tokens", "bos_count", "bos_added",
                        "system_merged"]
        assert con.execute("SELECT count(*) FROM prompts").fetchone() == (1,)


def _gen(item: str, prompt_sha: str, text: str) -> dict:
    return {"item_id": item, "sample_index": 0, "seed": 7, "prompt_sha256": prompt_sha, "text": text,
            "prompt_tokens": 3, "completion_tokens": 2, "finish_reason": "stop"}


def put_old_generation(store: Store, checkpoint: str, protocol: str, g: dict) -> None:
    """Insert a generation row as evalgate wrote it before migration 7 (11 columns, no settings hash or run)."""
    with store.connect() as con:
        con.execute("INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())",
                    [checkpoint, protocol, *(g[k] for k in ("item_id", "sample_index", "seed", "prompt_sha256",
                                                            "text", "prompt_tokens", "completion_tokens",
                                                            "finish_reason"))])


def test_migration_5_keeps_old_generations_and_puts_the_prompt_in_the_cache_key(store_backend: StoreBackend) -> None:
    from evalgate.store.migrations import MIGRATIONS

    old_schema = [x for x in MIGRATIONS if x[0] < 5]  # a store as it was before migration 5
    old = Store(open_database(store_backend.target, old_schema))
    put_old_generation(old, "ck", "ph", _gen("a", "p1", "old text"))
    old.db.close()
    store = store_backend.store()
    keys = [("a", 0, 7)]
    # the row written before the migration is still there and still hits under its own prompt
    assert store.cached_generations("ck", "ph", keys, {"a": "p1"})[("a", 0, 7)]["text"] == "old text"
    # the same item, sample and seed with another rendered prompt is a miss, and storing it keeps the old row
    assert store.cached_generations("ck", "ph", keys, {"a": "p2"}) == {}
    store.put_generations("ck", "ph", [_gen("a", "p2", "new text")], {"p2": "prompt two"})
    assert store.cached_generations("ck", "ph", keys, {"a": "p2"})[("a", 0, 7)]["text"] == "new text"
    assert store.cached_generations("ck", "ph", keys, {"a": "p1"})[("a", 0, 7)]["text"] == "old text"
    with store.connect() as con:
        assert con.execute("SELECT name FROM schema_migrations WHERE version=5").fetchone() == ("prompt_in_cache_key",)
        assert con.execute("SELECT count(*) FROM generations").fetchone() == (2,)
