"""`splits add` never replaces a split silently, never changes a tier, and refuses empty files (fresh-user
findings: a private split could be overwritten by dev data with exit 0 and nothing logged)."""

import json
from pathlib import Path

import pytest

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.splits import add_split, load_manifest, splits_dir
from evalgate.store import Store
from evalgate.views.audit import verify_chain

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


def _jsonl(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "q": i}) + "\n" for i in ids))
    return path


def test_existing_split_needs_replace_and_keeps_its_tier(home: Path) -> None:
    a = _jsonl(home / "a.jsonl", ["x1", "x2"])
    b = _jsonl(home / "b.jsonl", ["y1"])
    add_split("secret", "private", a, store=Store())
    with pytest.raises(BadInput, match="already exists .*pass --replace"):
        add_split("secret", "private", b, store=Store())
    with pytest.raises(BadInput, match="tier private; a split's tier never changes"):
        add_split("secret", "dev", b, replace=True, store=Store())
    assert load_manifest("secret").count == 2 and load_manifest("secret").tier == "private"
    add_split("secret", "private", b, replace=True, actor="carol", store=Store())
    assert load_manifest("secret").count == 1
    rows = Store().access_rows("secret")
    assert [(r.outcome, r.actor, r.purpose) for r in rows] == [
        ("added", "test-actor", "add-split"), ("refused", "test-actor", "add-split"),
        ("refused", "test-actor", "replace-data"), ("replaced", "carol", "replace-data")]
    assert "tier never changes" in rows[2].detail
    assert "(2 items) -> " in rows[3].detail and "(1 items)" in rows[3].detail


def test_empty_file_and_bad_policy_are_bad_input(home: Path) -> None:
    empty = home / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(BadInput, match="holds no records"):
        add_split("e", "dev", empty, store=Store())
    with pytest.raises(BadInput, match="invalid policy option"):
        add_split("p", "public", _jsonl(home / "p.jsonl", ["a"]), policy={"max_reads": -3}, store=Store())
    assert not (home / "splits" / "e.yaml").exists() and not (home / "splits" / "p.yaml").exists()


def test_renaming_private_content_does_not_reset_its_budget(home: Path) -> None:
    """Issue 13 point 3: 'splits add other-name --tier private --file same.jsonl' used to give a fresh budget."""
    same = _jsonl(home / "same.jsonl", [f"p{i}" for i in range(10)])
    add_split("held-out", "private", same, store=Store())
    for name, tier in (("other-name", "private"), ("leak", "dev")):
        with pytest.raises(RefusedByPolicy, match="repeat private split held-out"):
            add_split(name, tier, same, actor="mallory", store=Store())
        assert not (splits_dir() / f"{name}.yaml").exists()
    # A near-duplicate: 6 of 10 items copied (ids renamed, text re-cased and re-spaced) with 4 new ones.
    near = home / "near.jsonl"
    near.write_text("".join(json.dumps({"id": f"n{i}", "q": f"  P{i} "}) + "\n" for i in range(6))
                    + "".join(json.dumps({"id": f"new{i}", "q": f"new {i}"}) + "\n" for i in range(4)))
    with pytest.raises(RefusedByPolicy, match="6 of the 10 items"):
        add_split("renamed", "private", near, actor="mallory", store=Store())
    flagged = [r for r in Store().access_rows("held-out") if r.outcome == "refused"]
    assert [(r.actor, r.purpose) for r in flagged] == [("mallory", "add-split")] * 3
    assert [r.outcome for r in Store().access_rows("other-name")] == ["refused"]
    # Unrelated content is added, and the addition is logged.
    add_split("fresh", "private", _jsonl(home / "fresh.jsonl", ["f1", "f2"]), store=Store())
    assert [(r.outcome, r.purpose) for r in Store().access_rows("fresh")] == [("added", "add-split")]
    assert verify_chain(Store())["ok"]


