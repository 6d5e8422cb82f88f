"""Sandboxed execution of model-written programs.

Each program runs in its own process group (``start_new_session``), in a fresh temporary directory, with
CPU-time, address-space and file-size limits (``resource.setrlimit``), no network where the machine allows a new
network namespace (``unshare --net``; ``isolation`` in the result says which was used), and a wall-clock timeout
after which the whole process group is killed, so no child or grandchild survives. Many programs run in parallel,
one per core by default.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

_OUTPUT_LIMIT = 4096


@dataclass(frozen=True)
class ExecResult:
    """Outcome of one program.

    Attributes:
        status: ``passed`` (exit 0), ``failed`` (non-zero exit, e.g. an AssertionError), ``timeout`` (killed at
            the wall-clock limit) or ``error`` (could not be started, or killed by a resource limit).
        returncode: the exit status (negative: killed by that signal), None if it never ran.
        stderr: last 4 KiB of the program's stderr.
        wall_s: seconds from start to exit or kill.
        isolation: ``netns`` when the program ran in a new network namespace, ``none`` otherwise.
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


@functools.lru_cache(maxsize=1)
def netns_available() -> bool:
    """Whether ``unshare --net`` (a new, empty network namespace) works here; checked once per process."""
    unshare = shutil.which("unshare")
    if not unshare:
        return False
    try:
        r = subprocess.run([unshare, "--net", "--map-root-user", "true"], capture_output=True, timeout=10)
        if r.returncode == 0:
            return True
        r = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=10)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.lru_cache(maxsize=1)
def _unshare_cmd() -> tuple[str, ...]:
    unshare = shutil.which("unshare") or "unshare"
    if os.geteuid() == 0:
        return (unshare, "--net")
    return (unshare, "--net", "--map-root-user")


def run_code(program: str, timeout_s: float = 10.0, cpu_s: int = 10, memory_mb: int = 1024,
             file_size_mb: int = 16, network: bool = False) -> ExecResult:
    """Run a Python program in a sandbox (see module docstring).

    Args:
        program: Python source.
        timeout_s: wall-clock limit, seconds; on expiry the program's whole process group is killed.
        cpu_s: CPU-time limit, seconds.
        memory_mb: address-space limit, MiB.
        file_size_mb: largest file the program may write, MiB.
        network: allow network access (otherwise a new network namespace is used where available).

    Returns:
        ExecResult.
    """
    workdir = tempfile.mkdtemp(prefix="evalgate-exec-")
    path = os.path.join(workdir, "program.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(program)
    isolate = not network and netns_available()
    cmd = [*(_unshare_cmd() if isolate else ()), sys.executable, "-I", "-B", path]
    env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}
    t0 = time.perf_counter()
    # stderr goes to a file, not a pipe: a child that outlives the program would hold a pipe open.
    err_path = os.path.join(workdir, "stderr.txt")
    try:
        with open(err_path, "wb") as err_file:
            proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err_file, start_new_session=True,
                                    preexec_fn=functools.partial(_limits, cpu_s, memory_mb, file_size_mb))
    except OSError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        return ExecResult("error", None, str(e), 0.0, "netns" if isolate else "none")
    try:
        proc.wait(timeout=timeout_s)
        if proc.returncode == 0:
            status = "passed"
        elif proc.returncode == -signal.SIGXCPU:
            status = "timeout"
        elif proc.returncode in (-signal.SIGKILL, -signal.SIGXFSZ, -signal.SIGSEGV):
            status = "error"
        else:
            status = "failed"
    except subprocess.TimeoutExpired:
        status = "timeout"
    finally:
        # Kill the whole group: a program that forked a child leaves nothing behind, timeout or not.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    wall = time.perf_counter() - t0
    with open(err_path, "rb") as f:
        f.seek(max(0, os.path.getsize(err_path) - _OUTPUT_LIMIT))
        err = f.read().decode("utf-8", "replace")
    shutil.rmtree(workdir, ignore_errors=True)
    return ExecResult(status, proc.returncode, err, wall, "netns" if isolate else "none")


def run_many(programs: Sequence[str], workers: int = 0, **limits: object) -> list[ExecResult]:
    """Run programs in parallel (``workers`` at a time; 0 means one per CPU core); results in input order."""
    n = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda p: run_code(p, **limits), programs))  # type: ignore[arg-type]


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)(?:\n```|\Z)", re.S)


def extract_program(text: str) -> str:
    """The code in a completion: the first fenced block (```` ```python ... ``` ````, an unclosed block runs to the
    end), else the whole text."""
    m = _FENCE.search(text)
    return m.group(1) if m else text


class HumanEvalScorer:
    """Runs an item's unit tests against the completed function (HumanEval, Chen et al. 2021).

    The program is the code extracted from ``response_prefix + completion``; if it does not define the item's
    ``entry_point``, the item's ``prompt`` (signature and docstring) is prepended. Then the item's ``test`` code and
    ``check(entry_point)`` are appended and the program runs in the sandbox under the protocol's execution limits.
    A completion cut off by max_tokens is ``truncated`` (score 0) unless ``extraction.score_truncated`` is set.
    """

    name = "humaneval"

    def __init__(self, protocol: Any):
        self.limits = protocol.spec.execution
        self.network = protocol.spec.tools.network
        self.score_truncated = protocol.spec.extraction.score_truncated

    def program(self, s: Any) -> str:
        code = extract_program(s.response_prefix + s.text)
        entry = s.item["entry_point"]
        if not re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.M):
            code = s.item["prompt"] + code
        return f"{code}\n\n{s.item['test']}\n\ncheck({entry})\n"

    def score(self, samples: Any) -> list[Any]:
        from evalgate.scoring.base import ScoreResult

        out: list[Any] = [None] * len(samples)
        todo = []
        for i, s in enumerate(samples):
            if s.finish_reason == "length" and not self.score_truncated:
                out[i] = ScoreResult(0.0, "truncated", None, "finish_reason length: cut off at max_tokens")
            else:
                todo.append(i)
        results = run_many([self.program(samples[i]) for i in todo], workers=self.limits.workers,
                           timeout_s=self.limits.timeout_s, cpu_s=self.limits.cpu_s, memory_mb=self.limits.memory_mb,
                           file_size_mb=self.limits.file_size_mb, network=self.network)
        status = {"passed": "correct", "failed": "wrong", "timeout": "timeout", "error": "error"}
        for i, r in zip(todo, results, strict=True):
            detail = r.stderr.strip().splitlines()[-1][:300] if r.stderr.strip() else None
            out[i] = ScoreResult(1.0 if r.status == "passed" else 0.0, status[r.status], None,
                                 f"[{r.isolation}] {detail}" if detail else f"[{r.isolation}]")
        return out
