"""A private split's content stays refused under other names after its manifest leaves the disk (adversary, second
pass): the store keeps keyed fingerprints of every private content it has seen (migration 35), and every writer
(``splits add``, ``splits import``, ``evalgate init``) compares with them as well as with the manifests on disk.
The two findings themselves are in test_add.py; here the variants and the other writers, a store from before
migration 35, a store without the key, and what the store file holds."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import add_split, import_tiered, key_file, load_manifest, splits_dir, write_split
from evalgate.splits.twins import _item_text
from evalgate.store import Database, Store
from evalgate.store.migrations import MIGRATIONS

QUESTIONS = [f"What is {i} times 37 plus {i * i}?" for i in range(10)]
HELD = [{"id": f"p{i}", "question": q, "answer": str(i)} for i, q in enumerate(QUESTIONS)]


def _write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    return path


def _add_then_remove(home: Path, name: str = "held-out") -> None:
    """Add ``HELD`` as private split ``name``, then move its manifest off the splits directory."""
    add_split(name, "private", _write(home / "held.jsonl", HELD), store=Store())
    (splits_dir() / f"{name}.yaml").rename(home / f"{name}.yaml")


@pytest.mark.usefixtures("memory_store")
def test_renamed_field_padding_and_a_column_added_are_refused_after_the_manifest_left(home: Path) -> None:
    """The variants test_add.py refuses against a manifest on disk, against one that left it: a field renamed and
    re-cased, a column added, 20 private items padded with 21 filler items, one item among nine new ones."""
    _add_then_remove(home)
    variants = {
        "renamed": [{"id": f"y{i}", "problem": q.upper()} for i, q in enumerate(QUESTIONS)],
        "column": [{"id": f"x{i}", "question": q, "answer": str(i), "pad": "1"} for i, q in enumerate(QUESTIONS)],
        "padded": [*({"id": f"z{i}", "question": f"  {q} "} for i, q in enumerate(QUESTIONS)),
                   *({"id": f"f{i}", "question": f"filler {i}"} for i in range(21))],
        "one": [{"id": "w", "question": QUESTIONS[7]}, *({"id": f"g{i}", "question": f"new {i}"} for i in range(9))],
    }
    shared = {"renamed": "10 of the 10", "column": "10 of the 10", "padded": "10 of the 31", "one": "1 of the 10"}
    for name, items in variants.items():
        with pytest.raises(RefusedByPolicy, match=f"{shared[name]} items .* repeat private split held-out"):
            add_split(name, "dev", _write(home / f"{name}.jsonl", items), store=Store())
        assert not (splits_dir() / f"{name}.yaml").exists()
    # ids alone still need half (ids like 'p0' coincide across unrelated data); short answers are no copy
    alike = [*({"id": f"p{i}", "question": f"How many legs has animal {i}?", "answer": str(i)} for i in range(4)),
             *({"id": f"h{i}", "question": f"How many wheels has cart {i}?", "answer": str(i)} for i in range(6))]
    add_split("alike", "dev", _write(home / "alike.jsonl", alike), store=Store())
    assert load_manifest("alike").count == 10


@pytest.mark.usefixtures("memory_store")
def test_a_copy_written_with_unseen_or_look_alike_characters_is_refused(home: Path) -> None:
    """Session 18's adversary: the private items re-added as a dev split with one zero-width space in each
    question, or every Latin ``a`` written as a Cyrillic ``а`` (both read as the same questions), were added: the
    comparison normalised NFKC, case and white space only. It now reads them as ``core.text.as_read`` does."""
    _add_then_remove(home)
    variants = {
        "zero-width": [{"id": f"z{i}", "question": q.replace("times", "ti\u200bmes")} for i, q in enumerate(QUESTIONS)],
        "joiner": [{"id": f"j{i}", "question": q.replace("plus", "pl\u034fus")} for i, q in enumerate(QUESTIONS)],
        "cyrillic": [{"id": f"c{i}", "question": q.replace("a", "\u0430")} for i, q in enumerate(QUESTIONS)],
        "selector": [{"id": f"s{i}", "question": q + "\ufe0f"} for i, q in enumerate(QUESTIONS)],
    }
    for name, items in variants.items():
        with pytest.raises(RefusedByPolicy, match="10 of the 10 items .* repeat private split held-out"):
            add_split(name, "dev", _write(home / f"{name}.jsonl", items), store=Store())
        assert not (splits_dir() / f"{name}.yaml").exists()
    other = [{"id": f"o{i}", "question": f"Сколько будет {i} умножить на 37?"} for i in range(10)]  # Russian: new
    add_split("russian", "dev", _write(home / "russian.jsonl", other), store=Store())


@pytest.mark.usefixtures("memory_store")
def test_a_non_latin_private_split_fingerprinted_before_session_18_is_still_found(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store's fingerprints of a private split in Cyrillic made under the earlier normalisation (NFKC, case,
    white space), which the look-alike step changes: a verbatim copy under new ids is still refused, through the
    earlier normalisation's prints of the new items."""
    import evalgate.splits.twins as twins

    russian = [{"id": f"r{i}", "question": f"Сколько будет {i} умножить на 37 плюс {i * i}?"} for i in range(10)]
    with monkeypatch.context() as m:
        m.setattr(twins, "_norm", twins._norm_nfkc_only)  # the store as an earlier evalgate recorded it
        add_split("russian-held", "private", _write(home / "ru.jsonl", russian), store=Store())
    (splits_dir() / "russian-held.yaml").rename(home / "russian-held.yaml")  # compared by its prints alone
    assert twins._norm(russian[0]["question"]) != twins._norm_nfkc_only(russian[0]["question"])
    copy = [{"id": f"k{i}", "question": it["question"]} for i, it in enumerate(russian)]
    with pytest.raises(RefusedByPolicy, match="10 of the 10 items .* repeat private split russian-held"):
        add_split("ru-copy", "dev", _write(home / "ru-copy.jsonl", copy), store=Store())


