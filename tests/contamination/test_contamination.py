"""Contamination check: per-field n-gram overlap with a streamed corpus, threshold flags, robustness to re-wrapping,
near duplicates, every tier, and the parallel scan giving the serial scan's result."""

import json
import re
import textwrap
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.datasets import import_dataset
from evalgate.datasets.gsm8k import gsm8k_items
from evalgate.splits import RELEASE_GATE, TIERS, Policy, SplitManager, partition, write_split
from evalgate.splits.contamination import (
    DEFAULT_JACCARD,
    NgramTable,
    check_contamination,
    corpus_chunks,
    overlaps,
    tokens,
)
from evalgate.store import Store
from evalgate.views.audit import audit_summary
from tests.conftest import REPO, SHARED_DATA

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

# Item texts of 22 distinct words have 22 - 13 + 1 = 10 distinct 13-grams.
LOW = [f"alpha{i}" for i in range(22)]
HIGH = [f"beta{i}" for i in range(22)]
# The corpus holds LOW's first 13 words (1 of its 10 13-grams: overlap 0.1) and HIGH's first 20 words (13-grams
# starting at words 0..7: 8 of 10, overlap 0.8), separated by filler that matches nothing.
FILLER = "the quick brown fox jumps over the lazy dog"
CORPUS = f"{FILLER} {' '.join(LOW[:13])}. {FILLER}\n{', '.join(HIGH[:20])} {FILLER}\n"
ITEMS = {"low": " ".join(LOW), "high": "\n".join(" ".join(HIGH[i:i + 5]) for i in range(0, 22, 5))}


def rewrap(text: str, width: int) -> str:
    words = text.split()
    return "\n".join("   ".join(words[i:i + width]) + "\t" for i in range(0, len(words), width))


def scores(corpus: Path, n: int = 13, workers: int = 1, **kw) -> dict[str, tuple[float | None, bool]]:
    res, _ = overlaps({k: {"text": v} for k, v in ITEMS.items()}, corpus_chunks(corpus, **kw), n, 0.7,
                      workers=workers)
    return {r.id: (r.overlap, r.flagged) for r in res}


