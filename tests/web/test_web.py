"""``evalgate serve`` in a real headless Chromium (Selenium + Debian's chromium-driver) against a real uvicorn
subprocess on 127.0.0.1: a rater scores with the keyboard, tokens and forms are checked, the agreement page shows a
hand-computed Spearman. One server and one browser for the whole module."""

from __future__ import annotations

import html
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from evalgate.human import rating
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO
from tests.test_human_audit import add_run

pytestmark = pytest.mark.integration  # the app (FastAPI) is imported in the tests: the fast lane collects this file
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(CHROMEDRIVER is None or CHROMIUM is None,
                                   reason="chromium and chromium-driver are not installed (apt-get install chromium "
                                          "chromium-driver; .ci/run and make setup do it as root)")
ITEMS = [{"id": f"q{i}", "question": f"What is {i} + {i}?"} for i in range(6)]
# run2: automatic scores 0.1..0.5 for q0..q4 (a mean_score-style protocol); both raters give 1, 3, 2, 5, 4.
AUTO2 = {"q0": 0.1, "q1": 0.2, "q2": 0.3, "q3": 0.4, "q4": 0.5}
HUMAN2 = {"q0": 1, "q1": 3, "q2": 2, "q3": 5, "q4": 4}


def _get(url: str, **kw: Any) -> httpx.Response:
    return httpx.get(url, timeout=60, **kw)  # generous: the test machine is shared and often loaded


def _post(url: str, **kw: Any) -> httpx.Response:
    return httpx.post(url, timeout=60, **kw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _form(html: str) -> tuple[str, str]:
    token = re.search(r'name="form_token" value="([^"]+)"', html)
    sample = re.search(r'name="sample" value="([^"]+)"', html)
    assert token and sample, html[-500:]
    return token.group(1), sample.group(1)


def _counts(store: Store, batch_id: str) -> tuple[int, int, int]:
    return (len(store.ratings(batch_id)), len(store.rating_events(batch_id)),
            len([h for h in store.human_scores("ha") if h.source_sha256 == f"batch:{batch_id}"]))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store with a human-audit split, two runs, two batches and raters, served by 'evalgate serve'."""
    root = tmp_path_factory.mktemp("web")
    env = {**os.environ, "EVALGATE_HOME": str(root / "home"), "EVALGATE_SPLITS": str(root / "splits"),
           "XDG_CONFIG_HOME": str(root / "config"), "EVALGATE_ACTOR": "test-actor", "PYTHONPATH": str(REPO)}
    with pytest.MonkeyPatch.context() as mp:
        for k in ("EVALGATE_HOME", "EVALGATE_SPLITS", "XDG_CONFIG_HOME"):
            mp.setenv(k, env[k])
        store = Store()
        write_split("ha", "human-audit", ITEMS, {"source": "test"})
        add_run(store, "run1", "ha", {f"q{i}": float(i % 2) for i in range(6)})
        add_run(store, "run2", "ha", AUTO2)
        b1 = rating.create_batch("run1", samples=6, store=store, seed=3)["batch_id"]
        b2 = rating.create_batch("run2", samples=5, store=store, seed=4)["batch_id"]
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        tokens = {name: rating.add_rater(name, admin=name == "boss", base_url=base, store=store)
                  for name in ("alice", "bob", "boss")}
        proc = subprocess.Popen([sys.executable, "-m", "evalgate.cli", "serve", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # wait on the server itself, not a fixed count: a loaded 2-core CI machine can take long to import
            # fastapi and uvicorn; stop early (with its stderr) if the process ended
            deadline = time.monotonic() + 180
            while True:
                try:
                    if httpx.get(base + "/", timeout=5).status_code == 401:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    if proc.poll() is None:
                        proc.kill()
                    err = proc.communicate(timeout=30)[1].decode()
                    raise AssertionError(f"evalgate serve did not answer within 180 s (exit {proc.returncode}): "
                                         f"{err[-2000:]}")
                time.sleep(0.1)
            yield {"base": base, "port": port, "store": store, "b1": b1, "b2": b2, "tokens": tokens, "root": root,
                   "env": env}
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:  # a loaded machine: do not fail the module on a slow shutdown
                proc.kill()
                proc.wait()


@pytest.fixture(autouse=True)
def site_home(home: Path, site: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own store reads and writes (``rating.add_rater``, ``rating.submit``, ``store.ratings``) use the
    site's home, splits and key directory, as the server does. The autouse ``home`` gives every test its own, where
    the site's private split key is absent: in file order no test's own read happened to need the key (no rater's
    note was stored before one), and in reverse order five tests failed."""
    for k in ("EVALGATE_HOME", "EVALGATE_SPLITS", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(k, site["env"][k])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,1000",
                "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER or ""), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _login(driver: Any, url: str) -> None:
    """Open a printed login URL and click "Log in" (the page never logs in by itself)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get("about:blank")  # a login page already shown (after a logout) would only change its fragment: no load,
    driver.get(url)            # and the page's script, which reads the token from the fragment, would not run again
    assert driver.find_element(By.ID, "token").get_attribute("value") == url.split("#token=")[1]
    driver.find_element(By.ID, "login").click()
    WebDriverWait(driver, 90).until(lambda d: not d.current_url.endswith("/login"))


def _shot(driver: Any, name: str) -> None:
    """Save a screenshot under $EVALGATE_SHOTS (when set), for the issue's closing note."""
    if os.environ.get("EVALGATE_SHOTS"):
        Path(os.environ["EVALGATE_SHOTS"]).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(os.environ["EVALGATE_SHOTS"]) / name))


