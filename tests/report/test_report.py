"""Gate outputs: the HTML report opened in headless Chromium (no console errors, no requests beyond the file itself,
a screenshot), JUnit XML checked by a parser, JSON and the Markdown step summary."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.gate.report.outputs import junit_xml, write_all
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _verdict(tmp_path: Path):  # noqa: ANN202
    built = fx.build(tmp_path / "runs")
    p = tmp_path / "gate.yaml"
    # the dev-side rules off, so the gate reads the decision split (a failing dev rule stops it before) and fails
    # there: no seed's best beats the baseline by 0.5 (decision means 0.6, 0.7, 0.8 vs 0.4)
    p.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2, min_improvement=0.5,
                                               max_truncation_rate=0.1, training_guards=False,
                                               reward_hacking=False)))
    return run_gate(load_policy(p), built["store"], evaluate_decision=False)


def chromium(html: Path, tmp: Path, png: Path) -> tuple[str, list[str]]:
    """Open ``html`` headless; return (stderr with console messages, URLs the page requested).

    Page-initiated requests are told apart from the browser's own (time sync, account probes) by Chromium's net
    log: their network isolation key is the page's top frame, ``file://``.
    """
    netlog = tmp / "netlog.json"
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0",
                        f"--log-net-log={netlog}", "--window-size=1200,2400", f"--screenshot={png}",
                        html.as_uri()], capture_output=True, text=True, timeout=120)
    assert png.is_file(), r.stderr[-2000:]
    text = netlog.read_text().rstrip()
    try:
        events = json.loads(text)["events"]
    except json.JSONDecodeError:  # a net log cut off at exit lacks its closing brackets
        events = json.loads(text.rstrip(",") + "]}")["events"]
    by_source: dict[int, dict[str, str]] = {}
    for ev in events:
        params = ev.get("params") or {}
        src = by_source.setdefault(ev["source"]["id"], {})
        for k in ("url", "network_isolation_key"):
            if isinstance(params.get(k), str):
                src.setdefault(k, params[k])
    urls = sorted({v["url"] for v in by_source.values()
                   if "url" in v and v.get("network_isolation_key", "").startswith("file://")})
    return r.stderr, urls


@pytest.mark.integration
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does it)")
def test_html_report_in_headless_chromium(tmp_path: Path) -> None:
    v = _verdict(tmp_path)
    out = write_all(v, tmp_path / "out", "gate", {"splits": {}, "chain": {"ok": True, "rows": 0}})
    html = Path(out["html"])
    text = html.read_text()
    assert "http://" not in text and "https://" not in text and "<script" not in text and "<link" not in text
    assert text.count("<svg") >= 4  # dev metric, reward, KL, completion length (plus loss, grad norm)
    # a page with a console error and a fetch is caught by the same harness (the check can fail)
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="http://192.0.2.1/x.png"><script>console.error("boom")</script></body></html>')
    err, urls = chromium(bad, tmp_path / "c1", tmp_path / "bad.png")
    assert "boom" in err and any(u.startswith("http://192.0.2.1") for u in urls)
    err, urls = chromium(html, tmp_path / "c2", tmp_path / "report.png")
    assert "CONSOLE" not in err and "Uncaught" not in err, err[-2000:]
    assert [u for u in urls if not u.startswith("file://")] == [], urls


def test_junit_parses_one_case_per_rule(tmp_path: Path) -> None:
    v = _verdict(tmp_path)
    root = ET.fromstring(junit_xml(v).split("?>", 1)[1])
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    # the fixture's 10 decision items are too few (issue 44, item 11): a warning case, then one case per rule
    assert [c.get("name") for c in cases] == ["decision_split_size", *(r.rule for r in v.rules)]
    warning = cases[0].find("system-err")
    assert warning is not None and "10 items" in (warning.text or "") and "TOO SMALL" in (warning.text or "")
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["min_improvement"] and suite.get("failures") == "1"
    assert int(suite.get("tests", "0")) == len(v.rules) + 1


def test_json_and_step_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    v = _verdict(tmp_path)
    out = write_all(v, tmp_path / "out", "gate", {"splits": {}, "chain": {"ok": True, "rows": 0}})
    doc = json.loads(Path(out["json"]).read_text())
    assert doc["verdict"] == "FAIL" and {s["train_seed"] for s in doc["seeds"]} == {1, 2, 3}
    assert doc["stats"]["difference"]["confidence"] == 0.95
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "**FAIL**" in text and "| min_improvement | **FAIL** |" in text
    # never per-item outputs of the private split: its extracted answers carry a marker found in no output
    html = Path(out["html"]).read_text()
    assert "Samples for audit" in html and fx.PRIVATE_MARKER not in html and fx.PRIVATE_MARKER not in text
    assert fx.PRIVATE_MARKER not in Path(out["json"]).read_text()
    # per-seed training-log diagnostics (tests/gate_fixtures.py): seed 3's grad_norm is NaN at step 25, seed 1's
    # completion length goes 100 -> 180 after step 30 (late/early 1.8 > 1.5: length_growth warns), and no fixture
    # log has an entropy key
    assert "Training-log diagnostics per seed" in html
    def cells(signal: str) -> list[tuple[str, str]]:  # the summary table's row of a signal: (class, text) per seed
        row = re.search(rf"<td>{signal}</td>(.*?)</tr>", html)
        assert row, signal
        return re.findall(r"<td class='(\w*)'>([^<]*)</td>", row.group(1))

    assert cells("nonfinite")[2] == ("fail", "FAIL @25 grad_norm")
    assert "length_growth (completions/mean_length)" in html
    assert cells("entropy_drop") == [("not_checkable", "n/c")] * 3
    assert [s["diagnosis"]["worst"] for s in doc["seeds"]][2] == "fail" and doc["seeds"][2]["not_checkable"]


def test_html_report_shows_the_judges_rates_and_per_item_table(tmp_path: Path) -> None:
    from evalgate.gate.report.outputs import write_reports
    from evalgate.rlhf.pairwise import PairJudgement, per_item_table, win_rate

    # a hand-made table: q1 tie/tie (0.5), q2 won in both orders (1), q3 position A both times (0.5, a flip),
    # q4 unparseable in the second order
    pairs = [PairJudgement("q1", "tie", "tie", 10, 10), PairJudgement("q2", "A", "B", 30, 12),
             PairJudgement("q3", "A", "A", 18, 3), PairJudgement("q4", "A", None, 5, 2)]
    summary = {"mode": "pairwise", "judged": 4, "unparseable": 1, "calls": {"asked": 8, "cached": 0},
               "pairwise": win_rate(pairs, resamples=500), "items": per_item_table(pairs)}
    decision = {k: v for k, v in summary.items() if k != "items"}
    built = fx.build(tmp_path / "runs", judge={"dev-1-30": summary, "dec-1": decision})
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2, min_improvement=0.0,
                                               training_guards=False, reward_hacking=False)))
    verdict = run_gate(load_policy(p), built["store"], evaluate_decision=False)
    doc = write_reports(verdict, {"html": tmp_path / "r.html", "json": tmp_path / "r.json"}, built["store"]).as_dict()
    html = Path(doc["report"]).read_text()
    section = html[html.index("<h2>LLM judge</h2>"):]
    section = section[:section.index("<h2>", 5)]
    assert "seed 1 step 30 — run dev-1-30" in section and "1 unparseable" in section
    # (0.5 + 1 + 0.5 + 0) / 4: q4 counts as a loss (issue 42, item 3); flips over the 3 parsed items: 1 of 3
    assert "Win rate 0.500" in section and "position-flip rate 0.333" in section
    assert "3 won, 2 tied, 1 lost over 4 items (1 unparseable, counted as a loss)" in section
    rows = re.findall(r"<tr><td>(q\d)</td>", section)
    assert rows == ["q1", "q2", "q3", "q4"]  # the selection run's table only: the decision run keeps none
    assert section.count("fx-private (decision)") == 1
    assert json.loads(Path(doc["json_out"]).read_text())["access"]["judge"][0]["run_id"] == "dev-1-30"


def test_report_charts_on_held_figures_are_the_bytes_new_figures_give(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``charts`` and the diagnostics plots draw each chart on the figure the chart before left
    (``evalgate.core.html.chart_axes``): the fixture's report (dev metric with best, failed and baseline marks, five
    training series, the fired signals' plots) comes out byte for byte as when every chart has a new figure."""
    from evalgate.core import html
    from evalgate.gate.report.outputs import charts, diagnostics_section

    v = _verdict(tmp_path)

    def drawn() -> list[str]:
        return [str(c["svg"]) for c in charts(v)] + [str(p["svg"]) for p in diagnostics_section(v)["plots"]]

    with monkeypatch.context() as m:
        m.setattr(html, "_take", lambda key, rc: None)
        new = drawn()  # each chart on a new figure, left held
    assert len(new) >= 7 and len(set(new)) == len(new)  # dev metric, reward, KL, ... and at least one plot
    assert drawn() == new
