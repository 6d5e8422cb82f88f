"""Training-run diagnostics: which curve broke first, and which part of the training loop it belongs to.

``read_path`` reads a training log (``trainer_state.json``, JSONL, TensorBoard) into a ``TrainLog``; ``diagnose``
runs every signal (``signals.py``) under ``Thresholds`` and returns a ``Diagnosis``; ``coverage`` checks a log
against a seed's checkpoints; ``write_report`` writes the HTML report with one plot per signal. docs/DIAGNOSTICS.md
lists the signals, thresholds and the key map.
"""

from evalgate.diagnostics.coverage import coverage
from evalgate.diagnostics.diagnose import (
    Diagnosis,
    diagnose,
    diagnose_paths,
    format_table,
    seed_from_path,
)
from evalgate.diagnostics.keys import KEY_MAP, KEY_ROWS
from evalgate.diagnostics.log import TrainLog, find_train_log, read_path
from evalgate.diagnostics.results import DiagnosisSummary, diagnose_logs
from evalgate.diagnostics.signals import PARTS, SEVERITIES, Finding, run_signals
from evalgate.diagnostics.thresholds import Thresholds

__all__ = ["KEY_MAP", "KEY_ROWS", "PARTS", "SEVERITIES", "Diagnosis", "DiagnosisSummary", "Finding", "Thresholds",
           "TrainLog", "coverage", "diagnose", "diagnose_logs", "diagnose_paths", "find_train_log", "format_table",
           "read_path", "run_signals", "seed_from_path"]