@needs_browser
def test_rater_scores_three_samples_with_the_keyboard(site: dict[str, Any], browser: Any) -> None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    store, b1 = site["store"], site["b1"]
    earlier = len(store.access_rows("ha"))  # reads before this test (another test's page for alice among them)
    _login(browser, site["tokens"]["alice"]["url"])
    assert browser.current_url == site["base"] + "/"  # the login set the cookie and dropped the token from the URL
    browser.get(f"{site['base']}/batch/{b1}")
    WebDriverWait(browser, 90).until(lambda d: d.execute_script("return document.readyState") == "complete")
    keys = ["4", "1", "5"]
    shown = []
    for i, key in enumerate(keys):
        page = browser.page_source
        assert not {"run1", "/ck", "ck", "checkpoint"} & set(re.findall(r"[\w/]+", page))  # blind
        shown.append(browser.find_element(By.NAME, "sample").get_attribute("value"))
        if i == 0:
            _shot(browser, "rating.png")
        ActionChains(browser).send_keys(key).perform()
        # the key submits the form and the browser loads the next page: an element found on the old page can go
        # stale between find_element and .text (CI run of session 4), so a stale or missing element (or a script
        # run while the document changes: any WebDriverException) means "not yet". The page must also have finished
        # loading: the keyboard handler is the page's last script, and a key sent before it ran would be lost.
        WebDriverWait(browser, 90, ignored_exceptions=(WebDriverException,)).until(
            lambda d, n=i + 1: f": {n} of 6 scored" in d.find_element(By.ID, "progress").text
            and d.execute_script("return document.readyState") == "complete",
            message=f"the page after key {key!r} never showed '{i + 1} of 6 scored'")
    by_key = {it.sample_key: (it.item_id, it.sample_index) for it in store.batch_items(b1)}
    got = {(r.item_id, r.sample_index): r.score for r in store.ratings(b1, "alice")}
    assert got == {by_key[k]: float(v) for k, v in zip(shown, keys, strict=True)}
    assert len(set(shown)) == 3
    reads = [r for r in store.access_rows("ha")[earlier:]
             if r.actor == "alice" and r.purpose == "human-audit-rating"]
    assert [r.outcome for r in reads] == ["read"] * 4  # three scored pages and the fourth now shown
    assert all(r.detail.startswith(f"batch {b1} sample ") for r in reads)
    seeds = {r["rater"]: r["seed"] for r in _seed_rows(store, b1)}
    assert "alice" in seeds  # the shuffle seed is recorded


def _seed_rows(store: Store, batch_id: str) -> list[dict[str, Any]]:
    with store.connect() as con:
        cur = con.execute("SELECT rater, seed FROM audit_rater_seeds WHERE batch_id=?", [batch_id])
        return [{"rater": r[0], "seed": r[1]} for r in cur.fetchall()]


def test_pages_need_a_valid_token(site: dict[str, Any]) -> None:
    base, b1 = site["base"], site["b1"]
    alice, boss = site["tokens"]["alice"]["token"], site["tokens"]["boss"]["token"]
    for path in ("/", f"/batch/{b1}", "/dashboard/runs"):
        assert _get(base + path).status_code == 401, path
    assert _get(base + "/agreement", headers={"Authorization": "Bearer not-a-token"}).status_code == 401
    assert _post(f"{base}/batch/{b1}/rate", data={"score": "3"}).status_code == 401
    assert _post(f"{base}/login", data={"token": "wrong"}).status_code == 401
    for path in ("/agreement", "/dashboard/runs/run1", "/dashboard/access"):
        assert _get(base + path, headers={"Authorization": f"Bearer {alice}"}).status_code == 403, path
    assert _get(base + "/dashboard/gates", headers={"Authorization": f"Bearer {boss}"}).status_code == 200


