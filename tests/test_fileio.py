"""The JSONL reader names file and line; the atomic writer leaves old or new content, never a mix."""

from __future__ import annotations

import json
import os

import pytest

from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write, decode_utf8, iter_jsonl, read_jsonl


def test_jsonl_line_numbers_count_blank_lines(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"id": "a"}\n\n{"id": "b"}\n{oops\n')
    with pytest.raises(BadInput) as e:
        read_jsonl(p, "fix it")
    # line 4 as an editor shows it (the blank line 2 counts)
    assert e.value.message.startswith(f"{p}:4: not valid JSON")
    assert e.value.message.endswith("; fix it")
    assert list(iter_jsonl('{"x": 1}\n\n[2]\n', "mem")) == [(1, {"x": 1}), (3, [2])]


def test_jsonl_reads_an_open_file_lazily(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_text('{"x": 1}\nnot json\n')
    with p.open() as f:
        it = iter_jsonl(f, p)
        assert next(it) == (1, {"x": 1})
        with pytest.raises(BadInput, match=":2: not valid JSON"):
            next(it)


@pytest.mark.parametrize("sep", ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1e"])
def test_jsonl_lines_end_only_at_newlines(tmp_path, sep):
    """A separator that json.dumps(ensure_ascii=False) writes raw inside a string (one of MMLU-Pro's questions holds
    U+0085) is part of its record, as a file opened in text mode reads it; CRLF and a lone CR still end a line."""
    text = json.dumps({"q": f"a{sep}b"}, ensure_ascii=False) + "\r\n" + '{"x": 2}\r[3]\n'
    expected = [(1, {"q": f"a{sep}b"}), (2, {"x": 2}), (3, [3])]
    assert list(iter_jsonl(text, "mem")) == expected
    assert list(iter_jsonl(text.encode(), "mem")) == expected
    p = tmp_path / "s.jsonl"
    p.write_bytes(text.encode())
    with p.open(encoding="utf-8") as f:
        assert list(iter_jsonl(f, p)) == expected


def test_read_jsonl_missing_file_names_it(tmp_path):
    with pytest.raises(BadInput, match="nope.jsonl not found"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "sub" / "out.txt"
    atomic_write(p, "old")
    atomic_write(p, b"new")
    assert p.read_text() == "new"
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask


def test_atomic_write_failure_keeps_old_content(tmp_path, monkeypatch):
    p = tmp_path / "out.txt"
    p.write_text("old")

    def boom(*a):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(p, "new")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("under", ["out.txt", "sub/out.txt"])
def test_atomic_write_under_a_file_is_bad_input_naming_the_file(tmp_path, under):
    # a report path whose folder is a regular file: the user's path, exit 2, not an internal error (exit 3)
    blocker = tmp_path / "reports"
    blocker.write_text("I am a file")
    target = blocker / under
    with pytest.raises(BadInput) as e:
        atomic_write(target, "x")
    assert e.value.message == (f"cannot write {target}: {blocker} is a file, not a directory; give a file path "
                               "inside a directory you can write")
    assert blocker.read_text() == "I am a file" and sorted(x.name for x in tmp_path.iterdir()) == ["reports"]


def test_a_file_that_is_not_utf8_is_bad_input_naming_its_line(tmp_path):
    # Latin-1 "é" (0xe9) on line 2, byte 12 + 11 = 23: a user's file saved in the wrong encoding is bad input
    # (exit 2), not an internal error (exit 3), and the message says which line to fix
    p = tmp_path / "items.jsonl"
    p.write_bytes(b'{"id": "a"}\n{"id": "caf\xe9"}\n')
    with pytest.raises(BadInput) as e:
        read_jsonl(p)
    assert e.value.message == f"{p}:2: not UTF-8 text (byte 0xe9 at offset 23); save the file as UTF-8"
    with pytest.raises(BadInput, match=r"x\.yaml:1: not UTF-8 text \(byte 0xff at offset 0\)"):
        decode_utf8(b"\xff\xfe", "x.yaml")
    # a byte-order mark (what some Windows editors write) is not part of the text
    assert decode_utf8(b'\xef\xbb\xbf{"id": "a"}', "bom.jsonl") == '{"id": "a"}'
