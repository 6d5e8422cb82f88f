"""Diagnose one or several training logs (one per training seed): findings, the first break, a terminal table.

``diagnose_paths`` is what ``evalgate diagnose PATH...`` runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput
from evalgate.core.formatting import table
from evalgate.diagnostics.log import TrainLog, read_path
from evalgate.diagnostics.signals import PARTS, SEVERITIES, Finding, run_signals
from evalgate.diagnostics.thresholds import Thresholds

_SEED = re.compile(r"(?:^|[-_/])seed[-_]?(\d+)(?:$|[-_/])", re.IGNORECASE)


@dataclass
class Diagnosis:
    """The findings on one training log.

    Attributes:
        label: column name (``seed N``, or the log's directory name).
        seed: training seed, when known.
        log: the log read.
        findings: one per signal (``signals.run_signals``).
    """

    label: str
    seed: int | None
    log: TrainLog
    findings: list[Finding] = field(default_factory=list)

    def fired(self, min_severity: str = "info") -> list[Finding]:
        """Findings at or above ``min_severity``, ordered by step (no step last) then severity (fail first)."""
        lo = SEVERITIES.index(min_severity)
        hits = [f for f in self.findings if f.fired and SEVERITIES.index(f.status) >= lo]
        return sorted(hits, key=lambda f: (f.step is None, f.step or 0, -SEVERITIES.index(f.status)))

    @property
    def first_break(self) -> Finding | None:
        """The earliest warn or fail finding of the log as it stands (not of a resumed run's abandoned segment, which
        is listed apart): "which curve broke first"."""
        hits = [f for f in self.fired("warn") if f.segment is None]
        return hits[0] if hits else None

    @property
    def worst(self) -> str:
        """``fail``, ``warn``, ``info`` or ``ok``."""
        levels = [SEVERITIES.index(f.status) for f in self.findings if f.fired]
        return SEVERITIES[max(levels)] if levels else "ok"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the series)."""
        fb = self.first_break
        steps = self.log.steps
        return {"label": self.label, "seed": self.seed, "source": self.log.source, "format": self.log.format,
                "steps": list(steps) if steps else None, "keys_used": self.log.used,
                "duplicate_steps": self.log.duplicate_steps, "warnings": self.log.warnings, "worst": self.worst,
                "log_choice": self.log.choice,
                "first_break": fb.as_dict() if fb else None, "findings": [f.as_dict() for f in self.findings]}


def seed_from_path(path: str | Path) -> int | None:
    """The training seed in a path's directory names (``seed-3``, ``seed_3``, ``seed3``), or None."""
    m = _SEED.search(Path(path).as_posix() + "/")
    return int(m.group(1)) if m else None


def diagnose(log: TrainLog, thresholds: Thresholds | None = None, label: str | None = None,
             seed: int | None = None) -> Diagnosis:
    """Run every signal on one log, and on each segment a resumed run abandoned (``TrainLog.abandoned``): a warn
    or fail finding there at or after the resume step is added with ``segment`` set, so a divergence the resume
    replaced is reported, as such."""
    findings = run_signals(log, thresholds)
    seen = {(f.signal, f.status, f.step) for f in findings}
    for resume, part in log.abandoned:
        seg = f"abandoned before the resume at step {resume}"
        for f in run_signals(part, thresholds):
            if f.status in ("warn", "fail") and f.step is not None and f.step >= resume and \
                    (f.signal, f.status, f.step) not in seen:
                f.segment = seg
                f.message = f"{seg} (steps {resume}..{part.steps[1] if part.steps else resume} as first logged): " \
                    + f.message
                findings.append(f)
    return Diagnosis(label or (f"seed {seed}" if seed is not None else Path(log.source).parent.name or log.source),
                     seed, log, findings)


def diagnose_paths(paths: list[str | Path], seeds: list[int] | None = None,
                   thresholds: Thresholds | None = None) -> list[Diagnosis]:
    """Read and diagnose each path (file or run directory).

    Args:
        paths: training logs, one per seed.
        seeds: the training seed of each path, in order; default: from each path (``seed-N``), else none.

    Raises:
        BadInput: a path that is not a readable log; ``seeds`` of another length than ``paths``.
    """
    if seeds and len(seeds) != len(paths):
        raise BadInput(f"{len(seeds)} --seed value(s) for {len(paths)} path(s); give one per path or none")
    out = []
    for i, p in enumerate(paths):
        seed = seeds[i] if seeds else seed_from_path(p)
        log = read_path(p)
        label = f"seed {seed}" if seed is not None else _label(Path(p))
        out.append(diagnose(log, thresholds, label, seed))
    labels = [d.label for d in out]
    for d in out:  # same directory name twice: fall back to the path
        if labels.count(d.label) > 1:
            d.label = d.log.source
    return out


def _label(p: Path) -> str:
    if p.is_file():
        p = p.parent if p.name in ("trainer_state.json",) or p.suffix != ".jsonl" else p.with_suffix("")
    return p.name or str(p)


_MARK = {"fail": "FAIL", "warn": "warn", "info": "info", "ok": "ok", "not_checkable": "n/c", "off": "off"}


@dataclass
class SummaryCell:
    """One seed's outcome of one signal: its severity (``fail`` ... ``off``; "" when the seed has no such finding)
    and the text shown (``FAIL @25``)."""

    status: str
    text: str


@dataclass
class SeedNotes:
    """What the summary says about one seed below the table: where its log came from, its first break, which log
    was chosen, findings of later segments and the log's warnings."""

    label: str
    source: str
    first_break: str
    log_choice: str | None
    segments: list[str]
    warnings: list[str]


@dataclass
class Summary:
    """The diagnostics summary (``summary``): one row per signal, grouped by loop part, each with a cell per seed;
    then the notes per seed. ``format_table`` writes it as text, the HTML pages as a table and lists
    (``templates/_diagnostics.html.j2``)."""

    labels: list[str]
    rows: list[tuple[str, str, list[SummaryCell]]]
    seeds: list[SeedNotes]


def _cell(f: Finding | None, nonfinite: bool = False) -> SummaryCell:
    if f is None:
        return SummaryCell("", "")
    at = f" @{f.step}" + (f" {f.keys[0]}" if nonfinite else "") if f.fired and f.step is not None else ""
    return SummaryCell(f.status, _MARK[f.status] + at)


def _notes(d: Diagnosis) -> SeedNotes:
    fb, st = d.first_break, d.log.steps
    return SeedNotes(
        d.label, f"{d.log.source} ({d.log.format}, steps {st[0]}..{st[1]})" if st else
        f"{d.log.source} (no logged steps)",
        f"{fb.signal} at step {fb.step} ({fb.part}): {fb.message}" if fb else "none (no warn or fail signal)",
        d.log.choice or None,
        [f"{_MARK[f.status]} {f.signal} at step {f.step} ({f.part}), {f.message}" for f in d.findings
         if f.segment is not None], list(d.log.warnings))


def summary(diags: list[Diagnosis]) -> Summary:
    """The summary of one or several seeds' diagnoses: per signal (grouped by loop part, in ``PARTS`` order) each
    seed's status and first step, the NaN / inf row last (its worst finding), then each seed's notes."""
    names: list[tuple[str, str]] = []
    for d in diags:
        for f in d.findings:
            if f.signal != "nonfinite" and (f.part, f.signal) not in names:
                names.append((f.part, f.signal))
    names.sort(key=lambda n: PARTS.index(n[0]))
    rows = [(part, sig, [_cell(next((x for x in d.findings if x.signal == sig and x.segment is None), None))
                         for d in diags]) for part, sig in names]
    cells = []
    for d in diags:
        nf = [f for f in d.findings if f.signal == "nonfinite" and f.segment is None]
        worst = max(nf, key=lambda f: SEVERITIES.index(f.status) if f.fired else -1) if nf else None
        cells.append(_cell(worst, nonfinite=True))
    rows.append(("system", "nonfinite", cells))
    return Summary([d.label for d in diags], rows, [_notes(d) for d in diags])


def format_table(diags: list[Diagnosis]) -> str:
    """The terminal table (``summary`` as text): one row per signal (grouped by loop part), per seed its status and
    first step, then per seed the first break and the log's warnings."""
    s = summary(diags)
    lines = [table(["part", "signal", *s.labels], [[part, sig, *(c.text for c in cells)]
                                                   for part, sig, cells in s.rows]), ""]
    for n in s.seeds:
        lines += [f"{n.label}: {n.source}", f"  first break: {n.first_break}"]
        if n.log_choice:
            lines.append(f"  log: {n.log_choice}")
        lines += [f"  {seg}" for seg in n.segments] + [f"  warning: {w}" for w in n.warnings]
    return "\n".join(lines)
