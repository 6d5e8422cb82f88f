"""Which tests read the real data sets: the ``real_data`` marker's check.

``make test-fast`` leaves out the tests marked ``real_data`` (they read GSM8K, MATH-500, IFEval, MMLU-Pro, XSTest or
the real GRPO logs from ``../shared/data``: a second or more each); ``make test`` runs them. A test of the fast lane
that reads those files without the marker would make the lane slow again unnoticed, so ``tests/conftest.py`` watches
each such test's file opens (a ``sys.addaudithook`` ``open`` event: what the test process itself opens, not its
subprocesses) and fails it, naming the file and the marker to add.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class SharedReads:
    """The files under ``roots`` opened in this process while ``watching`` (``start`` ... ``stop``).

    Args:
        roots: the data folders (``SHARED_DATA``); a path counts when it starts with one of them, as given or
            resolved (a folder reached through a symlink).

    The audit hook stays installed for the process (Python cannot remove one); while not watching it returns at
    its first comparison.
    """

    def __init__(self, roots: list[Path]) -> None:
        prefixes = {str(r) for r in roots} | {str(r.resolve()) for r in roots}
        self._prefixes = tuple(p.rstrip(os.sep) + os.sep for p in prefixes)
        self._watching = False
        self.opened: list[str] = []
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if not self._watching or event != "open" or not args:
            return
        path = args[0]
        if isinstance(path, str | bytes | os.PathLike):
            try:  # an exception here would be raised by the test's own open()
                name = os.path.abspath(os.fsdecode(path))
            except (OSError, ValueError):  # the working directory was removed, a NUL in the name
                return
            if name.startswith(self._prefixes):
                self.opened.append(name)

    def start(self) -> None:
        """Forget what was opened before and watch from now on."""
        self.opened = []
        self._watching = True

    def stop(self) -> list[str]:
        """Stop watching; the files under the roots opened since ``start``, in order."""
        self._watching = False
        return self.opened
