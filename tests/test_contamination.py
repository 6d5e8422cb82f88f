"""Contamination check: per-item n-gram overlap with a streamed corpus, threshold flags, robustness to re-wrapping."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.contamination import check_contamination, corpus_token_chunks, overlaps
from evalgate.errors import BadInput, RefusedByPolicy
from evalgate.splits import write_split
from evalgate.store import Store

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


def scores(corpus: Path, n: int = 13, **kw) -> dict[str, tuple[float | None, bool]]:
    res, _ = overlaps(ITEMS, corpus_token_chunks(corpus, **kw), n, 0.7)
    return {r.id: (r.overlap, r.flagged) for r in res}


def test_threshold_flags_only_items_at_or_above_it(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    assert scores(corpus) == {"low": (0.1, False), "high": (0.8, True)}


def test_rewrapping_and_whitespace_do_not_change_the_overlap(tmp_path: Path) -> None:
    wrapped = tmp_path / "wrapped.txt"
    wrapped.write_text(rewrap(CORPUS, 3).upper())  # 3 words a line, extra spaces and tabs, other case
    assert scores(wrapped) == {"low": (0.1, False), "high": (0.8, True)}
    # Tiny chunks cut words in the middle: the carried-over word keeps the stream intact.
    assert scores(wrapped, chunk_chars=7) == {"low": (0.1, False), "high": (0.8, True)}


def test_jsonl_corpus_records_are_separate_documents(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    half = len(HIGH) // 2
    corpus.write_text(json.dumps({"text": " ".join(LOW[:13])}) + "\n"
                      + json.dumps({"messages": [{"role": "user", "content": " ".join(HIGH[:20])}]}) + "\n"
                      # HIGH's last 13 words split over two records: no n-gram spans the records.
                      + json.dumps({"text": " ".join(HIGH[9:half])}) + "\n"
                      + json.dumps({"text": " ".join(HIGH[half:])}) + "\n")
    assert scores(corpus) == {"low": (0.1, False), "high": (0.8, True)}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{oops\n')
    with pytest.raises(BadInput, match=r"bad.jsonl:2: not valid JSON"):
        scores(bad)


def test_items_shorter_than_n_are_reported_not_flagged(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("short item")
    res, total = overlaps({"s": "short item"}, corpus_token_chunks(corpus), 13, 0.7)
    assert (res[0].ngrams, res[0].overlap, res[0].flagged, total) == (0, None, False, 0)


def test_cli_reports_per_item_exits_1_when_flagged_and_logs_the_read(tmp_path: Path) -> None:
    write_split("qa", "dev", [{"id": k, "question": v} for k, v in ITEMS.items()], {"source": "test"})
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    r = CliRunner().invoke(main, ["splits", "contamination", "--split", "qa", "--corpus", str(corpus), "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert {i["id"]: (i["matched"], i["ngrams"], i["flagged"]) for i in doc["items"]} == {
        "low": (1, 10, False), "high": (8, 10, True)}
    text = CliRunner().invoke(main, ["splits", "contamination", "--split", "qa", "--corpus", str(corpus),
                                     "--threshold", "0.9"])
    assert text.exit_code == 0 and "0 of 2 items at or above 0.9" in text.output
    rows = Store().access_rows("qa")
    assert [(r["purpose"], r["outcome"]) for r in rows] == [("contamination-check", "read")] * 2


def test_private_split_is_refused_and_the_refusal_logged(tmp_path: Path) -> None:
    write_split("priv", "private", [{"id": "x", "question": "secret"}], {"source": "test"})
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    with pytest.raises(RefusedByPolicy, match="release-gate"):
        check_contamination("priv", corpus)
    assert [r["outcome"] for r in Store().access_rows("priv")] == ["refused"]
