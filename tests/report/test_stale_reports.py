"""A gate that decides nothing leaves no earlier report at the paths it was asked to write (adversary round): a
release report from an earlier PASS left at ``--report out.html`` after a refused gate is what a reviewer, or a CI
step that uploads it, reads as this run's verdict. Every format a gate writes, for a single gate and a suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers.cli import cli

STALE = "<html>earlier report: PASS, ship seed 1</html>"


def _outputs(tmp_path: Path) -> dict[str, Path]:
    return {"--report": tmp_path / "out.html", "--json-out": tmp_path / "out.json", "--junit": tmp_path / "out.xml",
            "--markdown": tmp_path / "out.md"}


@pytest.mark.parametrize("kind", ["single gate", "suite"])
def test_a_gate_that_decides_nothing_overwrites_every_report_it_was_asked_for(tmp_path: Path, home: Path,
                                                                             kind: str) -> None:
    policy = tmp_path / "p.yaml"
    doc = {"name": "g", "protocol": "nope@1", "selection_split": "no-dev", "decision_split": "no-private",
           "baseline": {"value": 0.5}}
    if kind == "suite":
        doc = {"name": "s", "baseline": {"value": 0.5}, "members": [
            {"name": "t", "role": "target", "min_improvement": 0.0, **{k: v for k, v in doc.items()
                                                                       if k not in ("name", "baseline")}}]}
    policy.write_text(yaml.safe_dump(doc))
    outs = _outputs(tmp_path)
    for p in outs.values():
        p.write_text(STALE)
    r = cli("gate", "--policy", policy, *(x for flag, p in outs.items() for x in (flag, p)))
    assert r.exit_code == 2, r.output  # the splits do not exist: bad input before anything is read
    for flag, p in outs.items():
        text = p.read_text()
        assert "earlier report" not in text, (flag, text)
        assert "no-dev" in text or "no-private" in text or "nope" in text, (flag, text)  # says why
    html = outs["--report"].read_text()
    assert html.lstrip().lower().startswith("<!doctype html>") and "no verdict" in html.lower()
    assert "ship:</strong> none" in html.lower()


def test_a_failed_evaluate_missing_sweep_overwrites_the_reports_too(tmp_path: Path, home: Path) -> None:
    """``--evaluate-missing`` runs before the gate: a glob that matches nothing is bad input there, and the reports
    asked for say so (they kept an earlier gate's before)."""
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"name": "g", "protocol": "nope@1", "selection_split": "no-dev",
                                      "decision_split": "no-private", "baseline": {"value": 0.5}}))
    outs = _outputs(tmp_path)
    for p in outs.values():
        p.write_text(STALE)
    r = cli("gate", "--policy", policy, "--evaluate-missing", str(tmp_path / "nothing-*"),
            *(x for flag, p in outs.items() for x in (flag, p)))
    assert r.exit_code == 2, r.output
    for flag, p in outs.items():
        assert "earlier report" not in p.read_text(), flag