@pytest.mark.usefixtures("memory_store")
def test_a_refusal_says_whether_text_or_ids_alone_matched(home: Path) -> None:
    """Fresh-user finding: two unrelated rows numbered by --row-ids (ids 0 and 1) were refused as a copy of a
    private split numbered the same way, 'same id or same text', with no hint that only the ids matched."""
    add_split("held-rows", "private", _write(home / "rows.jsonl",
                                              [{"id": str(i), "question": q} for i, q in enumerate(QUESTIONS)]),
              store=Store())
    unrelated = [{"id": "0", "question": "Who wrote Hamlet?"}, {"id": "1", "question": "Name a prime number."}]
    with pytest.raises(RefusedByPolicy) as e:  # 2 of 2 by id: at least half (NEAR_DUPLICATE_SHARE)
        add_split("mine", "dev", _write(home / "mine.jsonl", unrelated), store=Store())
    assert "2 of the 2 items" in str(e.value) and "(same id only: ids such as 0 or 1 coincide" in str(e.value)
    assert "--map id=COLUMN" in str(e.value)
    mixed = [{"id": "0", "question": "Who wrote Hamlet?"}, {"id": "x", "question": QUESTIONS[3]}]
    with pytest.raises(RefusedByPolicy, match=r"2 of the 2 items .*\(1 by text, 1 by id alone\)"):
        add_split("mixed", "dev", _write(home / "mixed.jsonl", mixed), store=Store())
    with pytest.raises(RefusedByPolicy, match=r"1 of the 2 items .*\(same text\)"):
        add_split("copy", "dev", _write(home / "copy.jsonl", [{"id": "y", "question": QUESTIONS[4]},
                                                              {"id": "z", "question": "Name a prime number."}]),
                  store=Store())


@pytest.mark.usefixtures("memory_store")
def test_splits_import_of_a_removed_private_splits_items_is_refused_and_writes_nothing(home: Path) -> None:
    """``splits import`` (``import_tiered``, as a dataset plugin calls it) deals items into four tiers: a removed
    private split's items are refused as before it was removed; the import's own private split is recorded too."""
    items = [{"id": f"b{i}", "q": f"benchmark question number {i} about rivers"} for i in range(40)]
    import_tiered("bench", items, {"source": "bench.jsonl"}, store=Store())
    private_ids = {it["id"] for it in _private_items("bench-private")}
    assert [(c.split, c.how, c.items) for c in Store().private_contents()] == [("bench-private", "imported", 10)]
    for tier in ("smoke", "dev", "public", "private"):
        (splits_dir() / f"bench-{tier}.yaml").unlink()
    before = sorted(p.name for p in splits_dir().iterdir())
    renamed = [{"id": f"r{i}", "q": it["q"]} for i, it in enumerate(items)]
    with pytest.raises(RefusedByPolicy, match="repeat private split bench-private .*no longer in"):
        import_tiered("leak", renamed, {"source": "plugin data"}, store=Store())
    assert sorted(p.name for p in splits_dir().iterdir()) == before
    # the public part alone (none of the private items): imported
    public_only = [it for it in items if it["id"] not in private_ids]
    import_tiered("again", [{"id": f"a{i}", "q": it["q"]} for i, it in enumerate(public_only)], {"source": "x"},
                  store=Store())
    assert load_manifest("again-private").count == 7  # 30 = 8 smoke + 22 dealt: 8, 7, 7


def _private_items(name: str) -> list[dict]:
    from evalgate.splits.data import read_unlogged

    return read_unlogged(load_manifest(name))


