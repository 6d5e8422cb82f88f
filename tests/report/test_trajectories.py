"""The release report's trajectory viewer: the audit samples of an agentic run show every turn, tool call,
argument, result, violation and parse error, collapsed in ``<details>`` and HTML-escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.gate.history import stored_verdict
from evalgate.gate.report.outputs import render_html
from tests.agent_gate_fixtures import build, call

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

INJECTED = "<script>alert(1)</script><b>x</b>"
DEV_ITEMS = [{"id": "d1", "prompt": "6*7?", "answer": "42"}, {"id": "d2", "prompt": "1+2?", "answer": "3"}]
DEV_TURNS = {
    # a tool result holding HTML: the python tool prints it
    "d1": ["Let me compute. " + call("python", code=f"print({INJECTED!r})"), "The answer is 42"],
    # an unparsable call, then a tool that is not offered (a violation), then the answer
    "d2": ['<tool_call>{"name": </tool_call>', call("http_get", url="http://127.0.0.1:9/"), "The answer is 3"],
}


def test_audit_samples_show_their_trajectories_escaped(tmp_path: Path) -> None:
    v, store = build(tmp_path, DEV_ITEMS, DEV_TURNS, [{"id": "p1", "prompt": "x", "answer": "1"}],
                     {"p1": ["The answer is 1"]})
    shown = {s.item_id: s for s in v.samples.rows()}
    d1, d2 = shown["d1"].trajectory, shown["d2"].trajectory
    assert d1 is not None and d2 is not None
    assert (d1["status"], d1["tool_calls"], d1["violations"], d1["parse_errors"], len(d1["turns"])) == \
        ("answered", 1, 0, 0, 2)
    assert d1["turns"][0]["calls"][0]["result"] == INJECTED  # the sandbox's output, stripped
    assert (d2["status"], d2["tool_calls"], d2["violations"], d2["parse_errors"], len(d2["turns"])) == \
        ("answered", 1, 1, 1, 3)
    assert d2["turns"][1]["calls"][0]["violation"] == "disallowed_tool"

    html = render_html(v)
    assert INJECTED not in html and "<script>alert" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in html
    assert html.count('<details class="trajectory">') == len(v.samples.rows())
    assert "trajectory: 3 turn(s), ended answered;" in html
    assert "violation disallowed_tool" in html and "parse error: unparsable &lt;tool_call&gt;" in html
    assert "call <code>python</code> <code>{&#34;code&#34;: &#34;print(" in html  # arguments as JSON, escaped
    assert "<th>tool calls / sample</th>" in html
    assert {r.rule: r.passed for r in v.rules}["max_tool_violation_rate"]
    # the stored verdict renders the same trajectories again without reading anything
    assert v.gate_id is not None
    again = render_html(stored_verdict(store, v.gate_id)[1])
    assert again.count('<details class="trajectory">') == html.count('<details class="trajectory">')