def test_bad_submissions_are_refused_and_write_nothing(site: dict[str, Any]) -> None:
    base, store, b1, b2 = site["base"], site["store"], site["b1"], site["b2"]
    bob = {"Authorization": f"Bearer {site['tokens']['bob']['token']}"}
    form, sample = _form(_get(f"{base}/batch/{b1}", headers=bob).text)
    other = store.batch_items(b2)[0].sample_key
    before = _counts(store, b1)
    cases = [({"score": "7"}, 400, "outside this batch's scale 1..5"),
             ({"score": "three"}, 400, "not a whole number"),
             ({"sample": other}, 400, f"is not in batch {b1}"),
             ({"form_token": "forged"}, 403, "or was not issued to you")]
    for change, status, message in cases:
        r = _post(f"{base}/batch/{b1}/rate", headers=bob,
                       data={"form_token": form, "sample": sample, "score": "3", **change})
        assert (r.status_code, message in html.unescape(r.text)) == (status, True), (change, r.text[-300:])
        assert _counts(store, b1) == before
    r = _post(f"{base}/batch/{b1}/rate", headers={**bob, "Origin": "http://evil.example"},
                   data={"form_token": form, "sample": sample, "score": "3"})
    assert r.status_code == 403 and "cross-site" in r.text and _counts(store, b1) == before
    # the form token survived every refusal: the real submission goes through, once
    ok = _post(f"{base}/batch/{b1}/rate", headers=bob, data={"form_token": form, "sample": sample, "score": "3"})
    assert ok.status_code == 303
    after = _counts(store, b1)
    assert after == (before[0] + 1, before[1] + 1, before[2] + 1)
    replay = _post(f"{base}/batch/{b1}/rate", headers=bob,
                        data={"form_token": form, "sample": sample, "score": "2"})
    assert replay.status_code == 403 and "already submitted" in replay.text and _counts(store, b1) == after
    # a stale token: adding the rater again replaces it
    old = site["tokens"]["bob"]["token"]
    site["tokens"]["bob"] = rating.add_rater("bob", store=store)
    stale = _post(f"{base}/batch/{b1}/rate", headers={"Authorization": f"Bearer {old}"},
                       data={"form_token": form, "sample": sample, "score": "1"})
    assert stale.status_code == 401 and "not valid" in stale.text and _counts(store, b1) == after
    assert _get(f"{base}/batch/{b1}", headers={"Authorization": f"Bearer {old}"}).status_code == 401


def test_agreement_page_shows_the_hand_computed_spearman(site: dict[str, Any], browser: Any) -> None:
    from selenium.webdriver.common.by import By

    store, b2 = site["store"], site["b2"]
    key = {(it.item_id): it.sample_key for it in store.batch_items(b2)}
    with store.session():
        for rater in ("alice", "bob"):
            for item, score in HUMAN2.items():
                rating.submit(store, rater, b2, rating.issue_form_token(store, rater), key[item], str(score))
    _login(browser, site["tokens"]["boss"]["url"])
    browser.get(site["base"] + "/agreement")
    section = browser.find_element(By.ID, "run-run2")
    # auto 0.1..0.5 ranks 1..5; human 1,3,2,5,4 ranks 1,3,2,5,4; sum d^2 = 4; rho = 1 - 6*4/(5*24) = 0.8
    assert section.find_element(By.CLASS_NAME, "spearman").text == "0.800"
    # thresholds 0.5: auto+ = {q4}; human (s-1)/4 >= 0.5 = {q1, q3, q4}; p_o = 3/5, p_e = 4/5*2/5 + 1/5*3/5 = 11/25
    # kappa = (0.6 - 0.44) / 0.56 = 0.2857
    assert section.find_element(By.CLASS_NAME, "kappa").text == "0.286"
    assert section.find_element(By.CLASS_NAME, "alpha").text == "1.000"  # two raters in full agreement
    cells = [c.text for c in section.find_elements(By.CSS_SELECTOR, ".confusion td")]
    assert cells == ["2", "2", "0", "1"]
    _shot(browser, "agreement.png")


