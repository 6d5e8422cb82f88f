"""Training-run diagnostics: which curve broke first, and which part of the training loop it belongs to.

``read_path`` reads a training log (``trainer_state.json``, JSONL, TensorBoard) into a ``TrainLog``; ``diagnose``
runs every signal (``signals.py``) under ``Thresholds`` and returns a ``Diagnosis``; ``coverage`` checks a log
against a seed's checkpoints; ``write_report`` writes the HTML report with one plot per signal. docs/DIAGNOSTICS.md
lists the signals, thresholds and the key map.
"""

from __future__ import annotations

from typing import Any

from evalgate.core import lazy

_WHERE = {  # name -> the submodule that defines it
    "Diagnosis": "diagnose", "diagnose_paths": "diagnose",
    "format_table": "diagnose", "seed_from_path": "diagnose", "KEY_MAP": "keys", "KEY_ROWS": "keys",
    "TrainLog": "log", "find_train_log": "log", "read_path": "log", "DiagnosisSummary": "results",
    "diagnose_logs": "results", "Finding": "signals", "PARTS": "signals", "SEVERITIES": "signals",
    "run_signals": "signals", "Thresholds": "thresholds",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _WHERE, name, globals())
