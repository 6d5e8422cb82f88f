"""Contamination check: how much of each split item's text appears in a training corpus, as word n-grams.

Text is normalised (Unicode NFKC, lower case) and cut into word tokens (regex ``\\w+``), so case, punctuation,
whitespace and line wrapping do not change the result. An item's overlap is the share of its distinct word
n-grams found anywhere in the corpus; n = 13 follows the GPT-3 contamination analysis (Brown et al. 2020,
"Language Models are Few-Shot Learners", appendix C). Items at or above the threshold are flagged.

The corpus is streamed: a plain-text file is read in fixed-size chunks as one token stream that runs across line
breaks (a word cut by a chunk boundary is carried over); a JSONL file is read a record at a time, each record's
strings forming one stream. Memory is bounded by the items' n-grams and the chunk size, never by the corpus.
"""

from __future__ import annotations

import gzip
import re
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from evalgate.errors import BadInput
from evalgate.fileio import iter_jsonl

PURPOSE = "contamination-check"
CHUNK_CHARS = 1 << 20
_WORD = re.compile(r"\w+")
_TRAILING_WORD = re.compile(r"\w+\Z")


def tokens(text: str) -> list[str]:
    """Normalised word tokens: NFKC, lower case, runs of ``\\w`` characters."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def ngrams(toks: list[str], n: int) -> Iterator[tuple[str, ...]]:
    """The ``len(toks) - n + 1`` contiguous n-grams of ``toks`` (none if it is shorter than n)."""
    return zip(*(toks[i:] for i in range(n)), strict=False)


def item_text(item: dict[str, Any], fields: Iterable[str] | None = None) -> str:
    """The text of an item to check: the given fields, else every string field except ``id``, in key order.

    Raises:
        BadInput: a requested field is missing or not a string.
    """
    if fields:
        missing = [f for f in fields if not isinstance(item.get(f), str)]
        if missing:
            raise BadInput(f"item {item.get('id')!r} has no string field {', '.join(missing)}; "
                           f"its fields are {', '.join(sorted(item))}")
        return "\n".join(item[f] for f in fields)
    return "\n".join(v for k, v in sorted(item.items()) if k != "id" and isinstance(v, str))


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def corpus_format(path: Path) -> str:
    """``jsonl`` for ``*.jsonl`` / ``*.jsonl.gz`` / ``*.json``, else ``text``."""
    name = path.name.removesuffix(".gz")
    return "jsonl" if name.endswith((".jsonl", ".json")) else "text"


def corpus_token_chunks(path: Path, fmt: str = "auto", chunk_chars: int = CHUNK_CHARS,
                        text_field: str | None = None) -> Iterator[tuple[bool, list[str]]]:
    """Stream a corpus as ``(starts_a_new_document, tokens)`` chunks.

    Args:
        path: a text file or JSONL file, optionally gzip-compressed (``.gz``).
        fmt: ``text``, ``jsonl`` or ``auto`` (by file name, see ``corpus_format``).
        chunk_chars: characters read at a time from a text file.
        text_field: JSONL: the field holding the text; default every string in the record, nested ones too.

    Raises:
        BadInput: missing file, or a JSONL line that is not JSON (naming the line).
    """
    if not path.is_file():
        raise BadInput(f"corpus {path} not found; pass a text or JSONL file with --corpus")
    fmt = corpus_format(path) if fmt == "auto" else fmt
    with _open_text(path) as f:
        if fmt == "jsonl":
            for _, rec in iter_jsonl(f, path, "fix the line or pass a text corpus with --corpus-format text"):
                texts = [rec.get(text_field)] if text_field and isinstance(rec, dict) else list(_strings(rec))
                yield True, tokens("\n".join(t for t in texts if isinstance(t, str)))
            return
        carry, first = "", True
        while chunk := f.read(chunk_chars):
            text = carry + chunk
            m = _TRAILING_WORD.search(text)
            # A word running up to the chunk's end may continue in the next chunk: hold it back.
            cut = m.start() if m and len(text) - m.start() < chunk_chars else len(text)
            carry = text[cut:]
            yield first, tokens(text[:cut])
            first = False
        if carry:
            yield first, tokens(carry)


@dataclass
class ItemOverlap:
    """One item's result: its distinct n-grams, how many occur in the corpus, the share, and the flag."""

    id: str
    ngrams: int
    matched: int
    overlap: float | None
    flagged: bool


