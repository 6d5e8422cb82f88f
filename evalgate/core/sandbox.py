"""The sandbox that runs model-written programs (HumanEval completions, the agentic ``python`` tool).

Under bubblewrap where it works: no network, own PID and mount namespaces holding only a system Python's standard
library, read-only, unprivileged, process/CPU/memory/file-size limits, a wall-clock timeout that kills the whole
group (``LAYERS`` names the layers, ``ExecResult.isolation`` those a program ran with); else an ``unshare``
fallback that guards against accidents, not an adversary. The threat model and each layer: docs/SANDBOX.md.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.errors import RefusedByPolicy

LAYERS = ("netns", "pidns", "minfs", "rofs", "unpriv", "nouserns", "nproc", "stdlib")
"""Every isolation layer, in the order ``ExecResult.isolation`` names them (see the module docstring)."""

OUTPUT_BYTES = 4096
"""Default for ``run_code(output_bytes=...)``: bytes of a program's stderr kept (its end)."""
PROCESSES = 16
"""Default for ``run_code(processes=...)``: processes and threads a program may have at once (RLIMIT_NPROC)."""

SANDBOX_UID = 65534  # "nobody" on Debian and most distributions
# A Python process killed by a resource limit: SIGKILL (hard CPU limit), SIGXFSZ, SIGSEGV (stack/memory).
_LIMIT_SIGNALS = (signal.SIGKILL, signal.SIGXFSZ, signal.SIGSEGV)


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one program.

    Attributes:
        status: ``passed`` (exit 0), ``failed`` (non-zero exit, e.g. an AssertionError or a MemoryError),
            ``timeout`` (killed at the wall-clock limit, or SIGXCPU at the CPU-time limit) or ``error``
            (could not be started, or killed by SIGKILL, SIGXFSZ or SIGSEGV).
        returncode: the program's exit status (negative: killed by that signal), None if it never ran.
        stderr: the last ``output_bytes`` (default 4096) bytes of the program's stderr, decoded as UTF-8.
        wall_s: seconds from start to exit or kill.
        isolation: the layers used, joined with ``+`` (``netns+pidns+minfs+rofs+unpriv+nouserns+nproc+stdlib``
            with bubblewrap; the fallback's ``netns+pidns+rofs``, ``netns+pidns``, ``pidns``, ``netns`` or ``none``).
    """

    status: str
    returncode: int | None
    stderr: str
    wall_s: float
    isolation: str


# -- the interpreter programs run under ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Python:
    """A host interpreter and what must be mounted for it to run: ``binds`` (host paths, read-only),
    ``symlinks`` ((target, path) pairs recreating the host's symlinks on the way, e.g. ``/lib -> usr/lib``) and
    ``masked`` (package directories inside ``binds`` hidden under an empty tmpfs)."""

    exe: str
    version: str
    binds: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]
    masked: tuple[str, ...]


def _resolve(path: str) -> tuple[list[tuple[str, str]], str]:
    """The symlinks met while resolving ``path`` component by component, as (target, link) pairs, and the real
    path it ends at."""
    links: list[tuple[str, str]] = []
    parts = [p for p in path.split("/") if p]
    cur, i = "/", 0
    while i < len(parts) and len(links) < 40:
        nxt = os.path.join(cur, parts[i])
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            links.append((target, nxt))
            parts = [p for p in os.path.normpath(os.path.join(cur, target)).split("/") if p] + parts[i + 1:]
            cur, i = "/", 0
            continue
        cur, i = nxt, i + 1
    return links, cur


def _shared_libraries(files: Sequence[str]) -> set[str]:
    """Paths, as the dynamic loader names them, of the shared libraries (and the loader) ``files`` load (``ldd``)."""
    ldd = shutil.which("ldd")
    if not ldd or not files:
        return set()
    try:
        out = subprocess.run([ldd, *files], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    libs = set()
    for line in out.splitlines():
        words = line.split()
        if line.endswith(":"):  # "file:" heading each file's list when ldd is given several
            continue
        path = words[2] if len(words) > 2 and words[1] == "=>" else words[0] if words else ""
        if path.startswith("/"):
            libs.add(path)
    return libs


def _inside(path: str, dirs: Sequence[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


@functools.lru_cache(maxsize=8)
def _python_mounts(candidate: str) -> _Python | None:
    """What a minimal file system needs to run the interpreter ``candidate`` with its standard library only."""
    exe = os.path.realpath(candidate)
    probe = "import json, sys, sysconfig; print(json.dumps([sysconfig.get_paths(), sys.version.split()[0]]))"
    try:
        r = subprocess.run([exe, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=30, env={})
        paths, version = json.loads(r.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    stdlib = sorted({os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if os.path.isdir(paths[k])})
    if not stdlib:
        return None
    modules = [os.path.join(d, f) for top in stdlib for d, _, fs in os.walk(top) for f in fs if f.endswith(".so")]
    links: dict[str, str] = {}
    binds = {exe, *stdlib}
    for lib in _shared_libraries([exe, *modules]):
        chain, real = _resolve(lib)
        links.update((link, target) for target, link in chain)
        binds.add(os.path.dirname(real))
    if os.path.isfile("/etc/ld.so.cache"):
        binds.add("/etc/ld.so.cache")
    kept = sorted(b for b in binds if not _inside(b, [d for d in binds if d != b]))
    # A link inside a bound directory is already there (binds keep symlinks); the rest are recreated.
    symlinks = tuple(sorted((t, link) for link, t in links.items() if not _inside(link, kept)))
    masked = tuple(sorted(os.path.join(d, sub) for d in kept if os.path.isdir(d)
                          for sub in ("site-packages", "dist-packages") if os.path.isdir(os.path.join(d, sub))))
    return _Python(exe, version, tuple(kept), symlinks, masked)


def _candidate_pythons() -> list[str]:
    """System interpreters first (their standard library directory holds no third-party packages), then the one
    evalgate's own interpreter was made from (a virtual environment's base), never the environment itself."""
    found = [p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.isfile(p)]
    base = getattr(sys, "_base_executable", "") or sys.executable
    return [*found, base]


# -- the bubblewrap sandbox ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Bwrap:
    bwrap: str
    prlimit: str
    drop: tuple[str, ...]  # setpriv prefix that starts bwrap as SANDBOX_UID; empty when evalgate is not root
    python: _Python

    @property
    def unprivileged(self) -> bool:
        return bool(self.drop) or os.geteuid() != 0

    nouserns: bool = True  # bwrap --disable-userns (bubblewrap >= 0.8)

    def command(self, argv: Sequence[str], network: bool, writable: Sequence[str], files: Sequence[tuple[int, str]],
                rlimits: Sequence[str], tmpfs_mb: int) -> list[str]:
        """The full command: ``argv`` (run in ``/work``, which holds each file read from an fd of ``files`` as
        its name) under every layer; ``rlimits``: prlimit options; ``tmpfs_mb``: size of each tmpfs.

        Everything but the sized tmpfs (``/tmp``, ``/dev/shm``, ``/work``) and ``writable`` ends read-only:
        bubblewrap's own root tmpfs (``/``, which holds the mount points and ``/etc``, ``/usr``, ...) and its
        ``/dev`` tmpfs have no size bound, so they are remounted read-only last (``rofs``)."""
        py = self.python
        size = ["--size", str(tmpfs_mb << 20)]
        mounts = [a for b in (*py.binds, self.prlimit) for a in ("--ro-bind", b, b)]
        mounts += [a for t, link in py.symlinks for a in ("--symlink", t, link)]
        mounts += [a for m in py.masked for a in ("--tmpfs", m, "--remount-ro", m)]
        return [*self.drop, self.bwrap, "--unshare-all", "--unshare-user",
                *(["--disable-userns"] if self.nouserns else []), *(["--share-net"] if network else []),
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox",
                "--die-with-parent", "--new-session", "--cap-drop", "ALL", *mounts,
                "--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/dev/shm", *size, "--tmpfs", "/tmp",
                *size, "--tmpfs", "/work", *[a for fd, name in files for a in ("--file", str(fd), f"/work/{name}")],
                *[a for w in writable for a in ("--bind", w, w)], "--remount-ro", "/dev", "--remount-ro", "/",
                "--chdir", "/work", self.prlimit, *rlimits, "--", *argv]


_PROBE = """import ctypes, errno, os, resource
assert os.getuid() == os.geteuid() == 65534 and os.getgid() == 65534, 'uid'
assert open('/proc/self/status').read().split('CapEff:')[1].split()[0].strip('0') == '', 'capabilities'
assert resource.getrlimit(resource.RLIMIT_NPROC) == (16, 16), 'nproc'
assert not any(os.path.exists(p) for p in ('/root', '/home', '/sys', '/etc/passwd')), 'file system'
assert os.listdir('/proc/self/task') and len([p for p in os.listdir('/proc') if p.isdigit()]) <= 2, 'proc'
open('/work/x', 'w').write('x'); open('/tmp/x', 'w').write('x'); open('/dev/shm/x', 'w').write('x')
for p in ('/x', '/dev/x', '/etc/x'):
    try:
        open(p, 'w')
    except OSError as e:
        assert e.errno in (errno.EROFS, errno.EACCES), p
    else:
        raise AssertionError('rofs ' + p)
libc = ctypes.CDLL(None, use_errno=True)
assert USERNS or libc.unshare(0x10000000) != 0, 'nouserns'  # CLONE_NEWUSER
print('sandbox ok')
"""


def _probe(b: _Bwrap) -> bool:
    """Whether ``b`` runs a program with every layer here (uid, capabilities, nproc, file system, /proc, read-only
    root, and no user namespaces inside where ``b.nouserns``)."""
    with tempfile.TemporaryFile() as f:
        f.write(_PROBE.replace("USERNS", str(not b.nouserns)).encode())
        f.seek(0)
        cmd = b.command([b.python.exe, "-I", "-S", "-B", "program.py"], False, (), [(f.fileno(), "program.py")],
                        ["--nproc=16:16"], 4)
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=30, pass_fds=(f.fileno(),), env={}, cwd="/")
        except (OSError, subprocess.TimeoutExpired):
            return False
    return r.returncode == 0 and r.stdout.strip() == b"sandbox ok"


@functools.lru_cache(maxsize=1)
def _bwrap() -> _Bwrap | None:
    """The bubblewrap sandbox that works here (checked once per process), strongest first, else None."""
    bwrap, prlimit, setpriv = shutil.which("bwrap"), shutil.which("prlimit"), shutil.which("setpriv")
    if not bwrap or not prlimit:
        return None
    drops: list[tuple[str, ...]] = [()]
    if os.geteuid() == 0 and setpriv:
        drops.insert(0, (setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
                         "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"))
    for nouserns in (True, False):  # --disable-userns needs bubblewrap >= 0.8
        for drop in drops:
            for candidate in _candidate_pythons():
                py = _python_mounts(candidate)
                if py is not None:
                    b = _Bwrap(bwrap, os.path.realpath(prlimit), drop, py, nouserns)
                    if _probe(b):
                        return b
    return None


# -- the fallback: unshare, read-only root -------------------------------------------------------------------------
def _limits(cpu_s: int, memory_mb: int, file_size_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_mb << 20, file_size_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _rlimit_options(cpu_s: int, memory_mb: int, file_size_mb: int) -> list[str]:
    return [f"--cpu={cpu_s}:{cpu_s + 1}", f"--as={memory_mb << 20}", f"--fsize={file_size_mb << 20}", "--core=0"]


def _prlimit_prefix(cpu_s: int, memory_mb: int, file_size_mb: int) -> list[str] | None:
    """The same limits as ``_limits`` set by util-linux ``prlimit`` before it execs the command, or None.

    Preferred to a ``preexec_fn``: that forces a full ``fork`` of the (possibly large, multi-threaded) scorer
    process per program, which is slow and, with threads, unsafe; without it ``subprocess`` uses ``vfork``.
    """
    prlimit = shutil.which("prlimit")
    return [prlimit, *_rlimit_options(cpu_s, memory_mb, file_size_mb)] if prlimit else None


@functools.lru_cache(maxsize=4)
def _unshare_prefix(net: bool, pid: bool) -> tuple[str, ...] | None:
    """The ``unshare`` command for the wanted namespaces if it works here (checked once), else None."""
    unshare = shutil.which("unshare")
    if not unshare or not (net or pid):
        return None
    flags = (["--net"] if net else []) + (["--pid", "--fork", "--kill-child"] if pid else [])
    if os.geteuid() != 0:
        flags.append("--map-root-user")
    cmd = (unshare, *flags)
    try:
        r = subprocess.run([*cmd, "/bin/sh", "-c", "exit 0"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return cmd if r.returncode == 0 else None


# Run by the PID namespace's init shell: make the program's directory ($0) its own mount and enter it (the working
# directory inherited from Popen still points below the old mount), turn the rest of the file system read-only,
# then run the program without the capability that could undo it. sh stays init (see _fallback_command).
def _rofs_script(writable: Sequence[str] = ()) -> str:
    """The init shell's script; ``writable``: further directories bind-mounted writable (tests use it to let a
    program report back)."""
    binds = "".join(f"mount --bind {q} {q} && " for q in map(shlex.quote, writable))
    return (f'mount --bind "$0" "$0" && {binds}cd "$0" && mount -o remount,bind,ro / && '
            'setpriv --bounding-set=-sys_admin -- "$@"; exit $?')


@functools.lru_cache(maxsize=4)
def _rofs_works(net: bool) -> bool:
    """Whether the read-only file system layer works with these namespaces here (checked once): the probe must
    write its own directory and fail to write outside it."""
    prefix = _unshare_prefix(net, True)
    if prefix is None or not (shutil.which("mount") and shutil.which("setpriv")):
        return False
    probe = tempfile.mkdtemp(prefix="evalgate-rofs-")
    outside = tempfile.mkdtemp(prefix="evalgate-rofs-out-")
    try:
        test = 'touch in && ! touch "$2/out" 2>/dev/null && ! mount -o remount,bind,rw / 2>/dev/null'
        r = subprocess.run([*prefix, "--mount", "--propagation", "private", "/bin/sh", "-c", _rofs_script(), probe,
                            "/bin/sh", "-c", test, "sh", probe, outside], capture_output=True, timeout=10)
        return (r.returncode == 0 and os.path.exists(os.path.join(probe, "in"))
                and not os.path.exists(os.path.join(outside, "out")))
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(probe, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


def _fallback_command(path: str, network: bool, writable: Sequence[str] = ()) -> tuple[list[str], str]:
    """The fallback's command for the program at ``path`` and its isolation: namespaces strongest first (network
    and PID, then PID alone, then network alone, then none), with ``rofs`` where it works."""
    python = [sys.executable, "-I", "-B", path]
    wants = [(n, p) for n, p in ((True, True), (False, True), (True, False)) if not (network and n)]
    for net, pid in wants:
        prefix = _unshare_prefix(net, pid)
        if prefix is None:
            continue
        name = "+".join(x for x, on in (("netns", net), ("pidns", pid)) if on)
        if pid:
            # /bin/sh is the namespace's init, so the program keeps ordinary signal semantics (an init ignores
            # signals it has no handler for); sh reports a program killed by signal N as exit status 128 + N.
            if _rofs_works(net):
                return [*prefix, "--mount", "--propagation", "private", "/bin/sh", "-c", _rofs_script(writable),
                        os.path.dirname(path), *python], name + "+rofs"
            return [*prefix, "/bin/sh", "-c", '"$@"; exit $?', "sh", *python], name
        return [*prefix, *python], name
    return python, "none"


# -- what is available ---------------------------------------------------------------------------------------------
def rofs_available(network: bool = False) -> bool:
    """Whether the fallback's read-only file system layer works here (see the module docstring)."""
    return _rofs_works(not network)