def test_integer_ids_are_accepted_as_their_decimal_text(home: Path) -> None:
    """Issue 28 item 18: user data often numbers its items (``"id": 1``); such a split was refused. An integer id is
    stored as its text, so the split is the same as one written with ``"1"``, ``"2"`` (same content hash)."""
    from evalgate.splits import SplitManager

    ints, strs = home / "ints.jsonl", home / "strs.jsonl"
    ints.write_text('{"id": 1, "q": "a"}\n{"id": 2, "q": "b"}\n{"id": -3, "q": "c"}\n')
    strs.write_text('{"id": "1", "q": "a"}\n{"id": "2", "q": "b"}\n{"id": "-3", "q": "c"}\n')
    add_split("numbered", "dev", ints, store=Store())
    add_split("named", "dev", strs, store=Store())
    assert load_manifest("numbered").content_sha256 == load_manifest("named").content_sha256
    items = SplitManager(Store()).open("numbered", "tuning", "alice").items
    assert [it["id"] for it in items] == ["1", "2", "-3"]


@pytest.mark.parametrize("lines, message", [
    ('{"id": 1, "q": "a"}\n{"id": "1", "q": "b"}\n', "2: duplicate id '1'"),  # equal as text
    ('{"id": 1.5, "q": "a"}\n', "1: each record must be a JSON object with a non-empty string or integer 'id'; "
                                "this one has 'id' 1.5 (float)"),
    ('{"id": true, "q": "a"}\n', "1: each record must be a JSON object with a non-empty string or integer 'id'; "
                                "this one has 'id' true (bool)"),
    ('{"id": "", "q": "a"}\n', "1: each record must be a JSON object with a non-empty string or integer 'id'; "
                              "this one has 'id' \"\" (str)"),
    ('{"q": "a"}\n', "1: each record must be a JSON object with a non-empty string or integer 'id'; "
                    "this one has no 'id'"),
])
def test_other_ids_are_one_clear_error_naming_the_line(home: Path, lines: str, message: str) -> None:
    f = home / "bad.jsonl"
    f.write_text(lines)
    with pytest.raises(BadInput) as e:
        add_split("bad", "dev", f, store=Store())
    assert f"{f}:{message}" in e.value.message
    assert not (splits_dir() / "bad.yaml").exists()


def test_padding_a_private_copy_with_new_items_is_still_refused(home: Path) -> None:
    """Adversary (14:20 UTC): 20 private items with renamed ids plus 21 filler items made 'splits add copy --tier dev'
    succeed, since only 20 of 41 (under half) matched: the whole private set became a dev split. Any item repeating a
    private item's text now refuses; ids alone still need half (ids like '0', '1' coincide across unrelated data)."""
    add_split("held-out", "private", _jsonl(home / "held.jsonl", [f"p{i}" for i in range(20)]), store=Store())
    padded = home / "padded.jsonl"
    padded.write_text("".join(json.dumps({"id": f"x{i}", "q": f"p{i}"}) + "\n" for i in range(20))
                      + "".join(json.dumps({"id": f"f{i}", "q": f"filler {i}"}) + "\n" for i in range(21)))
    one = home / "one.jsonl"  # a single private item among 9 new ones
    one.write_text(json.dumps({"id": "y", "q": " P7 "}) + "\n"
                   + "".join(json.dumps({"id": f"g{i}", "q": f"new {i}"}) + "\n" for i in range(9)))
    for name, file, shared in (("copy", padded, "20 of the 41 items"), ("one", one, "1 of the 10 items")):
        with pytest.raises(RefusedByPolicy, match=f"{shared} of .* repeat private split held-out"):
            add_split(name, "dev", file, actor="mallory", store=Store())
        assert not (splits_dir() / f"{name}.yaml").exists()
        assert [r.outcome for r in Store().access_rows(name)] == ["refused"]
    # 4 of 10 ids shared with other texts (unrelated data numbered alike): added
    alike = home / "alike.jsonl"
    alike.write_text("".join(json.dumps({"id": f"p{i}", "q": f"other {i}"}) + "\n" for i in range(4))
                     + "".join(json.dumps({"id": f"h{i}", "q": f"other {i + 4}"}) + "\n" for i in range(6)))
    add_split("alike", "dev", alike, store=Store())
    assert load_manifest("alike").count == 10


