"""A suite's verdict is stored (issue 45's follow-up): ``evalgate report SUITE_ID`` writes the whole suite's report
again from the suite's stored row and its members' stored gates, reading no split; an edited suite row is refused;
a plugin's report format writes a suite only through its ``write_suite``.

Over tests/gate/test_suite.py's fixture on a real DuckDB file store (``GUARD_BAD``: the target improves by +0.8, the
guard regresses by -0.4 against its margin 0.1; both seeds ship step 10; the suite fails on the guard)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import evalgate.gate.report.suite as suite_mod
from evalgate.core.errors import BadInput
from evalgate.gate.report.writers import WRITERS, ReportWriter
from evalgate.gate.suite_run import run_suite
from evalgate.store import Store
from tests.gate.test_suite import GUARD_BAD, build, suite_dict, write
from tests.helpers.cli import cli_parts

FILE_KEYS = ("report", "json_out", "junit", "markdown", "step_summary")


def _gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, dict[str, Any]]:
    """The failing suite through ``evalgate gate --json`` (its decision runs are the fixture's stored ones)."""
    store = build(tmp_path / "runs", GUARD_BAD)
    monkeypatch.setattr(suite_mod, "run_suite", lambda s, st, a, **k: run_suite(s, st, a, evaluate_decision=False))
    code, out, err = cli_parts("gate", "--policy", write(tmp_path / "s.yaml", suite_dict(tmp_path / "runs")),
                               "--json")
    assert code == 1, (out, err)
    return store, json.loads(out)


def test_report_renders_a_stored_suite_from_its_members_without_reading(tmp_path: Path, home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store, gated = _gate(tmp_path, monkeypatch)
    suite_id = gated["gate_id"]
    assert suite_id.startswith("suite-")
    rows = {g.name: g for g in store.gates()}
    assert set(rows) == {"rel", "rel/skill", "rel/safety"} and rows["rel"].verdict == "FAIL"
    assert rows["rel"].document["members"][1]["gate_id"] == rows["rel/safety"].gate_id
    logged = len(store.access_rows())
    out = tmp_path / "out"
    code, text, err = cli_parts("report", suite_id, "--json-out", out / "s.json", "--junit", out / "s.xml",
                                "--markdown", out / "s.md", "--report", out / "s.html")
    assert code == 1, (text, err)  # FAIL, as the suite decided
    assert text.splitlines()[0] == f"FAIL (fail): suite rel, stored as {suite_id}"
    assert len(store.access_rows()) == logged  # nothing read, nothing logged
    doc = json.loads((out / "s.json").read_text())
    # by hand (test_suite.py's docstring): target 1.0 - 0.2 = +0.8 passes; guard 0.6 - 1.0 = -0.4 fails
    assert [(r["member"], r["passed"], round(r["diff"], 6)) for r in doc["table"]] == [
        ("skill", True, 0.8), ("safety", False, -0.4)]
    assert [(p["train_seed"], p["step"]) for p in doc["picks"]] == [(1, 10), (2, 10)]
    assert doc["picks"][0]["rejected"] == [{"step": 20, "checkpoint": str(tmp_path / "runs" / "seed1" /
                                                                          "checkpoint-20"),
                                            "why": ["safety: dev 0.5000 < baseline 0.8000 - margin 0.1"]}]
    assert doc["ship"]["checkpoint"] is None and doc["decided_by"] == "safety"
    assert [m["gate"]["gate_id"] for m in doc["members"]] == [rows["rel/skill"].gate_id,
                                                              rows["rel/safety"].gate_id]
    # the whole document as the gate printed it (the files written aside)
    assert {k: v for k, v in doc.items() if k not in FILE_KEYS} == {
        k: v for k, v in gated.items() if k not in FILE_KEYS}
    cases = ET.parse(out / "s.xml").getroot().findall("testsuite/testcase")
    assert [(c.get("name"), c.find("failure") is not None) for c in cases] == [("skill", False), ("safety", True)]
    assert "## Member `safety` (guard)" in (out / "s.md").read_text()
    assert "<h1>evalgate suite rel: FAIL</h1>" in (out / "s.html").read_text()


def test_report_refuses_a_suite_row_edited_to_pass(tmp_path: Path, home: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store, gated = _gate(tmp_path, monkeypatch)
    with store.connect() as con:
        con.execute("UPDATE gates SET verdict='PASS', document=json_merge_patch(document, '{\"failing\": []}') "
                    "WHERE gate_id=?", [gated["gate_id"]])
    code, out, err = cli_parts("report", gated["gate_id"])
    assert code == 2 and "the store was edited after the gate" in err, (out, err)
    assert "PASS" not in out


def test_a_plugin_format_writes_a_suite_only_with_its_suite_writer(tmp_path: Path, home: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store, gated = _gate(tmp_path, monkeypatch)

    def members_csv(v: Any, path: Path) -> Path:
        Path(path).write_text("".join(f"{m.name},{'pass' if m.passed else 'fail'}\n" for m in v.members))
        return Path(path)

    plain = ReportWriter(lambda v, path, audit: path, "a single gate's format only")
    monkeypatch.setitem(WRITERS._entries, "plain", plain)
    monkeypatch.setitem(WRITERS._origin, "plain", "plugin")
    with pytest.raises(BadInput, match="plain have no suite writer.*give the plugin's ReportWriter a write_suite"):
        suite_mod.report_stored(gated["gate_id"], store, {"plain": tmp_path / "p.txt"})
    assert not (tmp_path / "p.txt").exists()
    monkeypatch.setitem(WRITERS._entries, "plain", ReportWriter(plain.write, plain.help, write_suite=members_csv))
    report = suite_mod.report_stored(gated["gate_id"], store, {"plain": tmp_path / "p.txt"})
    assert not report.passed and report.files == {"plain": str(tmp_path / "p.txt")}
    assert (tmp_path / "p.txt").read_text() == "skill,pass\nsafety,fail\n"