def netns_available() -> bool:
    """Whether programs run in a new, empty network namespace here; checked once per process."""
    return _bwrap() is not None or _unshare_prefix(True, False) is not None


def pidns_available() -> bool:
    """Whether programs run in a new PID namespace here; checked once per process."""
    return _bwrap() is not None or _unshare_prefix(False, True) is not None


def isolation(network: bool = False) -> str:
    """The isolation programs get here, as ``ExecResult.isolation`` names it, without running one."""
    b = _bwrap()
    if b is None:
        return _fallback_command("/x.py", network)[1]
    on = {"netns": not network, "unpriv": b.unprivileged, "nproc": b.unprivileged, "nouserns": b.nouserns}
    return "+".join(layer for layer in LAYERS if on.get(layer, True))


def missing_layers(network: bool = False) -> list[str]:
    """The layers of ``LAYERS`` that programs lack here (``netns`` is not counted where ``network`` is allowed)."""
    have = set(isolation(network).split("+"))
    return [layer for layer in LAYERS if layer not in have and not (network and layer == "netns")]


@functools.lru_cache(maxsize=1)
def memory_bound() -> str:
    """How a sandbox's memory is bounded here, for the run record: always per process (RLIMIT_AS) and by the
    sized tmpfs; ``memcg`` (one cgroup v2 bound for the whole sandbox) is not applied by this version, and this
    says whether the machine would allow it (a cgroup v2 hierarchy whose controllers include ``memory``)."""
    try:
        own = next(x[3:] for x in Path("/proc/self/cgroup").read_text().splitlines() if x.startswith("0::"))
        root = next(x.split(" - ")[0].split()[4] for x in Path("/proc/self/mountinfo").read_text().splitlines()
                    if " - cgroup2 " in x)
        controllers = (Path(root) / own.lstrip("/") / "cgroup.controllers").read_text().split()
    except (OSError, StopIteration, IndexError):
        return "per process (RLIMIT_AS) and sized tmpfs; no memcg: no cgroup v2 hierarchy here"
    if "memory" not in controllers:
        return (f"per process (RLIMIT_AS) and sized tmpfs; no memcg: the cgroup v2 hierarchy here has no memory "
                f"controller (controllers: {' '.join(controllers) or 'none'})")
    return "per process (RLIMIT_AS) and sized tmpfs; no memcg: cgroup v2 memory is available but not used yet"