def test_a_tiered_import_of_private_items_is_refused_before_anything_is_written(home: Path) -> None:
    """Adversary: 'splits import' of a dataset plugin, and 'evalgate init --from', deal items into smoke/dev/public/
    private (splits.tiering) without the check 'splits add' makes, so a private split's items given to them landed
    in the new dev and public splits in clear. Same refusal now, logged, nothing written; a reimport under the same
    prefix (its private part is the existing private split) still works."""
    from evalgate.splits import import_tiered

    items = [{"id": f"p{i}", "q": f"question {i}"} for i in range(40)]
    import_tiered("bench", items, {"source": "bench.jsonl"}, store=Store())
    before = sorted(p.name for p in splits_dir().iterdir())
    renamed = [{"id": f"r{i}", "q": it["q"]} for i, it in enumerate(items)]
    with pytest.raises(RefusedByPolicy, match="repeat private split bench-private"):
        import_tiered("leak", renamed, {"source": "plugin data"}, store=Store())
    assert sorted(p.name for p in splits_dir().iterdir()) == before
    refused = [r for r in Store().access_rows("bench-private") if r.outcome == "refused"]
    assert len(refused) == 1 and "plugin data" in refused[0].detail
    import_tiered("bench", items, {"source": "bench.jsonl"}, store=Store())  # the same data again: the same four splits
    # 40 = 8 smoke + 32 dealt round-robin dev/public/private: 11, 11, 10
    assert load_manifest("bench-private").count == 10 and sorted(p.name for p in splits_dir().iterdir()) == before


def test_a_private_copy_with_a_column_added_or_a_field_renamed_is_refused(home: Path) -> None:
    """Adversary (14:48 UTC): the text compared was the whole item with its field names, so a copy of the private
    items with a column added ('pad': '1') or the question's field renamed (--map problem=question) was added as a
    dev split. A long field value (16 characters or more, normalised) of a private item now refuses it too."""
    questions = [f"What is {i} times 37 plus {i * i}?" for i in range(10)]
    held = home / "held.jsonl"
    held.write_text("".join(json.dumps({"id": f"p{i}", "question": q, "answer": str(i)}) + "\n"
                            for i, q in enumerate(questions)))
    add_split("held-out", "private", held, store=Store())
    padded, renamed = home / "padded.jsonl", home / "renamed.jsonl"
    padded.write_text("".join(json.dumps({"id": f"x{i}", "question": q, "answer": str(i), "pad": "1"}) + "\n"
                              for i, q in enumerate(questions)))
    renamed.write_text("".join(json.dumps({"id": f"y{i}", "problem": q.upper()}) + "\n"
                               for i, q in enumerate(questions)))
    for name, file in (("padded", padded), ("renamed", renamed)):
        with pytest.raises(RefusedByPolicy, match="10 of the 10 items .* repeat private split held-out"):
            add_split(name, "dev", file, store=Store())
        assert not (splits_dir() / f"{name}.yaml").exists()
    # the same short answers ("3") with other questions are no copy
    other = home / "other.jsonl"
    other.write_text("".join(json.dumps({"id": f"o{i}", "question": f"How many legs has animal {i}?",
                                         "answer": str(i)}) + "\n" for i in range(10)))
    add_split("other", "dev", other, store=Store())
    assert load_manifest("other").count == 10


def _write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    return path


TRAINS = [{"id": f"p{i}", "question": f"What is private question number {i} about trains?"} for i in range(6)]


def test_a_private_split_whose_manifest_left_the_disk_still_refuses_its_copies(home: Path) -> None:
    """Adversary (second pass): with its manifest moved away (the encrypted data file even left in place), a key
    holder added the private items plus one as a dev split (read freely) and as a new private split (a fresh budget
    of 4), since the check compared with the manifests on disk only. The store now keeps keyed fingerprints of
    every private content added, so both are refused, logged under both names."""
    add_split("P", "private", _write(home / "p.jsonl", TRAINS), store=Store())
    plus_one = _write(home / "p2.jsonl", [*TRAINS, {"id": "new", "question": "n"}])
    with pytest.raises(RefusedByPolicy, match="6 of the 7 items .* repeat private split P \\(same text\\)"):
        add_split("D", "dev", plus_one, store=Store())
    (splits_dir() / "P.yaml").rename(home / "P.yaml")
    for name, tier in (("D", "dev"), ("P2", "private")):
        with pytest.raises(RefusedByPolicy, match="6 of the 7 items .* repeat private split P \\(sha256 [0-9a-f]{12}; "
                                                  "its manifest is no longer in"):
            add_split(name, tier, plus_one, actor="mallory", store=Store())
        assert not (splits_dir() / f"{name}.yaml").exists()
        assert [r.outcome for r in Store().access_rows(name)] == ["refused"] * (2 if name == "D" else 1)
    assert [(r.outcome, r.actor) for r in Store().access_rows("P")] == [
        ("added", "test-actor"), ("refused", "test-actor"), ("refused", "mallory"), ("refused", "mallory")]
    # the same name under another tier is no way round it either (the manifest that would refuse a tier change
    # is gone); the private split itself may be added again under its name (its access-log rows are still its own)
    with pytest.raises(RefusedByPolicy, match="repeat private split P"):
        add_split("P", "dev", plus_one, store=Store())
    add_split("P", "private", plus_one, store=Store())
    assert load_manifest("P").count == 7 and verify_chain(Store())["ok"]


