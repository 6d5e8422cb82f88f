"""The generation cache reuses a sample only under the same generation settings (issue 13 point 11): backend,
engine version, dtype and every option that changes outputs; each run records where its samples came from."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from evalgate.backends.settings import generation_settings, settings_sha256
from evalgate.core.errors import EvalgateError
from evalgate.demo.train import addition_items
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.runner.test_record import addition_protocol
from tests.store.test_run_prompts import _gen, put_old_generation


def test_settings_differ_by_backend_dtype_and_engine_but_not_by_spelling_of_defaults() -> None:
    from evalgate.backends.base import HFOptions, VLLMOptions

    base = settings_sha256(generation_settings("hf", HFOptions()))
    assert settings_sha256(generation_settings("hf", HFOptions(device="cpu"))) == base  # the default, spelt out
    assert settings_sha256(generation_settings("hf", HFOptions(token_budget=1))) == base  # batching only
    assert settings_sha256(generation_settings("hf", HFOptions(dtype="bfloat16"))) != base
    assert settings_sha256(generation_settings("vllm", VLLMOptions())) != base
    assert generation_settings("hf", HFOptions(device="cuda:1"))["device"] == "cuda"
    assert set(generation_settings("hf", HFOptions())["versions"]) == {"transformers", "torch"}


def test_migration_7_keeps_old_rows_but_never_reuses_them(tmp_path: Path) -> None:
    from evalgate.store import Database
    from evalgate.store.migrations import MIGRATIONS

    path = tmp_path / "s.duckdb"
    old_schema = [x for x in MIGRATIONS if x[0] < 8]  # a store as it was before migration 7
    put_old_generation(Store(Database(path, old_schema)), "ck", "ph", _gen("a", "p1", "old text"))
    store = Store(path)
    keys = [("a", 0, 7)]
    assert store.cached_generations("ck", "ph", keys, {"a": "p1"}, "hf-settings") == {}
    store.put_generations("ck", "ph", [_gen("a", "p1", "new text")], {}, "hf-settings", "run-1")
    hit = store.cached_generations("ck", "ph", keys, {"a": "p1"}, "hf-settings")[("a", 0, 7)]
    assert hit["text"] == "new text" and hit["run_id"] == "run-1"
    assert store.cached_generations("ck", "ph", keys, {"a": "p1"}, "vllm-settings") == {}
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM generations").fetchone() == (2,)
    con.close()


def test_another_backend_never_succeeds_from_hf_samples(home: Path, tiny_checkpoint: Path) -> None:
    write_split("add-one", "dev", addition_items("dev", 1), {"source": "test"})
    proto = addition_protocol(home, max_tokens=2)
    store = Store()
    first = evaluate(proto, tiny_checkpoint, "add-one", RunOptions(progress=False), store)
    assert first["counts"]["samples_from"] == {first["run_id"]: 1}
    assert first["backend"]["generation_settings"]["backend"] == "hf"
    again = evaluate(proto, tiny_checkpoint, "add-one", RunOptions(backend_options={"device": "cpu"}, progress=False),
                     store)
    assert again["counts"]["cached"] == 1 and again["counts"]["samples_from"] == {first["run_id"]: 1}
    # the fresh-user finding: an openai run (no server here) used to "succeed" from the hf samples
    with pytest.raises(EvalgateError):
        evaluate(proto, tiny_checkpoint, "add-one", RunOptions(
            backend="openai", backend_options={"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 0},
            progress=False), store)
    assert [r.status for r in store.runs()] == ["complete", "complete", "failed"]
