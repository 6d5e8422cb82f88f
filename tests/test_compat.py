"""Old import paths (before issue 43's domain packages) still work for one release, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

REPO_ENV_NOTE = "each case runs in a fresh interpreter, so the first import (the one that warns) is the one tested"


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True,
                          text=True, check=False)


@pytest.mark.parametrize(("old", "new", "name"), [
    ("evalgate.accesslog", "evalgate.access.log", "verify"),
    ("evalgate.report", "evalgate.gate.report.outputs", "gate_and_report"),
    ("evalgate.environment", "evalgate.core.environment", "Environment"),   # docs/API.md
    ("evalgate.results", "evalgate.core.results", "Result"),                # docs/API.md
    ("evalgate.scoring.judge", "evalgate.rlhf.judge", "JudgeScorer"),
    ("evalgate.web.app", "evalgate.human.web.app", "markdown_html"),
])
def test_an_old_path_is_the_new_module_and_warns(old: str, new: str, name: str) -> None:
    new_mod = importlib.import_module(new)
    assert hasattr(new_mod, name), f"{new} has no {name}: pick a name the module defines"
    with pytest.warns(DeprecationWarning, match=rf"{old.replace('.', '[.]')} moved to {new.replace('.', '[.]')}"):
        sys.modules.pop(old, None)
        old_mod = importlib.import_module(old)
    assert old_mod is new_mod
    assert getattr(old_mod, name) is getattr(new_mod, name)


def test_from_import_forms_warn_and_give_the_same_objects() -> None:
    # a fresh interpreter: -W error turns the warning into an ImportError-free failure we can see
    quiet = _fresh("import evalgate.access.log, evalgate.gate.report.outputs")
    assert quiet.returncode == 0, quiet.stderr
    loud = _fresh("from evalgate import accesslog")
    assert loud.returncode != 0 and "DeprecationWarning: evalgate.accesslog moved to evalgate.access.log" in loud.stderr
    same = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c",
                           "from evalgate import accesslog\nfrom evalgate.report import gate_and_report\n"
                           "import evalgate, evalgate.access.log as a, evalgate.gate.report.outputs as r\n"
                           "assert accesslog is a and gate_and_report is r.gate_and_report\n"
                           "assert evalgate.rating is __import__('evalgate.human.rating', fromlist=['x'])\n"],
                          capture_output=True, text=True, check=False)
    assert same.returncode == 0, same.stderr


def test_an_unknown_old_looking_path_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("evalgate.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("evalgate.accesslog.no_such_submodule")


def test_the_protocol_package_keeps_the_old_module_names() -> None:
    import evalgate.protocol
    from evalgate.protocol import spec

    assert evalgate.protocol.Protocol is spec.Protocol
    assert evalgate.protocol.load_protocol is spec.load_protocol
    with pytest.raises(AttributeError):
        evalgate.protocol.no_such_name  # noqa: B018