def test_threshold_flags_only_items_at_or_above_it(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    assert scores(corpus) == {"low": (0.1, False), "high": (0.8, True)}


def test_rewrapping_and_whitespace_do_not_change_the_overlap(tmp_path: Path) -> None:
    wrapped = tmp_path / "wrapped.txt"
    wrapped.write_text(rewrap(CORPUS, 3).upper())  # 3 words a line, extra spaces and tabs, other case
    assert scores(wrapped) == {"low": (0.1, False), "high": (0.8, True)}
    # Tiny chunks (a line or two each): n-grams spanning chunks are joined, in this process and in two workers.
    assert scores(wrapped, chunk_bytes=7) == {"low": (0.1, False), "high": (0.8, True)}
    assert scores(wrapped, chunk_bytes=7, workers=2) == {"low": (0.1, False), "high": (0.8, True)}
    # A single line of 200 bytes cut into 7-byte blocks at spaces gives the same result.
    one_line = tmp_path / "one_line.txt"
    one_line.write_text(CORPUS.replace("\n", " "))
    assert scores(one_line, chunk_bytes=7, workers=2) == {"low": (0.1, False), "high": (0.8, True)}


def test_jsonl_corpus_records_are_separate_documents(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    half = len(HIGH) // 2
    corpus.write_text(json.dumps({"text": " ".join(LOW[:13])}) + "\n"
                      + json.dumps({"messages": [{"role": "user", "content": " ".join(HIGH[:20])}]}) + "\n"
                      # HIGH's last 13 words split over two records: no n-gram spans the records.
                      + json.dumps({"text": " ".join(HIGH[9:half])}) + "\n"
                      + json.dumps({"text": " ".join(HIGH[half:])}) + "\n")
    assert scores(corpus) == {"low": (0.1, False), "high": (0.8, True)}
    assert scores(corpus, chunk_bytes=40, workers=2) == {"low": (0.1, False), "high": (0.8, True)}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{oops\n')
    with pytest.raises(BadInput, match=r"bad.jsonl:2: not valid JSON"):
        scores(bad)


def test_items_shorter_than_n_are_reported_not_flagged(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("short item")
    res, total = overlaps({"s": {"question": "short item"}}, corpus_chunks(corpus), 13, 0.7, jaccard=0.5)
    f = res[0].fields["question"]
    assert (f.ngrams, f.overlap, f.jaccard, res[0].flagged, total) == (0, None, None, False, 0)


def test_cli_reports_per_item_exits_1_when_flagged_and_logs_the_read(tmp_path: Path) -> None:
    write_split("qa", "dev", [{"id": k, "question": v} for k, v in ITEMS.items()], {"source": "test"})
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    r = CliRunner().invoke(main, ["splits", "contamination", "--split", "qa", "--corpus", str(corpus), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert {i["id"]: (i["fields"]["question"]["matched"], i["fields"]["question"]["ngrams"], i["flagged"])
            for i in doc["items"]} == {"low": (1, 10, False), "high": (8, 10, True)}
    text = CliRunner().invoke(main, ["splits", "contamination", "--split", "qa", "--corpus", str(corpus),
                                     "--threshold", "0.9"])
    assert text.exit_code == 0 and "0 of 2 items have a field at or above 0.9 13-gram overlap" in text.output
    rows = Store().access_rows("qa")
    assert [(r.purpose, r.outcome) for r in rows] == [("contamination-check", "read")] * 2


def test_a_hash_collision_is_not_reported_as_a_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With multiplier 1 a window's hash is the sum of its token ids, so the reversed n-gram collides with the
    # field's n-gram; the id-by-id confirmation must reject it.
    monkeypatch.setattr(NgramTable, "P", 1)
    words = [f"w{i}" for i in range(13)]
    field = {"x": {"text": " ".join(words)}}
    reversed_corpus, same_corpus = tmp_path / "rev.txt", tmp_path / "same.txt"
    reversed_corpus.write_text(" ".join(reversed(words)))
    same_corpus.write_text(" ".join(words))
    assert overlaps(field, corpus_chunks(reversed_corpus), 13)[0][0].overlap == 0.0
    assert overlaps(field, corpus_chunks(same_corpus), 13)[0][0].overlap == 1.0


@pytest.mark.parametrize("text", [
    "Janet’s ducks lay 16 eggs; she EATS three.", "Ａｂｃ ﬁne İstanbul café e\u0301 naïve Straße ½ x\u2024y ΣΑΣ",
    "snake_case, CamelCase and 3.14 -- tabs\tand\nnewlines", "日本語のテキスト　全角スペース", ""])
def test_tokens_are_the_nfkc_lower_case_word_regex_tokens(text: str) -> None:
    # The definition (module docstring): \w+ runs of the NFKC-normalised, lower-cased text.
    expected = re.findall(r"\w+", unicodedata.normalize("NFKC", text).lower())
    assert [t.decode() for t in tokens(text)] == expected


def test_every_tier_can_be_checked_and_the_check_spends_no_budget(tmp_path: Path) -> None:
    items = [{"id": k, "question": v} for k, v in ITEMS.items()]
    for tier in TIERS:
        policy = Policy(max_reads=1) if tier == "public" else None  # a second read would be refused
        write_split(f"qa-{tier}", tier, items, {"source": "test"}, policy=policy)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    reads = {t: {"private": 4, "public": 2}.get(t, 1) for t in TIERS}  # beyond the public read budget
    for tier in TIERS:
        for _ in range(reads[tier]):
            rep = check_contamination(f"qa-{tier}", corpus, store=Store())
            assert [it.id for it in rep.flagged] == ["high"] and rep.warnings == []
    store = Store()
    rows = store.access_rows()
    assert {(r.split, r.purpose, r.outcome) for r in rows} == {
        (f"qa-{t}", "contamination-check", "read") for t in TIERS}
    assert len(rows) == sum(reads.values())
    summary = audit_summary(store).as_dict()["splits"]
    assert summary["qa-private"]["reads"] == 4 and summary["qa-private"]["budget"]["used"] == 0
    assert summary["qa-public"]["budget"]["used"] == 0
    # The private tier's whole budget (4 release-gate reads) is still there, and the fifth is refused.
    mgr = SplitManager(store)
    for _ in range(4):
        mgr.open("qa-private", RELEASE_GATE, "ci-bot")
    with pytest.raises(RefusedByPolicy, match="used its budget of 4 reads"):
        mgr.open("qa-private", RELEASE_GATE, "ci-bot")


def test_other_readers_cannot_borrow_the_contamination_check_purpose() -> None:
    write_split("priv", "private", [{"id": "x", "question": "secret"}], {"source": "test"})
    write_split("pub", "public", [{"id": "x", "question": "open"}], {"source": "test"})
    mgr = SplitManager(Store())
    for split in ("priv", "pub"):  # e.g. `evalgate run --purpose contamination-check`
        with pytest.raises(RefusedByPolicy, match="reserved for 'evalgate splits contamination'"):
            mgr.open(split, "contamination-check", "mallory")
    assert [(r.split, r.outcome) for r in Store().access_rows()] == [("priv", "refused"), ("pub", "refused")]


# -- the case: GSM8K questions pasted into a 5,000-line corpus ------------------------------------------------
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
MATH500 = SHARED_DATA / "math500" / "test.jsonl"


def light_edit(text: str) -> str:
    """The issue's edit: "the" -> "a" (as a whole word, either case), full stops -> semicolons."""
    return re.sub(r"\bthe\b", "a", re.sub(r"\bThe\b", "A", text)).replace(".", ";")


@dataclass
class Gsm8kCase:
    corpus: Path
    leaked: set[str]
    edited: str
    tier_ids: dict[str, set[str]]  # split name -> item ids
    texts: dict[str, str]  # item id -> question


@pytest.fixture
def gsm8k_case(tmp_path: Path) -> Gsm8kCase:
    if not (GSM8K.is_file() and MATH500.is_file()):
        pytest.skip(f"needs {GSM8K} and {MATH500} (../shared/data beside the repository)")
    import_dataset("gsm8k", GSM8K, store=Store())
    items = {it["id"]: it for it in gsm8k_items(GSM8K)[0]}
    parts = partition(list(items))
    leaked = [parts["dev"][0], parts["public"][0], parts["private"][0]]
    # The edited copy: the dev item with the most "the"s, so that the edit breaks most of its 13-grams.
    edited = max(parts["dev"][1:], key=lambda i: len(re.findall(r"\bthe\b", items[i]["question"], re.I)))
    audit = [*leaked, edited, *parts["dev"][10:26]]
    write_split("gsm8k-audit", "human-audit", [items[i] for i in audit], {"source": "test"})
    # Filler: MATH-500 problems and solutions, line by line (unrelated mathematical text).
    filler = [ln for rec in map(json.loads, MATH500.read_text().splitlines())
              for ln in (rec["problem"] + "\n" + rec["solution"]).splitlines() if ln.strip()]
    lines = [filler[i % len(filler)] for i in range(5000)]
    q = [items[i]["question"] for i in leaked]
    lines[1000] = q[0]  # a line of its own
    lines[2000:2000] = textwrap.wrap(q[1], 60)[:2] + [" ".join(textwrap.wrap(q[1], 60)[2:])]  # wrapped
    lines[3000] = f"{lines[3000]} {q[2]} {lines[3001]}"  # inside a longer line
    lines.insert(4000, light_edit(items[edited]["question"]))
    lines = lines[:5000]  # the filler's last lines give way to the inserted ones
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    assert len(lines) == 5000 and corpus.read_text().count("\n") == 5000
    tier_ids = {f"gsm8k-{t}": set(ids) for t, ids in parts.items()} | {"gsm8k-audit": set(audit)}
    return Gsm8kCase(corpus, set(leaked), edited, tier_ids, {i: items[i]["question"] for i in items})


@pytest.mark.real_data
def test_gsm8k_verbatim_leaks_are_flagged_by_default_on_every_tier(gsm8k_case: Gsm8kCase) -> None:
    c = gsm8k_case
    for split, ids in c.tier_ids.items():
        # the defaults: 13-grams, 0.7, every text field on its own
        rep = check_contamination(split, c.corpus, store=Store())
        assert {it.id for it in rep.flagged} == c.leaked & ids, split
        if rep.sealed:  # private and human-audit: the flag only (test_oracle.py)
            assert all(it.fields == {} for it in rep.items), split
            continue
        for it in rep.flagged:
            assert it.fields["question"].overlap == 1.0 and it.fields["question"].flagged_by == ["exact"]
            assert it.fields["solution"].flagged_by == [] and it.fields["answer"].overlap is None
        if c.edited in ids:  # the edited copy is not caught by exact 13-grams
            edited = next(it for it in rep.items if it.id == c.edited)
            assert edited.fields["question"].overlap < 0.7 and not edited.flagged


@pytest.mark.real_data
def test_gsm8k_edited_copy_is_flagged_as_a_near_duplicate(gsm8k_case: Gsm8kCase) -> None:
    c = gsm8k_case
    for split, ids in c.tier_ids.items():
        rep = check_contamination(split, c.corpus, jaccard=DEFAULT_JACCARD, store=Store())
        assert {it.id for it in rep.flagged} == (c.leaked | {c.edited}) & ids, split
        for it in [] if rep.sealed else rep.items:  # a sealed split gives the flag only
            if it.id == c.edited:
                q = it.fields["question"]
                assert q.flagged_by == ["near-dup"] and q.jaccard is not None and q.jaccard >= DEFAULT_JACCARD
                assert q.overlap is not None and q.overlap < 0.7
            elif it.id in c.leaked:
                assert "exact" in it.fields["question"].flagged_by


@pytest.mark.real_data
def test_a_chunk_s_lines_at_once_find_what_each_line_alone_finds() -> None:
    """``NearDupIndex.best_many`` (the shingles of every line of a chunk in one pass) against ``best`` line by line:
    the same similarities on real lines (MATH-500 filler, GSM8K questions verbatim and lightly edited, a question
    inside a longer line) and on the edges: lines shorter than a shingle, empty, one word, non-ASCII."""
    if not (GSM8K.is_file() and MATH500.is_file()):
        pytest.skip(f"needs {GSM8K} and {MATH500} (../shared/data beside the repository)")
    from evalgate.splits.contamination import NearDupIndex

    questions = [it["question"] for it in gsm8k_items(GSM8K)[0][:100]]
    filler = [ln for rec in map(json.loads, MATH500.read_text().splitlines())
              for ln in (rec["problem"] + "\n" + rec["solution"]).splitlines() if ln.strip()][:600]
    lines = [*filler, *questions[:5], *map(light_edit, questions[5:20]), f"{filler[0]} {questions[20]}",
             "", "a", "abcd", "abcde", "café", "ünïcödé wörds", questions[21].upper()]
    index = NearDupIndex({(i, "question"): tokens(q) for i, q in enumerate(questions)}, DEFAULT_JACCARD)
    segments = [tokens(ln) for ln in lines]
    alone: dict = {}
    for seg in segments:
        index.best(seg, alone)
    together: dict = {}
    index.best_many(segments, together)
    assert together == alone
    assert {(i, "question") for i in [*range(5), 20, 21]} <= set(alone)  # verbatim copies found, at 1.0
    assert all(alone[(i, "question")] == 1.0 for i in [*range(5), 21])


@pytest.mark.real_data
def test_gsm8k_cli_protocol_fields_and_no_item_text_in_the_private_output(gsm8k_case: Gsm8kCase) -> None:
    c = gsm8k_case
    protocol = REPO / "protocols" / "gsm8k-cot.yaml"
    args = ["splits", "contamination", "--split", "gsm8k-private", "--corpus", str(c.corpus), "--near-dup"]
    r = CliRunner().invoke(main, [*args, "--protocol", str(protocol), "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["fields_from"] == "protocol gsm8k-cot.yaml" and doc["jaccard_threshold"] == DEFAULT_JACCARD
    assert {tuple(sorted(it)) for it in doc["items"]} == {("flagged", "id")}  # a private split: one bit per item
    assert [it["id"] for it in doc["items"] if it["flagged"]] == sorted(c.leaked & c.tier_ids["gsm8k-private"])
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 1 and "FLAG" in text.output
    for out in (r.output, text.output):
        for iid in c.tier_ids["gsm8k-private"]:
            words = c.texts[iid].split()
            assert " ".join(words[:4]) not in out and " ".join(words[-4:]) not in out


@pytest.mark.parametrize("flags, message", [
    (["--jaccard", "0"], "--jaccard must be in (0, 1]"), (["--ngram", "0"], "--ngram must be >= 1"),
    (["--threshold", "1.5"], "--threshold in [0, 1]"), (["--field", "nope"], "no string field nope")])
def test_bad_parameters_exit_2_and_only_a_bad_field_is_found_after_the_logged_read(
        tmp_path: Path, flags: list[str], message: str) -> None:
    write_split("qa", "dev", [{"id": k, "question": v} for k, v in ITEMS.items()], {"source": "test"})
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    r = CliRunner().invoke(main, ["splits", "contamination", "--split", "qa", "--corpus", str(corpus), *flags])
    assert r.exit_code == 2 and message in r.output
    # Parameters are checked before the split is read; a field name can only be checked against the items.
    assert len(Store().access_rows("qa")) == (1 if flags[0] == "--field" else 0)


def test_bytes_that_are_not_utf8_are_replaced_in_text_and_jsonl_corpora_alike(tmp_path: Path) -> None:
    # a scraped corpus with a Latin-1 byte (0xE9, "é") in a record that also holds HIGH's first 20 words: the byte
    # becomes U+FFFD, a non-word character, so the words around it are still HIGH's and its overlap is still 0.8
    payload = (" ".join(HIGH[:20]) + " caf").encode() + b"\xe9 " + FILLER.encode()
    jsonl = tmp_path / "scraped.jsonl"
    jsonl.write_bytes(b'{"text": "' + " ".join(LOW[:13]).encode() + b'"}\n{"text": "' + payload + b'"}\n')
    text = tmp_path / "scraped.txt"
    text.write_bytes(" ".join(LOW[:13]).encode() + b"\n" + payload + b"\n")
    assert scores(jsonl) == {"low": (0.1, False), "high": (0.8, True)}
    assert scores(text) == {"low": (0.1, False), "high": (0.8, True)}