def test_evalgate_init_from_a_removed_private_splits_items_is_refused(home: Path, tmp_path: Path) -> None:
    """``evalgate init --from`` a copy of a private split whose manifest left the disk: refused before the
    repository's directory is made, logged under the private split's name in the store it was added to."""
    from evalgate.scaffold.starter import InitOptions, init_project

    _add_then_remove(home)
    copy = _write(tmp_path / "copy.jsonl", [{"id": f"c{i}", "question": q, "answer": str(i)}
                                            for i, q in enumerate([*QUESTIONS, *(f"extra {j}" for j in range(4))])])
    with pytest.raises(RefusedByPolicy, match="repeat private split held-out"):
        init_project(InitOptions(benchmark="custom", name="fresh", source=copy, directory=tmp_path / "repo"))
    assert not (tmp_path / "repo").exists()
    assert [r.outcome for r in Store().access_rows("held-out")] == ["added", "refused"]


def _old_store(path: Path) -> None:
    """A store as evalgate wrote it before migration 35 (no record of private contents)."""
    Database(path, [m for m in MIGRATIONS if m[0] < 35])


def test_a_store_from_before_migration_35_learns_the_private_splits_on_disk_at_its_first_check(home: Path) -> None:
    """A private split added before the upgrade (no fingerprints) is recorded when a check first sees its manifest
    (``seen on disk``): then its replacement, or its manifest leaving, no longer frees its items. A private split
    whose manifest left before the store's first check is not known (the documented limit: its text was never in
    the store)."""
    db = home / "home" / "evalgate.duckdb"
    _old_store(db)
    write_split("held-out", "private", HELD, {"source": "before the upgrade"})
    write_split("gone", "private", [{"id": "g0", "question": "A question that left before any check ran"}], {})
    (splits_dir() / "gone.yaml").unlink()
    assert Store().private_contents() == []  # opening the store applied migration 35: the tables, empty
    add_split("unrelated", "dev", _write(home / "u.jsonl", [{"id": "u", "question": "nothing private in here"}]),
              store=Store())
    assert [(c.split, c.how) for c in Store().private_contents()] == [("held-out", "seen on disk")]
    add_split("held-out", "private", _write(home / "other.jsonl", [{"id": "o", "question": "other data, replaced"}]),
              replace=True, store=Store())
    with pytest.raises(RefusedByPolicy, match="repeat private split held-out \\(the data it held before a repl"):
        add_split("leak", "dev", _write(home / "held.jsonl", HELD), store=Store())
    add_split("not-known", "dev", _write(home / "gone.jsonl", [{"id": "g0", "question":
                                                                 "A question that left before any check ran"}]),
              store=Store())


def test_the_store_holds_keyed_fingerprints_only_and_needs_the_key_to_compare(home: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """No item text and no bare sha256 of it in the store file (anyone holding it could confirm a guessed item);
    the fingerprints are HMACs under the split key, so under another key nothing matches. Without the key the check
    is today's: an identical content is refused (by its recorded content hash, its manifest gone too), a
    re-formatted copy cannot be recognised."""
    _add_then_remove(home)
    db = home / "home" / "evalgate.duckdb"
    raw = db.read_bytes() + (db.with_suffix(".duckdb.wal").read_bytes() if db.with_suffix(".duckdb.wal").exists()
                             else b"")
    for it in HELD:
        bare = hashlib.sha256(_item_text(it).encode()).hexdigest()
        assert it["question"].encode() not in raw and bare.encode() not in raw
    with Store().connect() as con:
        kinds = dict(con.execute("SELECT kind, count(*) FROM private_fingerprints GROUP BY kind").fetchall())
    assert kinds == {"id": 10, "text": 10, "value": 10}  # each question is 16+ characters; each answer is not
    copy = _write(home / "copy.jsonl", [{"id": f"x{i}", "question": q.upper()} for i, q in enumerate(QUESTIONS)])
    same = _write(home / "same.jsonl", HELD)
    monkeypatch.setenv("EVALGATE_PRIVATE_KEY_FILE", str(home / "another.key"))  # another key: created by the add
    add_split("other-key", "private", _write(home / "fresh.jsonl", [{"id": "f", "question": "fresh private item"}]),
              store=Store())
    add_split("copy-1", "dev", copy, store=Store())  # fingerprints under the other key match nothing
    key_file().unlink()
    with pytest.raises(RefusedByPolicy, match="10 of the 10 items .* repeat private split held-out"):
        add_split("same", "dev", same, store=Store())
    add_split("copy-2", "dev", copy, store=Store())
    assert not os.path.exists(splits_dir() / "same.yaml") and load_manifest("copy-2").count == 10