def test_dashboard_pages_read_the_store(site: dict[str, Any]) -> None:
    base, store = site["base"], site["store"]
    boss = {"Authorization": f"Bearer {site['tokens']['boss']['token']}"}
    runs = _get(f"{base}/dashboard/runs?split=ha&status=complete", headers=boss).text
    assert "run1" in runs and "run2" in runs and "2 run(s)" in runs
    assert "0 run(s)" in _get(f"{base}/dashboard/runs?status=failed", headers=boss).text
    n = len(store.access_rows("ha"))
    samples = _get(f"{base}/dashboard/runs/run1", headers=boss).text
    assert "answer to q0" in samples
    last = store.access_rows("ha")[n:]
    assert [(r.actor, r.purpose, r.outcome, r.run_id) for r in last] == [
        ("boss", "dashboard", "read", "run1")]
    alice = {"Authorization": f"Bearer {site['tokens']['alice']['token']}"}
    page = _get(f"{base}/batch/{site['b1']}", headers=alice)  # a rater's page shows a sample: a read of this
    assert page.status_code == 200, page.text  # test's own (purpose human-audit-rating), not another test's
    access = _get(f"{base}/dashboard/access?split=ha", headers=boss).text
    assert "intact" in access and "human-audit-rating" in access


def _raw(port: int, request: bytes) -> bytes:
    """Send ``request`` (headers, perhaps part of a body) on a raw socket and return the response head: the server
    must answer without waiting for the rest of a declared body."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(65536)
            if not chunk:
                break
            head += chunk
        return head


def _new_rater(site: dict[str, Any], name: str) -> dict[str, str]:
    t = rating.add_rater(name, base_url=site["base"], store=site["store"])
    return {"Authorization": f"Bearer {t['token']}"}


def test_a_large_post_is_refused_before_its_body_is_read(site: dict[str, Any]) -> None:
    """A 300 MiB POST declared but never sent: answered at once (401 without a token, 413 with one), so the server
    neither waits for nor holds the body. Without a length, a streamed body is cut off at the limit."""
    port, b1 = site["port"], site["b1"]
    auth = _new_rater(site, "dora")["Authorization"]
    head = (f"POST /batch/{b1}/rate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/"
            f"x-www-form-urlencoded\r\nContent-Length: {300 * 2**20}\r\n").encode()
    assert _raw(port, head + b"\r\n").startswith(b"HTTP/1.1 401 ")
    assert _raw(port, head + f"Authorization: {auth}\r\n\r\n".encode()).startswith(b"HTTP/1.1 413 ")
    chunk = b"note=" + b"x" * 100_000
    chunked = (f"POST /batch/{b1}/rate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth}\r\n"
               f"Transfer-Encoding: chunked\r\n\r\n{len(chunk):x}\r\n").encode() + chunk + b"\r\n"
    assert _raw(port, chunked).startswith(b"HTTP/1.1 413 ")
    assert _raw(port, (f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {2**30}\r\n\r\n"
                       ).encode()).startswith(b"HTTP/1.1 413 ")


def test_a_form_from_a_null_or_foreign_origin_is_refused(site: dict[str, Any]) -> None:
    """``Origin: null`` and an origin matching only the client's own ``Host`` header (as a DNS-rebinding page
    sends) are refused; the server's configured address, under any loopback name, is accepted."""
    base, port, store, b1 = site["base"], site["port"], site["store"], site["b1"]
    erin = _new_rater(site, "erin")
    form, sample = _form(_get(f"{base}/batch/{b1}", headers=erin).text)
    before = _counts(store, b1)
    data = {"form_token": form, "sample": sample, "score": "2"}
    for extra in ({"Origin": "null"}, {"Origin": f"http://evil.example:{port}", "Host": f"evil.example:{port}"},
                  {"Origin": f"http://127.0.0.1:{port + 1}"}, {"Origin": f"https://127.0.0.1:{port}"}):
        r = _post(f"{base}/batch/{b1}/rate", headers={**erin, **extra}, data=data)
        assert (r.status_code, "cross-site" in r.text) == (403, True), extra
        assert _counts(store, b1) == before
    ok = _post(f"{base}/batch/{b1}/rate", headers={**erin, "Origin": f"http://localhost:{port}"}, data=data)
    assert ok.status_code == 303, ok.text[-300:]
    assert _counts(store, b1)[0] == before[0] + 1