def describe(network: bool = False) -> dict[str, Any]:
    """The sandbox for a run record: ``isolation`` (the layers, ``+``-joined), ``missing`` (list of layer names),
    ``python`` (the interpreter programs run under and its version) and ``memory`` (``memory_bound()``)."""
    b = _bwrap()
    python = f"{b.python.exe} {b.python.version}" if b else f"{sys.executable} {sys.version.split()[0]}"
    return {"isolation": isolation(network), "missing": missing_layers(network), "python": python,
            "memory": memory_bound()}


def require_strict(network: bool = False, where: str = "execution.isolation") -> None:
    """Refuse when any layer is missing here (a protocol's ``execution.isolation: strict``).

    Raises:
        RefusedByPolicy: names the missing layers and how to get them (exit 2).
    """
    missing = missing_layers(network)
    if missing:
        raise RefusedByPolicy(
            f"{where} is strict but this machine's code sandbox lacks {', '.join(missing)} "
            f"(it provides {isolation(network)}): install bubblewrap (Debian: apt-get install bubblewrap) and "
            "allow user namespaces, see docs/SANDBOX.md; or set execution.isolation: best-effort")


def sandbox_command(path: str, network: bool, writable: Sequence[str] = ()) -> tuple[list[str], str]:
    """The fallback command that runs the program at ``path``, and the isolation it gets. Kept for callers of
    the older API; ``run_code`` uses bubblewrap first, and ``isolation()`` says what programs get."""
    return _fallback_command(path, network, writable)


