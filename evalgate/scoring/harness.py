"""Running an item's unit tests against model-written code, with a verdict only evalgate's harness can give.

A sample is ``passed`` only when the harness saw the item's ``check(candidate)`` return: the program's exit status,
its output and anything else the model's code controls are never read as a result. ``harness_program.py`` is what
runs inside the sandbox (its docstring and docs/SANDBOX.md, "Trust model", say how each attack is stopped); this
module gives it its job through a file descriptor the model's code cannot reach, with a fresh random nonce, and
accepts a verdict only from the verdict descriptor and only with that nonce.
"""

from __future__ import annotations

import ast
import functools
import secrets
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.sandbox import available_cores, run_code
from evalgate.scoring.harness_program import decode, encode

VERDICT_BYTES = 1 << 16
"""Most bytes read from the verdict descriptor."""
_VERDICTS = ("passed", "failed", "timeout", "error")


@dataclass(frozen=True)
class HarnessJob:
    """One sample's test run.

    Attributes:
        code: the model's code as it runs (the item's prompt and the completion, ``HumanEvalScorer.program``).
        prompt: the item's prompt, run again on the harness's side for the helpers its tests call.
        test: the item's test code, defining ``check(candidate)``.
        entry_point: the name of the function under test in ``code``.
    """

    code: str
    prompt: str
    test: str
    entry_point: str


@dataclass(frozen=True)
class HarnessResult:
    """How one test run ended.

    Attributes:
        status: ``passed`` (the harness saw ``check`` return), ``failed`` (a test failed, the code did not load,
            a call returned a value that is not builtin data, or the run ended without the harness's verdict),
            ``timeout`` (wall-clock or CPU limit) or ``error`` (killed by a resource limit, could not start, or the
            item's own prompt or tests do not run).
        detail: the harness's reason (its own text, not the program's output), or None.
        returncode: the sandboxed process's exit status (never read as a result), None if it never ran.
        stderr: the last bytes of the program's stderr (model output: for people, never for the verdict).
        wall_s: seconds from start to exit or kill.
        isolation: the sandbox layers used (``ExecResult.isolation``).
    """

    status: str
    detail: str | None
    returncode: int | None
    stderr: str
    wall_s: float
    isolation: str


@functools.lru_cache(maxsize=1)
def harness_source() -> str:
    """The text of ``harness_program.py``, run in the sandbox as ``program.py``."""
    return (Path(__file__).parent / "harness_program.py").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1024)
def prompt_imports(prompt: str) -> tuple[str, ...]:
    """The modules a prompt imports at its top level (``import x``, ``from x import y``; relative imports left
    out), which the harness imports before it forks; () when the prompt does not parse."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ()
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return tuple(dict.fromkeys(names))


def _verdict(raw: bytes, nonce: str) -> tuple[str, str | None] | None:
    try:
        doc = decode(raw)
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None
    if type(doc) is not tuple or len(doc) != 3 or doc[0] != nonce or doc[1] not in _VERDICTS:
        return None
    return doc[1], doc[2] if isinstance(doc[2], str) else None


def run_tests(job: HarnessJob, **limits: Any) -> HarnessResult:
    """Run ``job`` in the sandbox under the harness and return the harness's verdict.

    Args:
        job: the code and the item's tests.
        **limits: keyword arguments for ``evalgate.core.sandbox.run_code`` (timeout_s, cpu_s, memory_mb,
            file_size_mb, network, processes, output_bytes); the harness and the candidate are two processes.

    Returns:
        HarnessResult; never raises for anything the code does.
    """
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryFile() as jf, tempfile.TemporaryFile() as vf:
        jf.write(encode((nonce, job.prompt, job.test, job.entry_point)))
        jf.seek(0)
        res = run_code(harness_source(), files={"candidate.py": job.code},
                       args=[str(jf.fileno()), str(vf.fileno()), *prompt_imports(job.prompt)],
                       pass_fds=(jf.fileno(), vf.fileno()), **limits)
        vf.seek(0)
        verdict = _verdict(vf.read(VERDICT_BYTES), nonce)
    if verdict is not None:
        status, detail = verdict
    elif res.status in ("timeout", "error"):
        status, detail = res.status, None
    else:
        status, detail = "failed", "the run ended before the harness saw the tests end"
    return HarnessResult(status, detail, res.returncode, res.stderr, res.wall_s, res.isolation)


def run_tests_many(jobs: Sequence[HarnessJob], workers: int = 0, **limits: Any) -> list[HarnessResult]:
    """``run_tests`` for each job, ``workers`` at once (0: one per available core); results in input order."""
    n = workers or available_cores()
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(lambda j: run_tests(j, **limits), jobs))
