"""The rating page of ``evalgate serve`` through FastAPI's TestClient: the rubric's Markdown rendered with raw HTML
escaped. (The real-browser tests are test_web.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from evalgate import rating
from evalgate.splits import write_split
from evalgate.store import Store
from evalgate.web.app import create_app
from tests.test_human_audit import add_run

ITEMS = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
RUBRIC = """# How to score

- **5**: correct and *concise*
- **1**: wrong

<script>alert("rubric")</script>

[a link](javascript:alert(1)) and [the guide](https://example.org/guide)
"""


@pytest.fixture
def site(tmp_path: Path) -> dict[str, object]:
    store = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    add_run(store, "run1", "ha", {it["id"]: 1.0 for it in ITEMS})
    rubric = tmp_path / "rubric.md"
    rubric.write_text(RUBRIC)
    batch = rating.create_batch("run1", samples=4, rubric_file=rubric, store=store, seed=0)["batch_id"]
    token = rating.add_rater("ann", store=store)["token"]
    client = TestClient(create_app(store, "http://testserver"))
    return {"client": client, "batch": batch, "auth": {"Authorization": f"Bearer {token}"}, "token": token}


def test_the_rubric_is_rendered_markdown_with_raw_html_escaped(site: dict[str, object]) -> None:
    client = site["client"]
    assert isinstance(client, TestClient)
    page = client.get(f"/batch/{site['batch']}", headers=site["auth"])  # type: ignore[arg-type]
    assert page.status_code == 200, page.text
    rubric = page.text.split('<div id="rubric">', 1)[1].split("</div>", 1)[0]
    assert "<h1>How to score</h1>" in rubric
    assert "<li><strong>5</strong>: correct and <em>concise</em></li>" in rubric
    assert "<script>" not in rubric and "&lt;script&gt;alert(&quot;rubric&quot;)&lt;/script&gt;" in rubric
    assert 'href="javascript:' not in rubric and "[a link](javascript:alert(1))" in rubric  # left as text
    assert '<a href="https://example.org/guide">the guide</a>' in rubric