# -- running ---------------------------------------------------------------------------------------------------
def _status(returncode: int) -> str:
    if returncode == 0:
        return "passed"
    if returncode == -signal.SIGXCPU:
        return "timeout"
    if returncode < 0 and -returncode in _LIMIT_SIGNALS:
        return "error"
    return "failed"


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait for ``proc`` to exit, at most ``timeout_s`` seconds; True if it exited.

    Uses a pidfd (Linux >= 5.3), woken the moment the process exits: ``Popen.wait(timeout)`` polls with sleeps
    of up to 50 ms, which would add tens of milliseconds to every short program.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout_s * 1000))))
    finally:
        os.close(fd)


def _tail(f: Any, limit: int) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - limit))
    return str(f.read(limit).decode("utf-8", "replace"))


def _command(b: _Bwrap | None, workdir: str | None, sources: dict[str, Any], args: Sequence[str], network: bool,
             writable: Sequence[str], limits: tuple[int, int, int], processes: int
             ) -> tuple[list[str], str, dict[str, str], str, Any]:
    """(command, isolation, environment additions, working directory, preexec_fn) for ``run_code``; ``sources``
    maps each file's name in the program's directory to an open file holding it."""
    if b is not None:
        cmd = b.command([b.python.exe, "-I", "-S", "-B", "program.py", *args], network, writable,
                        [(f.fileno(), name) for name, f in sources.items()],
                        [*_rlimit_options(*limits), f"--nproc={processes}:{processes}"], 4 * limits[2])
        return cmd, isolation(network), {"HOME": "/work", "TMPDIR": "/tmp"}, "/", None
    assert workdir is not None
    for name, f in sources.items():
        with open(os.path.join(workdir, name), "wb") as out:
            shutil.copyfileobj(f, out)
        f.seek(0)
    cmd, name = _fallback_command(os.path.join(workdir, "program.py"), network, writable)
    prlimit = _prlimit_prefix(*limits)
    preexec = None if prlimit else functools.partial(_limits, *limits)
    return [*(prlimit or ()), *cmd, *args], name, {"HOME": workdir, "TMPDIR": workdir}, workdir, preexec


