"""The click type of an output-file flag (``--report``, ``--junit``, ``--out`` ...): a directory, or a path whose
nearest existing folder is a file or not writable, is refused while the flags are parsed (exit 2), before any work:
a gate would otherwise spend its private reads and then fail to write its report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from evalgate.core.fileio import unwritable


class OutFile(click.Path):
    """``click.Path(path_type=Path, dir_okay=False)`` that also checks the file can be written (``unwritable``)."""

    def __init__(self) -> None:
        super().__init__(path_type=Path, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = Path(os.fsdecode(super().convert(value, param, ctx)))
        if why := unwritable(path):
            self.fail(f"cannot write {path}: {why}", param, ctx)
        return path