@dataclass
class ContaminationReport:
    """The check's result. ``overlap`` is None for items shorter than n tokens (they are never flagged)."""

    split: str
    corpus: str
    ngram: int
    threshold: float
    corpus_tokens: int
    items: list[ItemOverlap]
    seconds: float
    warnings: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[ItemOverlap]:
        return [it for it in self.items if it.flagged]

    def as_dict(self) -> dict[str, Any]:
        return {"split": self.split, "corpus": self.corpus, "ngram": self.ngram, "threshold": self.threshold,
                "corpus_tokens": self.corpus_tokens, "seconds": self.seconds, "flagged": len(self.flagged),
                "items": [it.__dict__ for it in self.items], "warnings": self.warnings}


def overlaps(texts: dict[str, str], chunks: Iterable[tuple[bool, list[str]]], n: int = 13,
             threshold: float = 0.7) -> tuple[list[ItemOverlap], int]:
    """Per item, the share of its distinct word n-grams that occur in the corpus token stream.

    Args:
        texts: item id -> text.
        chunks: the corpus, from ``corpus_token_chunks``.
        n: n-gram length in words.
        threshold: items with overlap >= threshold are flagged.

    Returns:
        (one ItemOverlap per item in ``texts`` order, corpus tokens read). Reading stops early once every
        n-gram is found, or is skipped when no item has n words.
    """
    if n < 1 or not 0 <= threshold <= 1:
        raise BadInput(f"--ngram must be >= 1 (got {n}) and --threshold in [0, 1] (got {threshold})")
    item_grams = {iid: set(ngrams(tokens(t), n)) for iid, t in texts.items()}
    wanted: set[tuple[str, ...]] = set().union(*item_grams.values()) if item_grams else set()
    in_items = {t for g in wanted for t in g}.__contains__
    # Only runs of >= n consecutive tokens that all occur in some item can hold a matching n-gram: find those
    # runs on a 0/1 byte mask with the regex engine, and build n-grams only inside them.
    runs = re.compile(rb"\x01{%d,}" % n)
    found: set[tuple[str, ...]] = set()
    tail: list[str] = []
    total = 0
    for new_doc, toks in chunks if wanted else ():  # no item has n words: nothing to look for
        total += len(toks)
        stream = toks if new_doc else tail + toks
        for run in runs.finditer(bytes(map(in_items, stream))):
            found.update(wanted.intersection(ngrams(stream[run.start():run.end()], n)))
        tail = stream[-(n - 1):] if n > 1 else []
        if len(found) == len(wanted):
            break  # every n-gram is already found; the rest of the corpus cannot change the result
    out = []
    for iid, grams in item_grams.items():
        matched = len(grams & found)
        share = matched / len(grams) if grams else None
        out.append(ItemOverlap(iid, len(grams), matched, share, share is not None and share >= threshold))
    return out, total


def check_contamination(split: str, corpus: str | Path, ngram: int = 13, threshold: float = 0.7,
                        fields: list[str] | None = None, corpus_fmt: str = "auto", text_field: str | None = None,
                        actor: str | None = None, store: Any = None) -> ContaminationReport:
    """Check a split's items against a training corpus. Reading the split is logged (purpose
    ``contamination-check``), so tier policies apply: a private split is refused.

    Args:
        split: split name.
        corpus: text or JSONL file (``.gz`` allowed), streamed.
        ngram: n-gram length in words (default 13).
        threshold: flag items whose overlap is at least this (default 0.7).
        fields: item fields to check (default every string field except ``id``).
        corpus_fmt: ``auto``, ``text`` or ``jsonl``.
        text_field: JSONL corpus field holding the text (default every string in the record).
        actor: who reads (default ``$EVALGATE_ACTOR`` or the OS user).
        store: the Store (default ``$EVALGATE_HOME``).

    Raises:
        BadInput: unknown split, missing corpus, bad JSONL line, bad field or parameters.
        RefusedByPolicy: the split's tier refuses the read (logged).
    """
    from evalgate.splits import SplitManager, actor_name
    from evalgate.store import Store

    t0 = time.perf_counter()
    path = Path(corpus)
    if not path.is_file():
        raise BadInput(f"corpus {path} not found; pass a text or JSONL file with --corpus")
    opened = SplitManager(store or Store()).open(split, PURPOSE, actor_name(actor), detail=f"corpus {path.name}")
    texts = {str(it["id"]): item_text(it, fields) for it in opened.items}
    items, total = overlaps(texts, corpus_token_chunks(path, corpus_fmt, text_field=text_field), ngram, threshold)
    return ContaminationReport(split, str(path), ngram, threshold, total, items, time.perf_counter() - t0,
                               opened.warnings)