def run_code(program: str, timeout_s: float = 10.0, cpu_s: int = 10, memory_mb: int = 1024,
             file_size_mb: int = 16, network: bool = False, writable: Sequence[str] = (),
             processes: int = PROCESSES, output_bytes: int = OUTPUT_BYTES, files: dict[str, str] | None = None,
             args: Sequence[str] = (), pass_fds: Sequence[int] = ()) -> ExecResult:
    """Run a Python program in the sandbox (see the module docstring) and report how it ended.

    Args:
        program: Python source, run as ``program.py`` in the program's directory.
        timeout_s: wall-clock limit, seconds; on expiry the program's whole process group is killed.
        cpu_s: CPU-time limit (RLIMIT_CPU), seconds.
        memory_mb: address-space limit per process (RLIMIT_AS), MiB.
        file_size_mb: largest file the program may write (RLIMIT_FSIZE), MiB; each of its tmpfs (``/work``,
            ``/tmp``, ``/dev/shm``) holds at most 4x this.
        network: allow network access (otherwise a new network namespace is used where available).
        writable: host directories the program may write (bound at the same path; tests use them to let a
            program report back). With bubblewrap as root they must be reachable by uid 65534.
        processes: processes and threads the program may have at once (RLIMIT_NPROC; ``nproc`` layer only).
        output_bytes: bytes kept of the program's stderr (the end); stdout is discarded.
        files: further files (name -> text) placed beside ``program.py``.
        args: command-line arguments after ``program.py``.
        pass_fds: open file descriptors of this process the program inherits under the same numbers (the test
            harness of ``evalgate.scoring.harness`` passes its job and verdict files so).

    Returns:
        ExecResult; a program that cannot be started gives status ``error``, never an exception.
    """
    b = _bwrap()
    workdir = None if b else tempfile.mkdtemp(prefix="evalgate-exec-")
    t0 = time.perf_counter()
    # The files go in through file descriptors (bwrap copies them into the sandbox): no host directory has to
    # be shared with the sandbox user. stderr goes to a file, not a pipe: a child that outlives the program would
    # hold a pipe open; RLIMIT_FSIZE bounds it.
    sources: dict[str, Any] = {}
    with tempfile.TemporaryFile() as err:
        try:
            for name, text in {"program.py": program, **(files or {})}.items():
                sources[name] = f = tempfile.TemporaryFile()
                f.write(text.encode("utf-8"))
                f.seek(0)
            env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}
            cmd, name, more_env, cwd, preexec = _command(b, workdir, sources, args, network, writable,
                                                         (cpu_s, memory_mb, file_size_mb), processes)
            env.update(more_env)
            try:
                proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=err, start_new_session=True,
                                        pass_fds=(*[f.fileno() for f in sources.values()], *pass_fds),
                                        preexec_fn=preexec)
            except OSError as e:
                return ExecResult("error", None, str(e), 0.0, name)
            try:
                timed_out = not _wait_exit(proc, timeout_s)
            finally:
                # Kill the whole group: a program that forked a child leaves nothing behind, timeout or not (with
                # bwrap, its PID namespace dies with bwrap, --die-with-parent).
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
        finally:
            for f in sources.values():
                f.close()
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        wall = time.perf_counter() - t0
        stderr = _tail(err, output_bytes)
    rc = proc.returncode
    if "pidns" in name and 128 < rc <= 128 + 64:
        rc = -(rc - 128)
    return ExecResult("timeout" if timed_out else _status(rc), rc, stderr, wall, name)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_many(programs: Sequence[str], workers: int = 0, **limits: Any) -> list[ExecResult]:
    """Run programs in parallel, each with ``run_code(program, **limits)``.

    Args:
        programs: Python sources.
        workers: programs run at once; 0 means one per available core (``available_cores()``).
        **limits: keyword arguments for ``run_code`` (timeout_s, cpu_s, memory_mb, file_size_mb, network, ...).

    Returns:
        One ExecResult per program, in input order.
    """
    n = workers or available_cores()
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda p: run_code(p, **limits), programs))
