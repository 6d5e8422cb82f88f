"""Reading JSONL and writing files atomically: the two file chores every module needs, written once.

``iter_jsonl`` names the file and line of a bad record; ``atomic_write`` never leaves a half-written file where a
reader looks (a crash leaves either the old content or the new one), and ``replace_set`` does so for a set of files
(a gate's reports).
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput

# JSON Lines end a line at "\n" ("\r\n" and a lone "\r" read as a file opened in text mode reads them); str.splitlines
# also splits at U+0085, U+2028, U+2029 and other separators that JSON writes raw inside strings
# (json.dumps(ensure_ascii=False)): a record of MMLU-Pro's test set holds U+0085.
_LINE_END = re.compile(r"\r\n|\r|\n")


def iter_jsonl(source: str | bytes | Iterable[str], where: str | Path,
               hint: str = "fix or remove that line") -> Iterator[tuple[int, Any]]:
    """Parse JSON Lines, skipping blank lines.

    Args:
        source: the whole text (str or UTF-8 bytes) or an iterable of lines (e.g. an open text file, read lazily).
        where: the file named in errors (a path or a label such as ``HumanEval.jsonl``).
        hint: what the user should do, appended to the error message.

    Yields:
        ``(line_number, value)``; line numbers count from 1 and include blank lines, as an editor shows them.

    Raises:
        BadInput: ``"<where>:<line>: not valid JSON (<reason>); <hint>"`` at the first line that does not parse;
            bytes that are not UTF-8, naming the line (``decode_utf8``).
    """
    lines: Iterable[str]
    if isinstance(source, bytes):
        lines = _LINE_END.split(decode_utf8(source, where))
    elif isinstance(source, str):
        lines = _LINE_END.split(source)
    else:
        lines = source
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{where}:{i}: not valid JSON ({e.msg}); {hint}") from e
        yield i, value


def decode_utf8(data: bytes, where: str | Path) -> str:
    """Decode a user's file as UTF-8 (a leading byte-order mark is dropped).

    Args:
        data: the file's bytes.
        where: the file named in errors.

    Returns:
        The text.

    Raises:
        BadInput: ``"<where>:<line>: not UTF-8 text (byte 0x.. at offset N); save the file as UTF-8"``, the line
            counted from 1 as an editor shows it.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BadInput(f"{where}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); save the "
                       "file as UTF-8") from e


def read_text(path: str | Path) -> str:
    """Read a user's text file (protocol, policy, thresholds, manifest) as UTF-8.

    Raises:
        BadInput: bytes that are not UTF-8, naming the file and line (``decode_utf8``).
        OSError: the file cannot be read.
    """
    return decode_utf8(Path(path).read_bytes(), path)


def read_jsonl(path: str | Path, hint: str = "fix or remove that line") -> list[tuple[int, Any]]:
    """All records of a JSONL file with their line numbers (see ``iter_jsonl``).

    Raises:
        BadInput: the file is missing (naming it) or a line is not JSON (naming file and line).
    """
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"{p} not found; check the path")
    return list(iter_jsonl(p.read_bytes(), p, hint))


_BAD_PATH = frozenset({errno.EEXIST, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EROFS})
"""What a user's output path causes (a part of it is a file, no permission, read-only), not the machine."""


def unwritable(path: str | Path) -> str | None:
    """Why the file ``path`` cannot be written, judged from its nearest existing folder (created nothing): that
    folder is a file, or not writable; None when it looks writable. Output flags check it while they are parsed,
    before any work (``evalgate.core.outfile``)."""
    for part in Path(path).parents:  # nearest first: a missing folder is made by atomic_write
        if os.path.lexists(part):
            if not part.is_dir():
                return f"{part} is a file, not a directory"
            return None if os.access(part, os.W_OK) else f"{part} is not writable"
    return None


