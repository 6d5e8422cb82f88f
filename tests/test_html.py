"""Every HTML page comes from a template through one environment (``evalgate.html``): a hostile string in any value
a page shows arrives escaped, and the one figure helper gives inline SVG with no URL, the same bytes twice."""

from __future__ import annotations

import json
from pathlib import Path

from evalgate.html import ENV, fmt, svg

HOSTILE = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


def _assert_escaped(page: str) -> None:
    assert HOSTILE not in page and "<img" not in page
    assert ESCAPED in page


def test_autoescape_is_on_for_every_page_template():
    for name in ("report.html.j2", "watch.html.j2", "preflight.html.j2", "diagnose.html.j2"):
        t = ENV.get_template(name)
        assert t.environment.autoescape(name) if callable(t.environment.autoescape) else t.environment.autoescape


def test_watch_status_page_escapes_what_it_shows():
    from evalgate.watch.status import render_status

    ck = {"step": 5, "status": "failed", "metric": float("nan"), "run_id": HOSTILE, "message": HOSTILE,
          "path": HOSTILE}
    doc = {"state": "watching", "protocol": HOSTILE, "split": "dev", "updated_at": "t", "pid": 1, "metric": "pass@1",
           "evaluating": ck, "runs": [{"run_dir": HOSTILE, "exists": False, "stop": {"reason": HOSTILE},
                                       "checkpoints": [ck]}]}
    page = render_status(doc, [], "")
    _assert_escaped(page)
    assert page.count(ESCAPED) == 6  # protocol, evaluating path, run dir, STOP reason, run id, message
    assert "<td>n/a</td>" in page  # a NaN metric
    assert "http-equiv='refresh'" in page


def test_preflight_report_escapes_verdict_messages(tmp_path):
    from evalgate.preflight import PreflightResult, ShapeCheck, write_report

    res = PreflightResult(protocol=HOSTILE, checkpoint="c", split="s", samples=2, prompts=1, run_ids=["r"],
                          pass_rates={"a": 0.5}, histogram=[(0.0, 0), (0.5, 1), (1.0, 0)], all_correct=0.0,
                          all_wrong=0.0, other_constant=0.0, zero_variance=0.0, mean=0.5, std=0.5,
                          pass_rate_std=0.0, baselines={}, verdicts=[ShapeCheck(HOSTILE, "fired", HOSTILE)])
    page = write_report(res, tmp_path / "out" / "pre.html").read_text()
    _assert_escaped(page)
    assert page.count("<svg") == 1 and "xmlns" not in page and "http://" not in page


def test_diagnose_report_escapes_labels_and_messages(tmp_path):
    from evalgate.diagnostics.diagnose import diagnose
    from evalgate.diagnostics.log import read_jsonl
    from evalgate.diagnostics.report import render_html

    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "kl": 0.01 * s * s, "reward": 0.1}) + "\n" for s in range(1, 60)))
    d = diagnose(read_jsonl(log), label=HOSTILE)
    page = render_html([d], title=HOSTILE)
    _assert_escaped(page)
    assert "<svg" in page and "<h1>" + ESCAPED + "</h1>" in page


def test_svg_is_inline_and_stable():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    def draw() -> str:
        fig = Figure(figsize=(2, 1))
        fig.add_subplot().plot([0, 1], [1, 0], label=HOSTILE)
        fig.axes[0].legend()
        return str(svg(fig))

    a, b = draw(), draw()
    assert a == b and a.startswith("<svg") and "xmlns" not in a and "<metadata>" not in a
    assert HOSTILE not in a  # matplotlib escapes its own text


def test_fmt():
    # three decimals, as the command line prints them (evalgate.formatting)
    assert fmt(0.123456) == "0.123" and fmt(float("inf")) == "n/a" and fmt(None) == "" and fmt(3) == "3"
    assert fmt(0.5, 2) == "0.50"


def test_no_page_is_built_in_python_strings():
    # the f-string producers are gone: no module outside the templates writes a doctype
    root = Path(__file__).resolve().parent.parent / "evalgate"
    hits = [str(p.relative_to(root)) for p in root.rglob("*.py") if "<!doctype" in p.read_text().lower()]
    assert hits == []