def test_the_old_items_of_a_replaced_private_split_stay_private(home: Path) -> None:
    """Adversary (second pass): ``splits add P --replace`` with other items (logged, tier kept), then P's old items
    added as a dev split were accepted, the old private items read freely. Refused now, naming the replaced data;
    P itself may take its old items back."""
    new = [{"id": f"o{i}", "question": f"Entirely other private question {i} about boats"} for i in range(6)]
    old_file, new_file = _write(home / "old.jsonl", TRAINS), _write(home / "new.jsonl", new)
    add_split("P", "private", old_file, store=Store())
    add_split("P", "private", new_file, replace=True, store=Store())
    with pytest.raises(RefusedByPolicy, match="6 of the 6 items .* repeat private split P \\(the data it held before "
                                              "a replacement, sha256 [0-9a-f]{12}\\)"):
        add_split("D", "dev", old_file, store=Store())
    one = _write(home / "one.jsonl", [{"id": "x", "question": "  WHAT is private question number 3 about trains? "},
                                      *({"id": f"f{i}", "question": f"filler {i}"} for i in range(9))])
    with pytest.raises(RefusedByPolicy, match="1 of the 10 items"):
        add_split("D", "dev", one, store=Store())
    assert not (splits_dir() / "D.yaml").exists()
    add_split("P", "private", old_file, replace=True, store=Store())
    assert load_manifest("P").count == 6 and [r.outcome for r in Store().access_rows("P")] == [
        "added", "replaced", "refused", "refused", "replaced"]


def test_splits_add_and_import_print_one_json_document_with_json(home: Path) -> None:
    """README: '--json prints one JSON document on stdout'; 'splits add' and 'splits import' had no --json (a new
    user's CI step could not read what was written). The document is the manifest as 'splits list --json' gives it,
    with the manifest's path; an error is the usual {"error", "exit_code"} document."""
    from click.testing import CliRunner

    from evalgate.cli import main

    data = _jsonl(home / "a.jsonl", ["x1", "x2", "x3"])
    r = CliRunner().invoke(main, ["splits", "add", "mine", "--tier", "dev", "--file", str(data), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    listed = json.loads(CliRunner().invoke(main, ["splits", "list", "--json"]).stdout)
    assert doc == {**listed[0], "path": str(splits_dir() / "mine.yaml"), "replaced": False}
    assert (doc["name"], doc["tier"], doc["count"], doc["encrypted"]) == ("mine", "dev", 3, False)
    bad = CliRunner().invoke(main, ["splits", "add", "mine", "--tier", "dev", "--file", str(data), "--json"])
    assert bad.exit_code == 2 and json.loads(bad.stdout)["exit_code"] == 2  # exists: --replace needed

    src = home / "toy.jsonl"  # the registry's toy importer is not here: a GSM8K-shaped file through 'gsm8k'
    src.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": f"x\n#### {i + 1}"}) + "\n"
                           for i in range(20)))
    r = CliRunner().invoke(main, ["splits", "import", "gsm8k", "--from", str(src), "--json"])
    assert r.exit_code == 0, r.output
    docs = json.loads(r.stdout)
    assert [(d["name"], d["tier"]) for d in docs] == [("gsm8k-smoke", "smoke"), ("gsm8k-dev", "dev"),
                                                      ("gsm8k-public", "public"), ("gsm8k-private", "private")]
    assert sum(d["count"] for d in docs) == 20 and docs[3]["encrypted"] is True
    assert all(d["path"] == str(splits_dir() / f"{d['name']}.yaml") for d in docs)
