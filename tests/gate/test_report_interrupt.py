"""A gate's report files are one set: a gate stopped by Ctrl-C, SIGTERM or SIGKILL, before or while it writes them,
never leaves an earlier gate's reports at the requested paths, alone or beside its own (session 16's adversary:
Ctrl-C mid-gate left the previous run's PASS files beside a half-written set). Real processes, real signals, on the
suite fixture of test_suite.py (its decision runs stored: the gate reads them, evaluates nothing)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from evalgate.core.fileio import replace_set, signals_held
from tests.conftest import REPO
from tests.gate.test_suite import GUARD_OK, build, suite_dict, write
from tests.helpers.processes import signal_at_marker

# A report format plugin (``slow``) registered before the CLI builds its flags; its writer marks that the reports
# are being written and sleeps there ("report"), or the guard's decision read does so ("read": mid-gate).
CHILD = """
import sys, time
from pathlib import Path
from evalgate.gate.report.writers import WRITERS, ReportWriter

mode, marker = sys.argv[2], Path(sys.argv[3])

def slow(verdict, path, *audit):
    Path(path).write_text("NEW")
    if mode == "report":
        marker.write_text("writing")
        time.sleep(120)  # the signal arrives here, while the reports are written
    return Path(path)

WRITERS.register("slow", ReportWriter(slow, "a slow plugin format", write_suite=slow))

import evalgate.gate.report.suite as suite_mod
from evalgate.gate import reads
from evalgate.gate.suite_run import run_suite
from evalgate.cli import main

real = reads.DecisionReader.read

def read(self, path, info, digest):
    if mode == "read" and self.policy.name == "rel/safety":
        marker.write_text("reading")
        time.sleep(120)  # the signal arrives here, mid-gate
    return real(self, path, info, digest)

reads.DecisionReader.read = read
suite_mod.run_suite = lambda s, st, a, **k: run_suite(s, st, a, evaluate_decision=False)
out = Path(sys.argv[4])
main(["gate", "--policy", sys.argv[1], "--report", str(out / "r.html"), "--junit", str(out / "j.xml"),
      "--json-out", str(out / "g.json"), "--markdown", str(out / "s.md"), "--slow", str(out / "x.slow")])
"""
NAMES = ("r.html", "j.xml", "g.json", "s.md", "x.slow")


def _gate_killed(tmp_path: Path, mode: str, sig: int) -> tuple[int, str, Path]:
    build(tmp_path / "runs", GUARD_OK)
    path = write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs"))
    out = tmp_path / "out"
    out.mkdir()
    for name in NAMES:  # an earlier gate's full set, PASS
        (out / name).write_text("OLD PASS")
    marker = tmp_path / "marker"
    code, _, err = signal_at_marker(CHILD, [str(path), mode, str(marker), str(out)], marker, sig, REPO)
    return code, err, out


@pytest.mark.integration  # real processes and real signals
@pytest.mark.parametrize(("mode", "sig", "code"), [
    ("report", signal.SIGINT, 130), ("report", signal.SIGTERM, 143), ("read", signal.SIGTERM, 143)])
def test_a_gate_stopped_by_a_signal_writes_interrupted_reports_and_no_earlier_one_stays(
        tmp_path: Path, home: Path, mode: str, sig: int, code: int) -> None:
    rc, err, out = _gate_killed(tmp_path, mode, sig)
    assert rc == code, err
    files = {p.name: p.read_text() for p in out.iterdir()}
    assert sorted(files) == ["g.json", "j.xml", "r.html", "s.md"], files  # the plugin has no error writer: removed
    assert not any("OLD" in text for text in files.values())
    doc = json.loads(files["g.json"])
    assert (doc["verdict"], doc["reason"], doc["exit_code"]) == (None, "interrupted", code)
    assert "interrupted" in files["j.xml"] and "INTERRUPTED" in files["s.md"] and "INTERRUPTED" in files["r.html"]


@pytest.mark.integration
def test_a_gate_killed_outright_leaves_no_earlier_report(tmp_path: Path, home: Path) -> None:
    """SIGKILL can be neither caught nor held: the gate writes no report, and the earlier ones are gone (deleted
    before the gate began), so nothing at the paths passes for this gate's result."""
    rc, err, out = _gate_killed(tmp_path, "report", signal.SIGKILL)
    assert rc == -signal.SIGKILL, err
    assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == []


# -- replace_set itself, in process -----------------------------------------------------------------------------------

def test_a_set_whose_writing_fails_leaves_every_earlier_file_and_no_temporary(tmp_path: Path) -> None:
    targets = {k: tmp_path / f"{k}.txt" for k in "abc"}
    for p in targets.values():
        p.write_text("old")

    def render(key: str, tmp: Path) -> None:
        if key == "c":
            raise KeyboardInterrupt  # Ctrl-C after a and b were written
        tmp.write_text("new")

    with pytest.raises(KeyboardInterrupt):
        replace_set(targets, render)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "c.txt"]
    assert {p.read_text() for p in targets.values()} == {"old"}
    replace_set(targets, lambda key, tmp: tmp.write_text(f"new {key} {tmp.suffix}"), remove=[tmp_path / "gone"])
    assert [p.read_text() for p in targets.values()] == ["new a .txt", "new b .txt", "new c .txt"]
    (tmp_path / "stale.slow").write_text("old")
    replace_set({"a": targets["a"]}, lambda key, tmp: tmp.write_text("again"), remove=[tmp_path / "stale.slow"])
    assert not (tmp_path / "stale.slow").exists() and targets["a"].read_text() == "again"


def test_a_signal_during_the_renames_is_delivered_after_them(tmp_path: Path) -> None:
    targets = {k: tmp_path / f"{k}.txt" for k in "ab"}
    # Python's own Ctrl-C handler for this test, whatever an earlier test in this worker left set (a library such as
    # Ray or torch may install its own): the block must hand the signal to the handler that was set before it
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                for p in targets.values():  # what replace_set does here: not cut in two
                    p.write_text("new")
        assert [p.read_text() for p in targets.values()] == ["new", "new"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
