"""Scoring model-written code: HumanEval programs run in the sandbox of ``evalgate.core.sandbox``.

``run_code``, ``run_many`` and ``ExecResult`` are re-exported from there (``evalgate.scoring`` exports them).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.scoring.base import HumanEvalOptions

from evalgate.core.sandbox import ExecResult, describe, require_strict, run_code, run_many  # noqa: F401 - re-exported
from evalgate.scoring.harness import HarnessJob, run_tests_many

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.#-]*)[^\n`]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)
LANGUAGE_TAGS: dict[str, frozenset[str]] = {"python": frozenset({"python", "py", "python3", "py3"})}
"""A language -> the info strings of a fenced block written in it (GitHub Linguist's aliases)."""


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of ``text`` as (info string lower-cased, code), in order; an unclosed last block runs to
    the end."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def extract_program(text: str, entry_point: str | None = None, language: str = "python") -> str:
    """The program in a completion.

    Of the fenced blocks in ``language`` (its tag in ``LANGUAGE_TAGS``) or untagged: the last that defines
    ``entry_point`` (``def entry_point(``: a corrected version after a draft), else the first such block; blocks in
    another language (a ``bash`` block with ``pip install``, a ``console`` transcript) only when there is nothing
    else; no fenced block: the whole text. The first fenced block alone scored a correct answer that began with
    ``pip install numpy`` in a ``bash`` block as a SyntaxError (arjunguha/BigCodeBench-X#6).

    Args:
        text: response prefix + completion.
        entry_point: the function the tests call, or None.
        language: the protocol's language (``python``: HumanEval).

    Returns:
        The code, without its fence lines.
    """
    blocks = fenced_blocks(text)
    if not blocks:
        return text
    tags = LANGUAGE_TAGS.get(language, frozenset({language}))
    ours = [code for tag, code in blocks if tag in tags or not tag]
    if entry_point:
        defines = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", re.M)
        defining = [code for code in ours if defines.search(code)]
        if defining:
            return defining[-1]
    return ours[0] if ours else blocks[0][1]


class HumanEvalScorer:
    """Runs an item's unit tests against the completed function (HumanEval, Chen et al. 2021).

    The model's code is assembled as the HumanEval harness does (Chen et al. 2021, ``human_eval/execution.py``):
    the item's ``prompt`` (its imports, helper functions, signature and docstring), then the code extracted from
    ``response_prefix + completion`` (``extract_program``: the Python block that defines the entry point). A
    chat answer that repeats the whole function without the prompt's imports (``from typing import List``) thus
    still runs with them; its ``def`` simply replaces the prompt's
    docstring-only one. Where the extracted code already holds the whole prompt (a response prefix that
    pre-fills it), the prompt is not written twice.

    The item's ``test`` code and ``check(entry_point)`` do not run in the model's program: evalgate's harness
    (``evalgate.scoring.harness``) runs them in a process of its own in the sandbox and calls the function across,
    and a sample is ``correct`` only when the harness saw ``check`` return (docs/SANDBOX.md, "Trust model"). Runs
    are under the protocol's execution limits. A completion cut off by max_tokens is ``truncated`` (score 0)
    unless ``extraction.score_truncated`` is set.
    """

    name = "humaneval"
    required_fields = ("prompt", "entry_point", "test")

    def __init__(self, protocol: Any, options: HumanEvalOptions | None = None):
        self.limits = protocol.spec.execution
        self.network = protocol.spec.tools.network
        self.score_truncated = protocol.spec.extraction.score_truncated
        if self.limits.isolation == "strict":  # refused here, before any split is read
            require_strict(self.network, f"{protocol.path}: execution.isolation")
        self.sandbox = describe(self.network)
        """The sandbox programs run in, for the run record (``evalgate.core.sandbox.describe``)."""

    def program(self, s: Any) -> str:
        """The model's code for one sample: the prompt and the extracted completion (see the class docstring)."""
        code = extract_program(s.response_prefix + s.text, s.item["entry_point"])
        prompt = s.item["prompt"]
        if prompt.strip() not in code:
            code = prompt + code
        return code

    def job(self, s: Any) -> HarnessJob:
        """The harness's job for one sample: its code and the item's prompt, tests and entry point."""
        return HarnessJob(self.program(s), s.item["prompt"], s.item["test"], s.item["entry_point"])

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
        results = run_tests_many([self.job(samples[i]) for i in todo], workers=lim.workers,
                                 timeout_s=lim.timeout_s, cpu_s=lim.cpu_s, memory_mb=lim.memory_mb,
                                 file_size_mb=lim.file_size_mb, network=self.network)
        status = {"passed": "correct", "failed": "wrong", "timeout": "timeout", "error": "error"}
        for i, r in zip(todo, results, strict=True):
            detail = (r.detail or "").strip().splitlines()[-1][:300] if (r.detail or "").strip() else None
            out[i] = ScoreResult(1.0 if r.status == "passed" else 0.0, status[r.status], None,
                                 f"[{r.isolation}] {detail}" if detail else f"[{r.isolation}]")
        return out
