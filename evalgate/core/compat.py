"""Old import paths (before the domain packages) kept for one release, with a ``DeprecationWarning``.

``evalgate/__init__`` installs ``AliasFinder`` on ``sys.meta_path``: ``import evalgate.accesslog`` (or ``from evalgate
import accesslog``, ``from evalgate.report import gate_and_report``) imports the module's new home and binds the
old name to that same module object. ``MOVED`` is the old -> new table (docs/ARCHITECTURE.md shows the tree).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED: dict[str, str] = {
    "evalgate.rlhf.train_rm": "evalgate.demo.reward_model",
    "evalgate.rlhf.proxies": "evalgate.gate.proxies",
    "evalgate.agent": "evalgate.runner.agent",
    "evalgate.agent.view": "evalgate.views.trajectories",
    "evalgate.runner.settings": "evalgate.backends.settings",
    "evalgate.accesslog": "evalgate.access.log",
    "evalgate.agreement": "evalgate.human.agreement",
    "evalgate.audit": "evalgate.views.audit",
    "evalgate.callback": "evalgate.training.callback",
    "evalgate.contamination": "evalgate.splits.contamination",
    "evalgate.demo_rlhf": "evalgate.demo.rlhf",
    "evalgate.demo_train": "evalgate.demo.train",
    "evalgate.enums": "evalgate.core.enums",
    "evalgate.environment": "evalgate.core.environment",
    "evalgate.errors": "evalgate.core.errors",
    "evalgate.fileio": "evalgate.core.fileio",
    "evalgate.formatting": "evalgate.core.formatting",
    "evalgate.frames": "evalgate.views.frames",
    "evalgate.html": "evalgate.core.html",
    "evalgate.human_audit": "evalgate.human.audit_io",
    "evalgate.logsign": "evalgate.keys.signing",
    "evalgate.migrations": "evalgate.store.migrations",
    "evalgate.outfile": "evalgate.core.outfile",
    "evalgate.parity": "evalgate.runner.parity",
    "evalgate.preflight": "evalgate.training.preflight",
    "evalgate.progress": "evalgate.core.progress",
    "evalgate.prompts": "evalgate.protocol.prompts",
    "evalgate.protocol_docs": "evalgate.protocol.docs",
    "evalgate.protocols_ops": "evalgate.protocol.freeze",
    "evalgate.rating": "evalgate.human.rating",
    "evalgate.registry": "evalgate.core.registry",
    "evalgate.report": "evalgate.gate.report.outputs",
    "evalgate.report_writers": "evalgate.gate.report.writers",
    "evalgate.results": "evalgate.core.results",
    "evalgate.reward_audit": "evalgate.rlhf.reward_audit",
    "evalgate.reward_rules": "evalgate.rlhf.reward_rules",
    "evalgate.run": "evalgate.runner.evaluate",
    "evalgate.runs_view": "evalgate.views.runs",
    "evalgate.samples": "evalgate.views.samples",
    "evalgate.sandbox": "evalgate.core.sandbox",
    "evalgate.scoring.judge": "evalgate.rlhf.judge",
    "evalgate.scoring.judge_calls": "evalgate.rlhf.judge_calls",
    "evalgate.scoring.judge_options": "evalgate.rlhf.judge_options",
    "evalgate.scoring.reward": "evalgate.rlhf.reward",
    "evalgate.scoring.reward_options": "evalgate.rlhf.reward_options",
    "evalgate.scoring.reward_vllm": "evalgate.rlhf.reward_vllm",
    "evalgate.scoring.rm_engine": "evalgate.rlhf.rm_engine",
    "evalgate.sealing": "evalgate.keys.sealing",
    "evalgate.stats": "evalgate.core.stats",
    "evalgate.userfiles": "evalgate.core.userfiles",
    "evalgate.version": "evalgate.core.version",
    "evalgate.web": "evalgate.human.web",
    "evalgate.wheels": "evalgate.checkpoints.wheels",
}


def new_name(old: str) -> str | None:
    """The new dotted path of an old module path (a moved module or anything under a moved package), else None."""
    if old in MOVED:
        return MOVED[old]
    head, _, tail = old.rpartition(".")
    while head:
        if head in MOVED:
            return MOVED[head] + old[len(head):]
        head, _, _ = head.rpartition(".")
    return None


class _AliasLoader(importlib.abc.Loader):
    """Hands the import system the already imported new module, and gives it back its own ``__spec__`` (the
    import system sets the old name's spec on it before ``exec_module``)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec


class AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves an old ``evalgate.X`` path to its new module, warning once per old path."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname) if fullname.startswith("evalgate.") else None
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; the old path goes in the next release", DeprecationWarning,
                      stacklevel=2)
        module = importlib.import_module(new)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(module),
                                              is_package=hasattr(module, "__path__"))


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once. It answers only for the old names in ``MOVED`` (no file has
    them), and must come before the path finder: ``evalgate.web.app`` would otherwise be found again, as a second
    module, in the new ``evalgate.human.web`` package that ``evalgate.web`` resolved to."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