def atomic_write(path: str | Path, content: str | bytes) -> Path:
    """Replace ``path`` with ``content`` atomically: write a temporary file in the same directory, fsync it, then
    ``os.replace`` it over the target (atomic on POSIX and Windows when both are on one file system) and fsync the
    directory so the rename itself survives a crash.

    The temporary name is unique per call (``.<name>.<random>.tmp``), so concurrent writers never share one; the
    file gets the usual permissions (0666 less the umask). Parent directories are created.

    Args:
        path: the file to write.
        content: text (written as UTF-8) or bytes.

    Returns:
        The path written.

    Raises:
        BadInput: ``path`` is a directory, or its folder cannot be made or written (a part of the path is a file,
            permission denied, a read-only file system), naming the part that failed.
        OSError: the disk is full or the write fails otherwise; the target is then left as it was.
    """
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"{p} is a directory; give a file name to write (e.g. {p / 'report.html'})")
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = p.with_name(f".{p.name}.{secrets.token_hex(4)}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        if e.errno not in _BAD_PATH:
            raise
        raise BadInput(f"cannot write {p}: {unwritable(p) or f'{e.strerror} ({e.filename})'}; give a file path "
                       "inside a directory you can write") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):
        dfd = os.open(p.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return p


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block and deliver them after it (to the handlers that were set), so a
    short sequence of steps (renaming a set of files) is never cut in two by Ctrl-C or ``kill``. Only in the main
    thread, where Python runs signal handlers; elsewhere the block runs as it is. SIGKILL cannot be held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in _HELD}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(got):
            signal.raise_signal(signum)


def replace_set(targets: Mapping[str, Path], render: Callable[[str, Path], object],
                remove: Iterable[Path] = ()) -> dict[str, Path]:
    """Replace a set of files as one: a reader sees the previous files or the new set, never some of each.

    ``render(key, tmp)`` writes each file to a temporary sibling of its target (``.<stem>.<random>.part<suffix>``,
    so a writer that looks at the suffix sees the target's); only when every one is written are, with SIGINT and
    SIGTERM held back (``signals_held``), the old targets and the files in ``remove`` deleted and the new files
    renamed into place. A failure or a signal while rendering removes the temporaries and leaves every target as
    it was; a SIGKILL during the renames can leave part of the new set, never an old file beside a new one.

    Args:
        targets: key (e.g. a report format) -> the file to write. render: writes ``key``'s content to the path given.
        remove: files to delete in the same step (e.g. a format that has nothing to say this time).

    Returns:
        ``targets`` as written.

    Raises:
        BadInput: a target is a directory (nothing written). Whatever ``render`` raises; OSError from the renames
            (the disk, permissions).
    """
    for target in targets.values():
        if target.is_dir():
            raise BadInput(f"{target} is a directory; give a file name to write (e.g. {target / 'report.html'})")
    temps: dict[str, Path] = {}
    try:
        for key, target in targets.items():
            tmp = target.with_name(f".{target.stem}.{secrets.token_hex(4)}.part{target.suffix}")
            target.parent.mkdir(parents=True, exist_ok=True)
            temps[key] = tmp
            render(key, tmp)
        with signals_held():
            for old in [*targets.values(), *remove]:
                if not old.is_dir():
                    old.unlink(missing_ok=True)
            for key, target in targets.items():
                os.replace(temps.pop(key), target)
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
    return dict(targets)


def build_once(final: Path, build: Callable[[Path], None]) -> Path:
    """The directory ``final``, built once per machine: ``build(tmp)`` fills a temporary directory beside it, which
    gets a ``DONE`` marker and is renamed to ``final``, all under the file lock ``<final>.lock``, so concurrent
    callers build it once and a reader never sees a half-built one. A ``final`` without ``DONE`` (an interrupted
    build) is replaced. The demo's training and the tiny reward model are cached this way.

    Returns:
        ``final``.

    Raises:
        Whatever ``build`` raises (the temporary directory is removed).
    """
    import shutil
    import tempfile

    from filelock import FileLock

    if (final / "DONE").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(final) + ".lock"):
        if (final / "DONE").is_file():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
        try:
            build(tmp)
            (tmp / "DONE").write_text("ok\n")
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final
