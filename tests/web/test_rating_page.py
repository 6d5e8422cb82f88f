"""The rating page of ``evalgate serve`` through FastAPI's TestClient: the rubric's Markdown rendered with raw HTML
escaped, the gold answer only where the batch shows it and below the question, and a logout that ends the session
in the store. (The real-browser tests are test_web.py.)"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from evalgate.core.environment import utc_now
from evalgate.core.errors import BadInput
from evalgate.human import rating
from evalgate.splits import write_split
from evalgate.store import Store
from tests.test_human_audit import add_run

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

ITEMS = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)]
RUBRIC = """# How to score

- **5**: correct and *concise*
- **1**: wrong

<script>alert("rubric")</script>

[a link](javascript:alert(1)) and [the guide](https://example.org/guide)
"""


@pytest.fixture
def site(tmp_path: Path) -> dict[str, Any]:
    from fastapi.testclient import TestClient  # here: the fast lane's other worker collects this file, runs none

    from evalgate.human.web.app import create_app

    shift = [timedelta(0)]  # the site's store's clock runs this far ahead of the system clock
    store = Store(clock=lambda: utc_now() + shift[0])
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    add_run(store, "run1", "ha", {it["id"]: 1.0 for it in ITEMS})
    rubric = tmp_path / "rubric.md"
    rubric.write_text(RUBRIC)
    batch = rating.create_batch("run1", samples=4, rubric_file=rubric, store=store, seed=0)["batch_id"]
    token = rating.add_rater("ann", store=store)["token"]
    client = TestClient(create_app(store, "http://testserver"))
    return {"client": client, "batch": batch, "auth": {"Authorization": f"Bearer {token}"}, "token": token,
            "shift": shift}


@pytest.mark.usefixtures("memory_store")
def test_the_rubric_is_rendered_markdown_with_raw_html_escaped(site: dict[str, Any]) -> None:
    page = site["client"].get(f"/batch/{site['batch']}", headers=site["auth"])
    assert page.status_code == 200, page.text
    rubric = page.text.split('<div id="rubric">', 1)[1].split("</div>", 1)[0]
    assert "<h1>How to score</h1>" in rubric
    assert "<li><strong>5</strong>: correct and <em>concise</em></li>" in rubric
    assert "<script>" not in rubric and "&lt;script&gt;alert(&quot;rubric&quot;)&lt;/script&gt;" in rubric
    assert 'href="javascript:' not in rubric and "[a link](javascript:alert(1))" in rubric  # left as text
    assert '<a href="https://example.org/guide">the guide</a>' in rubric


def _shown(page: str) -> tuple[str, str | None]:
    """The question table and the gold-answer table (None when the page has none) of a rating page."""
    question = page.split('<table id="item">', 1)[1].split("</table>", 1)[0]
    gold = page.split('<table id="gold">', 1)[1].split("</table>", 1)[0] if 'id="gold"' in page else None
    return question, gold


@pytest.mark.usefixtures("memory_store")
def test_the_gold_answer_is_hidden_unless_the_batch_shows_it_and_then_below_the_question(
        site: dict[str, Any]) -> None:
    client, store = site["client"], Store()
    question, gold = _shown(client.get(f"/batch/{site['batch']}", headers=site["auth"]).text)
    assert "<th>question</th>" in question and "What is " in question
    assert "<th>answer</th>" not in question and gold is None  # the protocol renders only the question

    shown = rating.create_batch("run1", samples=4, store=store, seed=0, show_gold=True)["batch_id"]
    page = client.get(f"/batch/{shown}", headers=site["auth"]).text
    question, gold = _shown(page)
    assert "<th>answer</th>" not in question and gold is not None and "<th>answer</th>" in gold
    n = int(question.split("What is ", 1)[1].split(" +", 1)[0])
    assert f"<pre>{2 * n}</pre>" in gold  # this item's own answer
    assert page.index('id="item"') < page.index('id="gold"') < page.index('id="completion"')


@pytest.mark.usefixtures("memory_store")
def test_a_batch_of_a_run_whose_protocol_the_store_lacks_is_refused(site: dict[str, Any]) -> None:
    store = Store()
    store.create_run({"run_id": "orphan", "protocol_name": "gone", "protocol_version": "1", "protocol_hash": "g",
                      "checkpoint_digest": "ck", "checkpoint_path": "/ck", "split": "ha", "tier": "human-audit",
                      "split_sha256": "x", "sampling_seed": 1, "backend": "hf"})
    store.finish_run({"run_id": "orphan", "metrics": {}, "counts": {}, "wall_s": 1.0},
                     [{"item_id": "q0", "sample_index": 0, "seed": 7, "score": 1.0, "status": "scored",
                       "cached": False}])
    with pytest.raises(BadInput, match="holds no protocol gone@1"):
        rating.create_batch("orphan", store=store)


def _login(client: TestClient, token: str) -> str:
    from evalgate.human.web.app import COOKIE

    r = client.post("/login", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303, r.text
    session = r.cookies.get(COOKIE)
    assert session and session != token  # the cookie is a session id, never the rater's token
    return str(session)


@pytest.mark.usefixtures("memory_store")
def test_logout_ends_the_session_so_the_old_cookie_no_longer_works(site: dict[str, Any]) -> None:
    from evalgate.human.web.app import COOKIE

    client = site["client"]
    session = _login(client, site["token"])
    cookie = {"Cookie": f"{COOKIE}={session}"}
    home = client.get("/", headers=cookie)
    assert home.status_code == 200 and 'action="/logout"' in home.text
    out = client.post("/logout", headers=cookie, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert f'{COOKIE}=""' in out.headers["set-cookie"] or "Max-Age=0" in out.headers["set-cookie"]
    client.cookies.clear()
    gone = client.get("/", headers=cookie)  # the same cookie, replayed after logout
    assert gone.status_code == 401 and "session has ended" in gone.text
    assert client.get("/", headers=site["auth"]).status_code == 200  # the rater's token itself still logs in
    foreign = client.post("/logout", headers={**cookie, "Origin": "http://evil.example"}, follow_redirects=False)
    assert foreign.status_code == 403


@pytest.mark.usefixtures("memory_store")
def test_a_new_token_or_the_ttl_ends_a_session(site: dict[str, Any]) -> None:
    from evalgate.human.web.app import COOKIE

    client, store = site["client"], Store()
    session = _login(client, site["token"])
    client.cookies.clear()
    cookie = {"Cookie": f"{COOKIE}={session}"}
    assert client.get("/", headers=cookie).status_code == 200
    site["shift"][0] = rating.SESSION_TTL + timedelta(minutes=1)
    assert client.get("/", headers=cookie).status_code == 401  # 12 h and a minute after login
    site["shift"][0] = timedelta(0)
    assert client.get("/", headers=cookie).status_code == 200
    rating.add_rater("ann", store=store)  # a new token for ann: her browser sessions end with the old one
    assert client.get("/", headers=cookie).status_code == 401


def test_migration_33_keeps_an_older_batchs_gold_hidden(tmp_path: Path) -> None:
    """A batch made before migration 33 reads as show_gold false, and the sessions table is there."""
    from evalgate.store import Database
    from evalgate.store.migrations import MIGRATIONS

    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    path = tmp_path / "old.duckdb"
    old = Store(Database(path, [x for x in MIGRATIONS if x[0] < 33]))
    add_run(old, "run1", "ha", {it["id"]: 1.0 for it in ITEMS})
    old.create_batch({"batch_id": "b-old", "run_id": "run1", "split": "ha", "rubric": "r", "scale_min": 1,
                      "scale_max": 5, "stratify": None, "selection_seed": 1, "created_by": "t",
                      "created_at": utc_now()}, [])
    store = Store(path)
    assert store.batches("b-old")[0].show_gold is False
    assert store.session_rater("unknown", utc_now() - timedelta(days=1)) is None
