"""Migration 4: the run_prompts table records every item's rendered prompt (text stored once, by hash)."""

from pathlib import Path

import duckdb

from evalgate.store import Store


def test_migration_6_adds_run_prompts_and_texts_are_stored_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    rows = [{"item_id": "b", "prompt_sha256": "h1", "prompt_tokens": 12, "bos_count": 1, "bos_added": True,
             "system_merged": False},
            {"item_id": "a", "prompt_sha256": "h1", "prompt_tokens": 12, "bos_count": 1, "bos_added": True,
             "system_merged": True}]
    store.put_run_prompts("r1", rows, {"h1": "same prompt"})
    store.put_run_prompts("r2", rows[:1], {"h1": "same prompt"})
    got = store.run_prompts("r1")
    assert [(r["item_id"], r["text"], r["system_merged"]) for r in got] == [("a", "same prompt", True),
                                                                            ("b", "same prompt", False)]
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT name FROM schema_migrations WHERE version=4").fetchone() == ("run_prompts",)
    cols = [r[0] for r in con.execute("DESCRIBE run_prompts").fetchall()]
    assert cols == ["run_id", "item_id", "prompt_sha256", "prompt_tokens", "bos_count", "bos_added",
                    "system_merged"]
    assert con.execute("SELECT count(*) FROM prompts").fetchone() == (1,)
    con.close()
