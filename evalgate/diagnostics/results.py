"""What ``evalgate diagnose`` returns: ``diagnose_logs`` -> ``DiagnosisSummary`` (the diagnoses of the training logs
and the HTML report written), whose ``as_dict()`` is ``evalgate diagnose --json``'s document."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.diagnostics.diagnose import Diagnosis, diagnose_paths
from evalgate.diagnostics.thresholds import Thresholds, load_thresholds


@dataclass(frozen=True)
class DiagnosisSummary:
    """What ``evalgate diagnose`` found: one ``Diagnosis`` per training log (one per seed) and the HTML report
    written, if one was asked for.

    Attributes:
        seeds: the diagnoses, in the order of the paths.
        report: the HTML report written (None: none asked for).
    """

    seeds: list[Diagnosis]
    report: Path | None = None

    @property
    def fail(self) -> bool:
        """A fail signal fired on some log (``evalgate diagnose`` exits 1)."""
        return any(d.worst == "fail" for d in self.seeds)

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` document: ``seeds`` (each ``Diagnosis.as_dict``), ``fail``, and ``report`` when written."""
        doc: dict[str, Any] = {"seeds": [d.as_dict() for d in self.seeds], "fail": self.fail}
        if self.report is not None:
            doc["report"] = str(self.report)
        return doc


def diagnose_logs(paths: list[str | Path], seeds: list[int] | None = None,
                  thresholds: Thresholds | str | Path | None = None, kl_target: float | None = None,
                  report: str | Path | None = None) -> DiagnosisSummary:
    """What ``evalgate diagnose`` does: ``diagnose_paths`` under the thresholds, and the HTML report.

    Args:
        paths, seeds: as ``diagnose_paths``.
        thresholds: ``Thresholds``, or a YAML file of its fields (``load_thresholds``); default ``Thresholds()``.
        kl_target: the KL target (> 0) in place of the thresholds' (KL above twice it fails).
        report: write the HTML report with plots there (``diagnostics.report.write_report``).

    Raises:
        BadInput: as ``diagnose_paths`` and ``load_thresholds``; ``report`` is a directory.
    """
    th = load_thresholds(thresholds) if isinstance(thresholds, str | Path) else thresholds or Thresholds()
    if kl_target is not None:
        th = th.model_copy(update={"kl_target": kl_target})
    diags = diagnose_paths(paths, seeds, th)
    if report is None:
        return DiagnosisSummary(diags)
    from evalgate.diagnostics.report import write_report

    return DiagnosisSummary(diags, write_report(diags, report))