def test_a_long_note_is_refused_and_stores_nothing(site: dict[str, Any]) -> None:
    base, store, b1 = site["base"], site["store"], site["b1"]
    fred = _new_rater(site, "fred")
    form, sample = _form(_get(f"{base}/batch/{b1}", headers=fred).text)
    before = _counts(store, b1)
    data = {"form_token": form, "sample": sample, "score": "2"}
    long = _post(f"{base}/batch/{b1}/rate", headers=fred, data={**data, "note": "n" * 4001})
    assert long.status_code == 400 and "more than the 4000 allowed" in html.unescape(long.text)
    huge = _post(f"{base}/batch/{b1}/rate", headers=fred, data={**data, "note": "n" * 2**21})
    assert huge.status_code == 413
    assert _counts(store, b1) == before
    assert _post(f"{base}/batch/{b1}/rate", headers=fred, data={**data, "note": "n" * 4000}).status_code == 303


def test_login_is_by_post_only(site: dict[str, Any]) -> None:
    """A link (GET ``/login?token=``) shows the form and sets no cookie: no page elsewhere can log a browser in as
    another rater. The form's POST logs in; a POST from another origin is refused."""
    from evalgate.human.web.app import COOKIE

    base, port = site["base"], site["port"]
    t = rating.add_rater("gina", base_url=base, store=site["store"])
    assert t["url"] == f"{base}/login#token={t['token']}"
    page = _get(f"{base}/login?token={t['token']}")
    assert page.status_code == 200 and 'method="post" action="/login"' in page.text
    assert "set-cookie" not in page.headers
    foreign = _post(f"{base}/login", data={"token": t["token"]}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403 and "set-cookie" not in foreign.headers
    null = _post(f"{base}/login", data={"token": t["token"]}, headers={"Origin": "null"})
    assert null.status_code == 403 and "set-cookie" not in null.headers
    ok = _post(f"{base}/login", data={"token": t["token"]}, headers={"Origin": f"http://127.0.0.1:{port}"})
    session = ok.cookies.get(COOKIE)
    assert ok.status_code == 303 and session and session != t["token"]  # a session id, not the rater's token
    home = _get(base + "/", headers={"Cookie": f"{COOKIE}={session}"})
    assert home.status_code == 200 and "gina" in home.text
    assert _get(base + "/", headers={"Cookie": f"{COOKIE}={t['token']}"}).status_code == 401


def test_the_gates_dashboard_shows_the_newest_gate_first(site: dict[str, Any]) -> None:
    # Inserted newest first, so neither insertion order nor gate_id order gives the order asked for: only created_at
    # does (the page used to order by a column the table does not have, and showed the oldest gates first).
    store = site["store"]
    boss = {"Authorization": f"Bearer {site['tokens']['boss']['token']}"}
    assert "No gate verdicts stored." in _get(f"{site['base']}/dashboard/gates", headers=boss).text
    with store.connect() as con:
        for gid, day in (("gate-a-new", "2026-11-30"), ("gate-z-old", "2026-01-05"), ("gate-m-mid", "2026-06-01")):
            con.execute("INSERT INTO gates (gate_id, name, policy_sha256, inputs_sha256, inputs, decision_runs, "
                        "verdict, reason, reasons, document, created_at, actor) VALUES (?, 'g', 'p', 'i', '{}', "
                        "'[]', 'pass', 'r', '[]', '{}', ?, 'boss')", [gid, f"{day} 12:00:00+00"])
    page = _get(f"{site['base']}/dashboard/gates", headers=boss).text
    shown = [g for g in re.findall(r"gate-[a-z]-(?:new|old|mid)", page)]
    assert shown == ["gate-a-new", "gate-m-mid", "gate-z-old"]
    assert "<td>{}</td>" in page and "<td>[]</td>" in page  # the JSON columns shown as their stored JSON text


@needs_browser
def test_logging_out_in_the_browser_ends_the_session_on_the_server(site: dict[str, Any], browser: Any) -> None:
    """The header's "log out" button: the browser drops the cookie, and the server ended the session, so the same
    cookie sent again (copied before logout) is refused."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from evalgate.human.web.app import COOKIE

    base = site["base"]
    t = rating.add_rater("hana", base_url=base, store=site["store"])
    _login(browser, t["url"])
    session = browser.get_cookie(COOKIE)["value"]
    assert session != t["token"]
    assert _get(base + "/", headers={"Cookie": f"{COOKIE}={session}"}).status_code == 200
    browser.find_element(By.ID, "logout").click()
    WebDriverWait(browser, 90).until(lambda d: d.current_url.endswith("/login"))
    assert browser.get_cookie(COOKIE) is None
    assert _get(base + "/", headers={"Cookie": f"{COOKIE}={session}"}).status_code == 401
