"""Contamination check: how much of each split item's text appears in a training corpus.

Text is normalised and cut into word tokens (``tokens``), so case, punctuation, whitespace and line wrapping do
not change the result. Each checked field of an item is scored on its own:

- **exact**: the share of the field's distinct word n-grams found anywhere in the corpus; n = 13 follows the GPT-3
  contamination analysis (Brown et al. 2020, "Language Models are Few-Shot Learners", appendix C). A field at or above
  the threshold flags its item (the n-grams are found with numpy, see ``NgramTable``). Scoring fields separately keeps
  a pasted question from being diluted by the much longer worked solution stored beside it. A field shorter than n
  words has no n-gram; as in that analysis, it is looked for as a whole (flagged when the whole field occurs) from
  ``MIN_WHOLE_WORDS`` (8) words on. A shorter field, where a match inside longer text would be a spurious
  collision, is flagged when a whole corpus segment (a text line, a JSONL string) has exactly its words (white space,
  punctuation and LaTeX spacing aside) from ``MIN_SEGMENT_WORDS`` (3) words on; the report counts such fields
  (``segment_only``). A field of one or two words (a number answer) is not checked (``unchecked``), and a split
  with one is never called clean.
- **near-duplicate** (optional): the Jaccard similarity between the field and a corpus segment (a line of a text
  corpus, a string of a JSONL record), both as sets of 5-byte shingles of the normalised text (tokens joined by single
  spaces). Candidates come from MinHash locality-sensitive hashing (``datasketch.MinHashLSH``, 128 permutations;
  Broder 1997, "On the resemblance and containment of documents"; Indyk and Motwani 1998); each candidate's Jaccard is
  then computed exactly from the two shingle sets. This catches edited copies ("the" -> "a", changed punctuation) that
  break every 13-gram. On GSM8K test questions edited that way the Jaccard was 0.60 at least (median 0.91) while
  20,000 random pairs of unrelated questions reached at most 0.19 (measured 2026-12-01), hence the default threshold
  0.5.

The corpus is streamed in blocks of about ``CHUNK_BYTES`` cut at line ends; the blocks are scanned by a pool of
worker processes (one per core) with a bounded number in flight, and n-grams that span two blocks are joined in
the parent. Memory is bounded by the items' n-grams, the near-duplicate index and a few blocks, never by the
corpus size.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import time
import unicodedata
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput

CHUNK_BYTES = 1 << 20
SHINGLE_BYTES = 5
NUM_PERM = 128
DEFAULT_JACCARD = 0.5
MIN_WHOLE_WORDS = 8
"""A field shorter than the n-gram is checked as a whole from this many words on: the GPT-3 analysis's smallest N
on non-synthetic tasks, below which it saw spurious collisions (Brown et al. 2020, appendix C). Shorter fields (an
answer, a subject label, "Simplify $\\sqrt{242}$.") are found only as a whole corpus segment."""
MIN_SEGMENT_WORDS = 3
"""A field of this many words up to ``MIN_WHOLE_WORDS`` - 1 is looked for as a whole corpus segment; one or two
words (a number answer, a label) equal countless unrelated lines (the ``#### 18`` of any worked solution), so such
a field is not checked and the split is never called clean."""
SEALED_MIN_NGRAM = 8
SEALED_MIN_THRESHOLD = 0.5
"""On private and human-audit splits ``--ngram`` below 8 and thresholds below 0.5 are refused: each flag must
answer "is most of this item in the corpus", not "is this word in it"."""
_WORD = re.compile(r"\w+")
_WORD_ASCII = b"abcdefghijklmnopqrstuvwxyz0123456789_"
# ASCII upper case -> lower case, other non-word ASCII -> space; bytes >= 0x80 (UTF-8 multi-byte sequences) kept.
_TABLE = bytes(c + 32 if 65 <= c <= 90 else c if c in _WORD_ASCII or c >= 128 else 32 for c in range(256))
_MAX_CARRY = 64  # a block with no whitespace at all grows up to this many blocks before it is cut anyway


_LATEX_SPACE = re.compile(rb"\\(?:q?quad|enspace|thinspace|medspace|thickspace|neg(?:thin|med|thick)space)"
                          rb"(?![A-Za-z])|\\hspace\*?\{[^{}]*\}|\\mkern-?[\d.]+mu")
SEGMENT_SLACK = 8
"""A text corpus line is compared whole with the short fields (``NgramTable.segment``) only when it is at most this
many times as long as the longest short field's words joined by spaces, plus 64 bytes: room for LaTeX, markup and
punctuation around the same words, while the long lines of a corpus (paragraphs, worked solutions) are skipped
unread."""


def tokens(text: str | bytes) -> list[bytes]:
    """Normalised word tokens (UTF-8 bytes): Unicode NFKC, lower case, maximal runs of ``\\w`` characters; LaTeX
    spacing written as words (``\\quad``, ``\\qquad``, ``\\thinspace``, ``\\hspace{1em}``, ``\\mkern3mu``, ...)
    is white space (``\\,`` ``\\;`` ``\\!`` ``\\ `` are punctuation, dropped anyway).

    The same tokens as ``re.findall(r"\\w+", unicodedata.normalize("NFKC", text).lower())``, computed fast:
    ASCII is lower-cased and split with ``bytes.translate`` / ``bytes.split``, and only whitespace-separated
    pieces holding non-ASCII bytes go through NFKC and the regex.
    """
    data = text.encode() if isinstance(text, str) else text
    if b"\\" in data:
        data = _LATEX_SPACE.sub(b" ", data)
    pieces = data.translate(_TABLE).split()
    if data.isascii():
        return pieces
    out: list[bytes] = []
    for p in pieces:
        if p.isascii():
            out.append(p)
        else:
            out.extend(w.encode() for w in _WORD.findall(unicodedata.normalize("NFKC", p.decode(errors="replace"))
                                                         .lower()))
    return out


def protocol_fields(path: str | Path) -> list[str]:
    """The item fields a protocol's prompt renders (``protocol.rendered_fields``).

    Raises:
        BadInput: the protocol does not load (see ``load_protocol``) or its template uses no item field.
    """
    from evalgate.protocol.spec import load_protocol, rendered_fields

    names = rendered_fields(load_protocol(path).resolved)
    if not names:
        raise BadInput(f"{path}: prompt.template renders no item field; pass the fields to check with --field")
    return names


def item_fields(item: dict[str, Any], fields: Iterable[str] | None = None) -> dict[str, str]:
    """The texts to check in one item, by field: the given fields, else every string field except ``id``.

    Raises:
        BadInput: a requested field is missing or not a string.
    """
    if fields:
        fields = list(fields)
        missing = [f for f in fields if not isinstance(item.get(f), str)]
        if missing:
            raise BadInput(f"item {item.get('id')!r} has no string field {', '.join(missing)}; "
                           f"its fields are {', '.join(sorted(item))}")
        return {f: item[f] for f in fields}
    return {k: v for k, v in sorted(item.items()) if k != "id" and isinstance(v, str)}


# -- reading the corpus ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Chunk:
    """A block of the corpus: ``text`` (whole lines, one token stream with its neighbours) or ``jsonl`` (whole
    records, each its own document); ``first_line`` is the 1-based line number of its first line."""

    kind: str
    data: bytes
    first_line: int
    path: str


def corpus_format(path: Path) -> str:
    """``jsonl`` for ``*.jsonl`` / ``*.jsonl.gz`` / ``*.json``, else ``text``."""
    name = path.name.removesuffix(".gz")
    return "jsonl" if name.endswith((".jsonl", ".json")) else "text"


def _open_binary(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _cut(block: bytes, kind: str, final: bool, full: bool = True) -> int:
    """Where to end a chunk in ``block``: after its last newline; for text with no newline in a ``full`` block,
    after its last whitespace (a very long line is split there); 0 to wait for more."""
    if final:
        return len(block)
    cut = block.rfind(b"\n") + 1
    if cut == 0 and kind == "text" and full:
        cut = max(block.rfind(w) for w in (b" ", b"\t", b"\r", b"\f", b"\v")) + 1
    return cut


def corpus_chunks(path: Path, fmt: str = "auto", chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """Stream a corpus file as ``Chunk`` blocks of about ``chunk_bytes`` (``.gz`` is decompressed). Bytes that are
    not UTF-8 are kept here and read as U+FFFD when tokenised (text and JSONL alike): scraped corpora hold some.

    Raises:
        BadInput: the file is missing, or ``fmt`` is not ``auto``, ``text`` or ``jsonl``.
    """
    if not path.is_file():
        raise BadInput(f"corpus {path} not found; pass a text or JSONL file with --corpus")
    if fmt not in ("auto", "text", "jsonl"):
        raise BadInput(f"corpus format {fmt!r}: choose auto, text or jsonl")
    kind = corpus_format(path) if fmt == "auto" else fmt
    carry, line = b"", 1
    with _open_binary(path) as f:
        while True:
            block = f.read(chunk_bytes)
            data = carry + block
            cut = _cut(data, kind, final=not block, full=len(data) >= chunk_bytes)
            if cut == 0 and len(data) >= _MAX_CARRY * chunk_bytes:
                cut = len(data)
                while cut > 0 and (data[cut - 1] & 0xC0) == 0x80:  # do not split a UTF-8 character
                    cut -= 1
            if cut:
                yield Chunk(kind, data[:cut], line, str(path))
                line += data.count(b"\n", 0, cut)
            carry = data[cut:]
            if not block:
                return


# -- near-duplicates ---------------------------------------------------------------------------------------------
def shingles(toks: list[bytes]) -> Any:
    """The distinct ``SHINGLE_BYTES``-byte shingles of the tokens joined by single spaces (the whole text as one
    shingle if it is shorter), each coded exactly as the integer of its bytes (sorted ``uint64`` numpy array)."""
    import numpy as np

    b = np.frombuffer(b" ".join(toks), dtype=np.uint8).astype(np.uint64)
    if b.size == 0:
        return b
    k = min(SHINGLE_BYTES, b.size)
    code = np.zeros(b.size - k + 1, dtype=np.uint64)
    for i in range(k):
        code = (code << np.uint64(8)) | b[i:b.size - k + 1 + i]
    return np.unique(code)


class NearDupIndex:
    """MinHash LSH over the checked fields' shingle sets; ``best`` finds the fields a corpus segment is a near
    duplicate of and their exact Jaccard similarity.

    Args:
        fields: key -> token list of each field to index.
        threshold: Jaccard similarity in (0, 1] at which the LSH aims (``datasketch.MinHashLSH``'s threshold).

    Raises:
        BadInput: threshold out of range.
    """

    def __init__(self, fields: dict[tuple[int, str], list[bytes]], threshold: float):
        import numpy as np
        from datasketch import MinHash, MinHashLSH

        check_parameters(1, 0, threshold)
        self.threshold = threshold
        self.lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        # One MinHash, cleared before each use: the LSH keeps only the band hashes it computes at insert/query.
        self.minhash = MinHash(num_perm=NUM_PERM, hashfunc=int)
        self.sets = {key: shingles(toks) for key, toks in fields.items()}
        for key, sh in self.sets.items():
            self.lsh.insert(key, self._minhash(sh))
        sizes = [a.size for a in self.sets.values()] or [0]
        # Jaccard(A, S) <= min(|A|, |S|) / max(|A|, |S|): segments outside these sizes cannot reach the threshold.
        self.min_size, self.max_size = threshold * min(sizes), max(sizes) / threshold
        # Jaccard(A, S) >= t needs |A & S| >= t |A | S| >= t |S|, so at least t |S| of S in the fields' union.
        self.union = np.unique(np.concatenate(list(self.sets.values()))) if self.sets else np.zeros(0, np.uint64)

    def _minhash(self, sh: Any) -> Any:
        import numpy as np

        self.minhash.clear()
        # datasketch's default scheme hashes 32-bit inputs: fold the 40-bit codes with a multiplicative hash.
        self.minhash.update_batch(((sh * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)).tolist())
        return self.minhash

    def best(self, toks: list[bytes], into: dict[tuple[int, str], float]) -> None:
        """Raise ``into[key]`` to the Jaccard similarity of this segment with each LSH candidate field."""
        import numpy as np

        seg = shingles(toks)
        if not self.sets or not self.min_size <= seg.size <= self.max_size:
            return
        at = np.minimum(np.searchsorted(self.union, seg), self.union.size - 1)
        if np.count_nonzero(self.union[at] == seg) < self.threshold * seg.size:
            return
        for key in self.lsh.query(self._minhash(seg)):
            a = self.sets[key]
            inter = np.intersect1d(a, seg, assume_unique=True).size
            into[key] = max(into.get(key, 0.0), inter / (a.size + seg.size - inter))

    def best_many(self, segments: list[list[bytes]], into: dict[tuple[int, str], float]) -> None:
        """``best`` for each segment in turn, the shingles of all of them computed at once: one numpy pass over
        the segments' bytes instead of a dozen numpy calls per segment (a corpus line), which cost more than the
        shingling itself. The same shingles, size bounds and union filter as ``best``, so the same results."""
        import numpy as np

        if not self.sets:
            return
        if len(segments) > 1 << 20:  # a segment's index and a shingle share one uint64 key: 24 + 40 bits
            for i in range(0, len(segments), 1 << 20):
                self.best_many(segments[i:i + (1 << 20)], into)
            return
        joined = [b" ".join(t) for t in segments]
        whole = [i for i, j in enumerate(joined) if len(j) >= SHINGLE_BYTES]
        for i, j in enumerate(joined):
            if len(j) < SHINGLE_BYTES:  # one shingle of its own length (or none): rare, done as best does
                self.best(segments[i], into)
        if not whole:
            return
        lengths = np.fromiter((len(joined[i]) for i in whole), dtype=np.int64, count=len(whole))
        b = np.frombuffer(b"".join(joined[i] for i in whole), dtype=np.uint8).astype(np.uint64)
        k = SHINGLE_BYTES
        code = np.zeros(b.size - k + 1, dtype=np.uint64)
        for i in range(k):
            code = (code << np.uint64(8)) | b[i:b.size - k + 1 + i]
        # the windows inside one segment: segment s owns start positions [start_s, start_s + length_s - k]
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        windows = lengths - k + 1
        owner = np.repeat(np.arange(len(whole), dtype=np.uint64), windows)
        pos = np.arange(owner.size, dtype=np.int64) + np.repeat(starts - np.concatenate(([0], np.cumsum(windows)[:-1])),
                                                                windows)
        keys = np.sort((owner << np.uint64(SHINGLE_BYTES * 8)) | code[pos])  # by segment, then shingle
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # (np.unique hashes: slower on a chunk)
        seg_of = (keys >> np.uint64(SHINGLE_BYTES * 8)).astype(np.int64)
        codes = keys & np.uint64((1 << (SHINGLE_BYTES * 8)) - 1)
        sizes = np.bincount(seg_of, minlength=len(whole))
        at = np.minimum(np.searchsorted(self.union, codes), self.union.size - 1)
        in_union = np.bincount(seg_of, weights=self.union[at] == codes, minlength=len(whole))
        bounds = np.concatenate(([0], np.cumsum(sizes)))
        ok = (self.min_size <= sizes) & (sizes <= self.max_size) & (in_union >= self.threshold * sizes)
        for s in np.flatnonzero(ok).tolist():
            seg = codes[bounds[s]:bounds[s + 1]]
            for key in self.lsh.query(self._minhash(seg)):
                a = self.sets[key]
                inter = np.intersect1d(a, seg, assume_unique=True).size
                into[key] = max(into.get(key, 0.0), inter / (a.size + seg.size - inter))


# -- scanning ----------------------------------------------------------------------------------------------------
class NgramTable:
    """The checked fields' word n-grams, found in token streams with numpy instead of per-token Python work.

    Tokens become integer ids (a field token's id from 1 up, any other token 0); each window of n ids gets a
    polynomial hash (sum of ``id * P**k`` mod 2**64, Karp and Rabin 1987); windows holding a 0 are skipped, the rest
    looked up among the fields' hashes (binary search), and every hit is confirmed by comparing the n ids, so a hash
    collision cannot report an n-gram that is not there. An n-gram is named by ``(length, hash)``.

    A field shorter than n words but at least ``min_whole`` long has no n-gram; it is looked for as a whole (one
    gram of its own length), the rule of the GPT-3 contamination analysis for examples shorter than N (Brown et al.
    2020, appendix C). The hashes of every length come from one pass (``_hashes``: the hash of a window of length
    L + 1 is that of its first L ids times P plus the next id). A shorter field (``MIN_SEGMENT_WORDS`` to
    ``min_whole`` - 1 words),
    where a match anywhere in the stream would be a spurious collision, is a *segment* gram ``(0, index)``: found
    only when a whole corpus segment (a text line, a JSONL string) has exactly its tokens (``segment``).

    Args:
        n: n-gram length in words.
        fields: the token lists of the fields to check.
        min_whole: the fewest words a field checked as a whole may have (capped at n).
    """

    P = 0x9E3779B97F4A7C15  # odd 64-bit multiplier (the golden-ratio constant)

    def __init__(self, n: int, fields: Iterable[list[bytes]], min_whole: int | None = None):
        import numpy as np

        self.n = n
        self.min_whole = min(MIN_WHOLE_WORDS if min_whole is None else min_whole, n)
        fields = list(fields)
        # only the words of fields searched in the token stream: a short field's (a segment gram's) words would make
        # more windows candidates for nothing, since a segment is compared as joined bytes
        searched = [toks for toks in fields if self.gram_length(len(toks))]
        self.vocab = {t: i for i, t in enumerate(dict.fromkeys(chain.from_iterable(searched)), 1)}
        rows: dict[int, list[Any]] = {}
        hashes: dict[int, list[Any]] = {}
        for toks in fields:
            ids = self.ids(toks)
            length = self.gram_length(ids.size)
            if length:
                rows.setdefault(length, []).append(np.lib.stride_tricks.sliding_window_view(ids, length))
                hashes.setdefault(length, []).append(self._hashes(ids, [length])[length])
        self.segments: dict[bytes, int] = {}
        for toks in fields:
            if len(toks) >= MIN_SEGMENT_WORDS and not self.gram_length(len(toks)):
                self.segments.setdefault(b" ".join(toks), len(self.segments))
        self.segment_max_bytes = SEGMENT_SLACK * max(map(len, self.segments), default=0) + 64
        """The longest text line compared whole with the short fields (``SEGMENT_SLACK``)."""
        self.tables: dict[int, tuple[Any, Any]] = {}
        for length in sorted(hashes):
            uniq, first = np.unique(np.concatenate(hashes[length]), return_index=True)
            self.tables[length] = (uniq, np.concatenate(rows[length])[first])

    @property
    def size(self) -> int:
        """How many distinct grams (n-grams, whole short fields and segment grams) the table holds."""
        return sum(h.size for h, _ in self.tables.values()) + len(self.segments)

    def segment(self, toks: list[bytes]) -> tuple[int, int] | None:
        """The segment gram ``(0, index)`` of a short field whose tokens are exactly ``toks``, or None."""
        if not MIN_SEGMENT_WORDS <= len(toks) < self.min_whole or not self.segments:
            return None
        at = self.segments.get(b" ".join(toks))
        return None if at is None else (0, at)

    def gram_length(self, words: int) -> int:
        """The gram length a field of ``words`` words is checked with: n, its own length (whole), or 0 (not
        checked: fewer than ``min_whole`` words)."""
        return self.n if words >= self.n else words if words >= max(self.min_whole, 1) else 0

    def ids(self, toks: list[bytes]) -> Any:
        """Token ids (int64 numpy array, 0 for tokens in no field)."""
        import numpy as np

        return np.fromiter(map(self.vocab.get, toks, repeat(0)), dtype=np.int64, count=len(toks))

    def _hashes(self, ids: Any, lengths: Iterable[int]) -> dict[int, Any]:
        """The hash of every window of each length in ``lengths`` (each at most ``ids.size``), in one pass."""
        import numpy as np

        want, out = set(lengths), {}
        u = ids.astype(np.uint64)
        h = u.copy()
        for length in range(1, max(want, default=0) + 1):
            if length > 1:  # wraps modulo 2**64, as intended
                h = h[:-1] * np.uint64(self.P) + u[length - 1:]
            if length in want:
                out[length] = h
        return out

    def grams(self, toks: list[bytes]) -> set[tuple[int, int]]:
        """The distinct grams of a field, as ``(length, hash)``: its n-grams, or itself when shorter than n (a segment
        gram ``(0, index)`` below ``min_whole`` words; none for a field without a word)."""
        ids = self.ids(toks)
        length = self.gram_length(ids.size)
        if not length:
            seg = self.segment(toks)
            return {seg} if seg else set()
        return {(length, h) for h in self._hashes(ids, [length])[length].tolist()}

    def find(self, ids: Any) -> set[tuple[int, int]]:
        """The fields' grams that occur in the id stream, as ``(length, hash)``."""
        import numpy as np

        lengths = [k for k in self.tables if k <= ids.size]
        if not lengths:
            return set()
        zeros = np.concatenate(([0], np.cumsum(ids == 0)))
        found: set[tuple[int, int]] = set()
        for length, h_all in self._hashes(ids, lengths).items():
            hashes, rows = self.tables[length]
            pos = np.flatnonzero(zeros[length:] == zeros[:-length])  # windows with no token outside the fields
            h = h_all[pos]
            at = np.minimum(np.searchsorted(hashes, h), hashes.size - 1)
            hit = hashes[at] == h
            pos, at = pos[hit], at[hit]
            same = (np.lib.stride_tricks.sliding_window_view(ids, length)[pos] == rows[at]).all(axis=1)
            found.update((length, x) for x in hashes[at[same]].tolist())
        return found


@dataclass
class ChunkResult:
    """What one chunk holds: field n-grams found inside it (as hashes), its first and last n-1 token ids (to join
    n-grams across chunks), its token count and the near-duplicate similarities found in it."""

    found: set[tuple[int, int]]
    head: Any
    tail: Any
    tokens: int
    near: dict[tuple[int, str], float]


class Scanner:
    """Scans corpus chunks for the fields' n-grams (and near duplicates); pickled once into each worker process.

    Args:
        table: the fields' n-grams.
        near: the near-duplicate index, or None.
        text_field: JSONL: the record field holding the text; None for every string in the record.
    """

    def __init__(self, table: NgramTable, near: NearDupIndex | None, text_field: str | None):
        self.table, self.near, self.text_field = table, near, text_field

    def scan(self, chunk: Chunk) -> ChunkResult:
        """Scan one chunk.

        Raises:
            BadInput: a JSONL line that is not JSON (naming the file and line).
        """

        near: dict[tuple[int, str], float] = {}
        segment_hits: set[tuple[int, int]] = set()
        if chunk.kind == "jsonl":
            records: list[bytes] = []
            strings: list[list[bytes]] = []  # every string's tokens, for the near-duplicate check
            total = 0
            for i, line in enumerate(chunk.data.split(b"\n"), chunk.first_line):
                if not line.strip():
                    continue
                try:  # bytes that are not UTF-8 become U+FFFD, as in a text corpus: scraped corpora hold some
                    rec = json.loads(line.decode(errors="replace"))
                except json.JSONDecodeError as e:
                    raise BadInput(f"{chunk.path}:{i}: not valid JSON ({e.msg}); fix the line or pass a text "
                                   "corpus with --corpus-format text") from e
                texts = ([rec.get(self.text_field)] if self.text_field and isinstance(rec, dict)
                         else list(_strings(rec)))
                segments = [tokens(t) for t in texts if isinstance(t, str)]
                if self.table.segments:
                    segment_hits.update(filter(None, map(self.table.segment, segments)))
                if self.near:
                    strings.extend(segments)
                total += sum(map(len, segments))
                records.extend(chain.from_iterable(segments))
                records.append(b"")  # a token in no field: no n-gram spans two records
            if self.near:
                self.near.best_many(strings, near)
            ids = self.table.ids(records)
            return ChunkResult(self.table.find(ids) | segment_hits, ids[:0], ids[:0], total, near)
        if self.table.segments:
            segment_hits.update(filter(None, (self.table.segment(tokens(line)) for line in chunk.data.split(b"\n")
                                              if len(line) <= self.table.segment_max_bytes)))
        ids = self.table.ids(tokens(chunk.data))
        if self.near:
            lo = self.near.min_size
            self.near.best_many([tokens(line) for line in chunk.data.split(b"\n")
                                 if len(line) >= lo or not line.isascii()], near)  # normalising ASCII never lengthens
        k = self.table.n - 1
        return ChunkResult(self.table.find(ids) | segment_hits, ids[:k], ids[max(0, ids.size - k):], ids.size, near)


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


_WORKER: Scanner | None = None


def _init_worker(scanner: Scanner) -> None:
    global _WORKER
    _WORKER = scanner


def _scan_in_worker(chunk: Chunk) -> ChunkResult:
    assert _WORKER is not None, "worker not initialised"
    return _WORKER.scan(chunk)


def _results(scanner: Scanner, chunks: Iterable[Chunk], workers: int) -> Iterator[ChunkResult]:
    """Chunk results in corpus order; with ``workers`` > 1 from a process pool holding at most 2 chunks per
    worker in flight (so memory does not grow with the corpus)."""
    import multiprocessing

    # A script without a __main__ guard re-runs its check inside each worker while spawn imports it (the process is
    # "inheriting"): scan in that process rather than fail to start a nested pool and leave the parent waiting.
    inside_worker = multiprocessing.parent_process() is not None or getattr(
        multiprocessing.current_process(), "_inheriting", False)
    if workers <= 1 or inside_worker:
        yield from map(scanner.scan, chunks)
        return
    from concurrent.futures import Future, ProcessPoolExecutor

    # spawn, not fork: the parent may hold DuckDB's threads, which a forked child must not inherit.
    ex = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                             initargs=(scanner,))
    pending: deque[Future[ChunkResult]] = deque()
    try:
        for chunk in chunks:
            pending.append(ex.submit(_scan_in_worker, chunk))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def default_workers() -> int:
    """One worker process per CPU core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# -- results -----------------------------------------------------------------------------------------------------
@dataclass
class FieldOverlap:
    """One field's result.

    Attributes:
        ngrams: distinct word n-grams in the field (1 for a field checked as a whole).
        matched: how many of them occur in the corpus.
        overlap: matched / ngrams; None when the field was not checked (fewer than ``MIN_SEGMENT_WORDS`` words).
        jaccard: highest Jaccard similarity with a corpus segment that the LSH returned as a candidate; None when
            no segment was a candidate, the near-duplicate check is off, or the field was not checked.
        flagged_by: ``exact`` (overlap >= threshold) and/or ``near-dup`` (jaccard >= the Jaccard threshold).
        whole: the field is shorter than n words and was looked for as a whole (overlap 1.0 when it occurs).
        words: the field's word count.
        segment: the field is shorter than ``MIN_WHOLE_WORDS`` words and was looked for only as a whole corpus
            segment (a text line or a JSONL string with exactly its words), not inside longer text.
    """

    ngrams: int
    matched: int
    overlap: float | None
    jaccard: float | None = None
    flagged_by: list[str] = field(default_factory=list)
    whole: bool = False
    words: int = 0
    segment: bool = False


@dataclass
class ItemOverlap:
    """One item's result: each checked field's overlap; flagged when any field is. On a sealed tier the fields are
    dropped and only ``flag`` is kept (``check_contamination``)."""

    id: str
    fields: dict[str, FieldOverlap]
    flag: bool | None = None

    @property
    def flagged(self) -> bool:
        return self.flag if self.flag is not None else any(f.flagged_by for f in self.fields.values())

    @property
    def overlap(self) -> float | None:
        """The highest field overlap (None when no field has n words)."""
        return max((f.overlap for f in self.fields.values() if f.overlap is not None), default=None)

    @property
    def jaccard(self) -> float | None:
        return max((f.jaccard for f in self.fields.values() if f.jaccard is not None), default=None)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "flagged": self.flagged, "overlap": self.overlap, "jaccard": self.jaccard,
                "fields": {k: v.__dict__ for k, v in self.fields.items()}}


@dataclass
class ContaminationReport:
    """The check's result: item ids, field names and figures only, never item text.

    ``sealed`` (a private or human-audit split): ``as_dict`` and the CLI give each item's flag only, one bit per
    item (no per-field figures, which would let a caller-written corpus confirm a guessed 13-gram at a time), and
    ``unchecked`` only as counts per field over the whole split.
    """

    split: str
    corpus: str
    ngram: int
    threshold: float
    jaccard: float | None
    fields_from: str
    corpus_tokens: int
    items: list[ItemOverlap]
    seconds: float
    workers: int
    warnings: list[str] = field(default_factory=list)
    sealed: bool = False
    budget: dict[str, Any] | None = None

    @property
    def flagged(self) -> list[ItemOverlap]:
        return [it for it in self.items if it.flagged]

    unchecked: dict[str, int] = field(default_factory=dict)
    """Field name -> how many items' field could not be checked (fewer than ``MIN_SEGMENT_WORDS`` words)."""
    segment_only: dict[str, int] = field(default_factory=dict)
    """Field name -> how many items' field (fewer than ``MIN_WHOLE_WORDS`` words) was looked for only as a whole
    corpus segment."""

    @property
    def clean(self) -> bool:
        """No item flagged and every field checked; a split with an unchecked field is never clean."""
        return not self.flagged and not self.unchecked

    def as_dict(self) -> dict[str, Any]:
        items = ([{"id": it.id, "flagged": it.flagged} for it in self.items] if self.sealed
                 else [it.as_dict() for it in self.items])
        return {"split": self.split, "corpus": self.corpus, "ngram": self.ngram, "threshold": self.threshold,
                "jaccard_threshold": self.jaccard, "fields_from": self.fields_from,
                "corpus_tokens": self.corpus_tokens, "seconds": self.seconds, "workers": self.workers,
                "flagged": len(self.flagged), "items": items, "unchecked": self.unchecked,
                "segment_only": self.segment_only, "min_whole_words": MIN_WHOLE_WORDS, "clean": self.clean,
                "sealed": self.sealed, "budget": self.budget, "warnings": self.warnings}


def check_parameters(n: int, threshold: float, jaccard: float | None) -> None:
    """Refuse an n-gram length below 1, a threshold outside [0, 1] or a Jaccard threshold outside (0, 1].

    Raises:
        BadInput: naming the flag.
    """
    if n < 1 or not 0 <= threshold <= 1:
        raise BadInput(f"--ngram must be >= 1 (got {n}) and --threshold in [0, 1] (got {threshold})")
    if jaccard is not None and not 0 < jaccard <= 1:
        raise BadInput(f"--jaccard must be in (0, 1] (got {jaccard})")


def overlaps(texts: dict[str, dict[str, str]], chunks: Iterable[Chunk], n: int = 13, threshold: float = 0.7,
             jaccard: float | None = None, text_field: str | None = None,
             workers: int = 1, full_scan: bool = False) -> tuple[list[ItemOverlap], int]:
    """Per item and field, the share of the field's distinct word n-grams that occur in the corpus, and (when
    ``jaccard`` is given) its best near-duplicate similarity. A field shorter than n words (but at least
    ``MIN_WHOLE_WORDS``) is looked for as a whole: overlap 1.0 when the whole field occurs, else 0.0.

    Args:
        texts: item id -> field name -> text.
        chunks: the corpus, from ``corpus_chunks``.
        n: n-gram length in words (>= 1).
        threshold: a field with overlap >= threshold flags its item (in [0, 1]).
        jaccard: near-duplicate Jaccard threshold in (0, 1], or None for no near-duplicate check.
        text_field: JSONL corpus: the field holding the text (default every string in the record).
        workers: processes scanning the corpus (1: in this process). More than 1 starts them with ``spawn``,
            which re-imports the caller's ``__main__``: a script should call from under
            ``if __name__ == "__main__":`` (else each worker first re-runs the script, scanning in-process).
        full_scan: always read the whole corpus (sealed tiers: where reading stops, and how many tokens were read,
            would tell when the last n-gram of the items was found).

    Returns:
        (one ItemOverlap per item in ``texts`` order, corpus tokens read). Without the near-duplicate check and
        ``full_scan``, reading stops once every gram is found, and is skipped when no field can be checked.

    Raises:
        BadInput: parameters out of range, a bad JSONL line.
    """
    check_parameters(n, threshold, jaccard)
    import numpy as np

    toks = {(i, f): tokens(t) for i, fields in enumerate(texts.values()) for f, t in fields.items()}
    table = NgramTable(n, toks.values())
    grams = {key: table.grams(t) for key, t in toks.items()}
    near = None
    if jaccard is not None:
        near = NearDupIndex({key: t for key, t in toks.items() if table.gram_length(len(t))}, jaccard)
    scanner = Scanner(table, near, text_field)
    found: set[tuple[int, int]] = set()
    best: dict[tuple[int, str], float] = {}
    tail = np.zeros(0, np.int64)
    total = 0
    wanted = table.size
    for res in _results(scanner, chunks, workers) if wanted or full_scan else ():  # else nothing to look for
        total += res.tokens
        found |= res.found
        for key, sim in res.near.items():
            best[key] = max(best.get(key, 0.0), sim)
        if res.head.size:  # a text chunk: n-grams that start in the previous chunk and end in this one
            joined = np.concatenate((tail, res.head))
            found |= table.find(joined)
            tail = res.tail if res.tokens >= n - 1 else joined[max(0, joined.size - n + 1):]
        if near is None and len(found) == wanted and not full_scan:
            break  # every gram is already found; the rest of the corpus cannot change the result
    out = []
    for i, (iid, fields) in enumerate(texts.items()):
        per: dict[str, FieldOverlap] = {}
        for f in fields:
            g = grams[(i, f)]
            matched = len(g & found)
            share = matched / len(g) if g else None
            j = best.get((i, f)) if g else None
            by = ([*(["exact"] if share is not None and share >= threshold else []),
                   *(["near-dup"] if j is not None and jaccard is not None and j >= jaccard else [])])
            words = len(toks[(i, f)])
            per[f] = FieldOverlap(len(g), matched, share, None if j is None else round(j, 4), by,
                                  whole=bool(g) and words < n, words=words,
                                  segment=bool(g) and not table.gram_length(words))
        out.append(ItemOverlap(iid, per))
    return out, total


def _count(items: list[ItemOverlap], which: str) -> dict[str, int]:
    """Field name -> how many items' field was not checked (``unchecked``: fewer than ``MIN_SEGMENT_WORDS`` words)
    or checked only as a whole corpus segment (``segment``)."""
    out: dict[str, int] = {}
    for it in items:
        for name, f in it.fields.items():
            if (f.overlap is None) if which == "unchecked" else f.segment:
                out[name] = out.get(name, 0) + 1
    return out


def check_contamination(split: str, corpus: str | Path, ngram: int = 13, threshold: float = 0.7,
                        fields: list[str] | None = None, protocol: str | Path | None = None,
                        jaccard: float | None = None, corpus_fmt: str = "auto", text_field: str | None = None,
                        actor: str | None = None, *, store: Any, workers: int | None = None) -> ContaminationReport:
    """Check a split's items against a training corpus, field by field.

    Every tier may be checked: the read is logged with purpose ``contamination-check``, which the tier policies
    allow everywhere without spending a read budget (see ``evalgate.splits``), because the report holds item ids,
    field names and figures only, never item text or a model's score. On the sealed tiers (private, human-audit)
    the corpus is still the caller's, and per-field figures would confirm a guessed n-gram of an item at a time; so
    there the report gives each item's flag only (one bit per item), the whole corpus is always read (where reading
    stopped would tell more), ``ngram`` below ``SEALED_MIN_NGRAM`` and thresholds below ``SEALED_MIN_THRESHOLD``
    are refused, and each check spends one of the tier's ``max_contamination_checks``.

    Args:
        split: split name.
        corpus: text or JSONL file (``.gz`` allowed), streamed.
        ngram: n-gram length in words (default 13).
        threshold: flag items with a field whose overlap is at least this (default 0.7).
        fields: item fields to check; default the fields ``protocol``'s prompt renders, else every string field
            except ``id``, each on its own.
        protocol: a protocol file whose prompt template decides the default fields.
        jaccard: near-duplicate Jaccard threshold (e.g. ``DEFAULT_JACCARD``), or None to skip that check.
        corpus_fmt: ``auto``, ``text`` or ``jsonl``.
        text_field: JSONL corpus field holding the text (default every string in the record).
        actor: who reads (default ``$EVALGATE_ACTOR`` or the OS user).
        store: the Store (default ``$EVALGATE_HOME``).
        workers: corpus-scanning processes (default one per core; 1 for corpora under 4 chunks); see ``overlaps``
            for what a calling script needs when it is more than 1.

    Raises:
        BadInput: unknown split, missing corpus, bad JSONL line, bad field, protocol or parameters.
        RefusedByPolicy: the split cannot be read (no key for a private split); a sealed split's contamination-check
            budget is used up, or its parameters are below the sealed minimums (each logged).
    """
    from evalgate.keys.sealing import SEALED_TIERS
    from evalgate.splits.guard import SplitManager
    from evalgate.splits.manifest import actor_name
    from evalgate.store.access import CONTAMINATION_CHECK

    t0 = time.perf_counter()
    path = Path(corpus)
    if not path.is_file():
        raise BadInput(f"corpus {path} not found; pass a text or JSONL file with --corpus")
    check_parameters(ngram, threshold, jaccard)
    fields_from = "--field" if fields else "every text field"
    if not fields and protocol is not None:
        fields, fields_from = protocol_fields(protocol), f"protocol {Path(protocol).name}"
    if workers is None:
        workers = default_workers() if path.stat().st_size >= 4 * CHUNK_BYTES else 1
    manager = SplitManager(store)
    who = actor_name(actor, env=store.env)
    sealed = manager.manifest(split).tier in SEALED_TIERS
    if sealed and (ngram < SEALED_MIN_NGRAM or threshold < SEALED_MIN_THRESHOLD
                   or (jaccard is not None and jaccard < SEALED_MIN_THRESHOLD)):
        manager.refuse(split, CONTAMINATION_CHECK, who,
                       f"split {split} is sealed (private or human-audit): a contamination check there needs --ngram "
                       f">= {SEALED_MIN_NGRAM} and --threshold / --jaccard >= {SEALED_MIN_THRESHOLD} (got --ngram "
                       f"{ngram}, --threshold {threshold}, --jaccard {jaccard}), so that a flag says most of an item "
                       "is in the corpus, not that one word is")
    opened = manager.open(
        split, CONTAMINATION_CHECK, who,
        detail=f"corpus {path.name} ({path.stat().st_size} bytes); fields: {', '.join(fields or ['all text'])}",
        contamination_check=True)
    texts = {str(it["id"]): item_fields(it, fields) for it in opened.items}
    items, total = overlaps(texts, corpus_chunks(path, corpus_fmt), ngram, threshold, jaccard, text_field, workers,
                            full_scan=sealed)
    unchecked, segment_only = _count(items, "unchecked"), _count(items, "segment")
    if sealed:  # one bit per item leaves this function (see the docstring)
        items = [ItemOverlap(it.id, {}, flag=it.flagged) for it in items]
    policy = opened.manifest.effective_policy()
    budget = None
    if policy.max_contamination_checks is not None:
        used = manager.contamination_checks_in_window(split, policy)
        budget = {"max_checks": policy.max_contamination_checks, "window_days": policy.window_days, "used": used,
                  "left": max(0, policy.max_contamination_checks - used)}
    return ContaminationReport(split, str(path), ngram, threshold, jaccard, fields_from, total, items,
                               time.perf_counter() - t0, workers, opened.warnings, sealed, budget, unchecked,
                               segment_only)
